package api

import (
	"testing"
)

// An id that is not UTF-8 is a 400 naming id on every route that takes
// one, from any peer. Before, the forward over the mesh re-encoded it
// (JSON turns 0xff into U+FFFD), so the peer owning the partition of the
// id asked was asked for another id: a 503 unavailable or a 404 by
// partition (audit s77, F13).
func TestIDsNotUTF8AreMalformed(t *testing.T) {
	h := NewHandler(&fakeSchedules{}, HandlerOptions{Limits: testLimits()})
	for _, tt := range []struct{ method, target string }{
		{"GET", "/v1/tasks/%ff.0"},
		{"GET", "/v1/tasks/g%fe.0/events"},
		{"POST", "/v1/tasks/%ff.0/cancel"},
		{"GET", "/v1/groups/%ff"},
		{"POST", "/v1/groups/a%ffb/cancel"},
		{"GET", "/v1/schedules/%ff"},
		{"DELETE", "/v1/schedules/s%ff"},
		{"POST", "/v1/schedules/s%ff/pause"},
	} {
		r := call(t, h, tt.method, tt.target, "")
		if e := errorOf(t, r); r.status != 400 || e.Code != CodeInvalidArgument || e.Field != "id" {
			t.Errorf("%s %s = %d %s; want 400 invalid_argument naming id", tt.method, tt.target, r.status, r.body)
		}
	}
	// A UTF-8 id outside ASCII is still an id (a key's group may hold any).
	if r := call(t, h, "GET", "/v1/groups/%C3%A9", ""); r.status != 404 {
		t.Errorf("GET /v1/groups/é = %d %s; want 404", r.status, r.body)
	}
}
