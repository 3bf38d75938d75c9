package api

import "testing"

// "key": "" is a 400 naming key on every request that takes one, never
// "no key" (trial s82: it was taken as none, so a client whose key
// variable was unset created its work again on every repeat). A null
// key, or none, is no key.
func TestEmptyKeyIsRefused(t *testing.T) {
	f := &fakeBackend{}
	h := NewHandler(allBackend{fakeBackend: f}, HandlerOptions{Limits: testLimits()})
	const group = `{"mode":"parallel","tasks":[{"handler":"echo"}]`
	for _, tt := range []struct{ target, body, field string }{
		{"/v1/tasks", `{"handler":"echo","key":""}`, "key"},
		{"/v1/groups", group + `,"key":""}`, "key"},
		{"/v1/groups", `{"key":"","mode":"dag","tasks":[{"name":"\u0061","handler":"echo"}]}`, "key"}, // an escape: the slow decoder's path
		{"/v1/schedules", `{"every":"1h","group":` + group + `},"key":""}`, "key"},
		{"/v1/schedules", `{"every":"1h","group":` + group + `,"key":""}}`, "group.key"},
		{"/v1/schedules/s1/trigger", `{"key":""}`, "key"},
		{"/v1/tasks/g1.0/retry", `{"key":""}`, "key"},
		{"/v1/groups/g1/retry", `{"key":""}`, "key"},
	} {
		r := call(t, h, "POST", tt.target, tt.body, "Content-Type", "application/json")
		if e := errorOf(t, r); r.status != 400 || e.Code != CodeInvalidArgument || e.Field != tt.field {
			t.Errorf("POST %s %s = %d %s; want 400 naming %s", tt.target, tt.body, r.status, r.body, tt.field)
		}
	}
	if n := len(f.specs); n != 0 {
		t.Errorf("%d groups submitted; want none", n)
	}
	for _, body := range []string{`{"handler":"echo","key":null}`, `{"handler":"echo"}`} {
		if r := call(t, h, "POST", "/v1/tasks", body, "Content-Type", "application/json"); r.status != 201 {
			t.Errorf("POST /v1/tasks %s = %d %s; want 201", body, r.status, r.body)
		}
	}
	if r := call(t, h, "POST", "/v1/groups", group+`,"key":null}`, "Content-Type", "application/json"); r.status != 201 {
		t.Errorf("POST /v1/groups with a null key = %d %s; want 201", r.status, r.body)
	}
	if got := f.specs; len(got) != 3 || got[0].Key != "" || got[2].Key != "" {
		t.Errorf("submitted %d groups (keys %v); want 3 without a key", len(got), got)
	}
}
