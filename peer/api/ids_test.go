package api

import (
	"strings"
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
}

// A group id that can never exist is a 400 naming id, as a task id's is:
// one of a character no group id holds (the mesh makes them of letters,
// digits, '~', '-' and '_'), too long, or a task's id; a task id whose
// group part is such is one too. Each was a 404 (the group route) or a
// search of the mesh for it (the task route's group part).
func TestGroupIDsThatCannotExist(t *testing.T) {
	h := NewHandler(&fakeSchedules{}, HandlerOptions{Limits: testLimits()})
	long := strings.Repeat("g", 513)
	for _, tt := range []struct{ method, target, msg string }{
		{"GET", "/v1/groups/%C3%A9", "malformed group id"},
		{"GET", "/v1/groups/a%20b", "malformed group id"},
		{"GET", "/v1/groups/a%2Fb", "malformed group id"},
		{"GET", "/v1/groups/a%00b", "malformed group id"},
		{"GET", "/v1/groups/" + long, "malformed group id"},
		{"POST", "/v1/groups/" + long + "/cancel", "malformed group id"},
		{"GET", "/v1/groups/g1.0", `"g1.0" is a task id, not a group id: its group is g1`},
		{"GET", "/v1/tasks/a%20b.0", "malformed task id"},
		{"GET", "/v1/tasks/" + long + ".0", "malformed task id"},
		{"POST", "/v1/tasks/a%2Fb.0/cancel", "malformed task id"},
		{"GET", "/v1/schedules/s%20x", "malformed schedule id"},
		{"DELETE", "/v1/schedules/s%C3%A9", "malformed schedule id"},
	} {
		r := call(t, h, tt.method, tt.target, "")
		if e := errorOf(t, r); r.status != 400 || e.Code != CodeInvalidArgument || e.Field != "id" || !strings.Contains(e.Message, tt.msg) {
			t.Errorf("%s %.60s = %d %s; want 400 invalid_argument naming id, saying %q", tt.method, tt.target, r.status, r.body, tt.msg)
		}
	}
	// Ids of the forms the mesh makes are looked up: unknown, a 404.
	for _, target := range []string{"/v1/groups/g3f1c9a0b1d2e3f4a5b6c7d8", "/v1/groups/s3f1c9a0b1d2e3f4a5b6c7d8~1767225600~n0a1b2c3d4e5f6a7b",
		"/v1/groups/g" + strings.Repeat("a", 511), "/v1/tasks/k3f1c9a0b1d2e3f4a5b6c7d8.4", "/v1/groups/s3f1c9a0b1d2e3f4a5b6c7d8~1767225600"} {
		if r := call(t, h, "GET", target, ""); r.status != 404 {
			t.Errorf("GET %.60s = %d %s; want 404", target, r.status, r.body)
		}
	}
}

// An id the mesh cannot have made is a 400 naming id on every route that
// takes one, whatever the route: "nope" was a 404 as a group (a lookup
// in the mesh) and a 400 as a task (trial s82). Each id below is of the
// alphabet ids are made of, only not of the shape of any.
func TestIDsOfNoKindAreMalformedOnEveryRoute(t *testing.T) {
	h := NewHandler(struct {
		allBackend
		UpdateBackend
	}{allBackend: allBackend{fakeBackend: &fakeBackend{}}}, HandlerOptions{Limits: testLimits()})
	bad := []string{"nope", "nope.0", "gnope", "g", "G3F1", "x3f1", "k3f1~1", "s3f1~", "s3f1~x", "s3f1~1~", "s3f1~1~a~b", "s~1", "s3f1~1~" + strings.Repeat("a", 65)}
	n := 0
	for _, pat := range h.Patterns() {
		method, path, _ := strings.Cut(pat, " ")
		if !strings.Contains(path, "{id}") || strings.HasPrefix(path, "/v1/peers/") {
			continue
		}
		n++
		for _, id := range bad {
			target := strings.Replace(path, "{id}", id, 1)
			r := call(t, h, method, target, "")
			if e := errorOf(t, r); r.status != 400 || e.Code != CodeInvalidArgument || e.Field != "id" || !strings.Contains(e.Message, "malformed") {
				t.Errorf("%s %s = %d %s; want 400 invalid_argument naming id, malformed", method, target, r.status, r.body)
			}
		}
	}
	if n < 14 { // tasks 5, groups 3, schedules 6 (PATCH among them)
		t.Errorf("%d routes take an id; the walk misses some (%v)", n, h.Patterns())
	}
}
