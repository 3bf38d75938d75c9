package api

import (
	"context"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// Raw JSON that is not UTF-8 (a payload, a pipeline item, a worker's
// result) is a 400 naming it, and nothing is created. encoding/json keeps
// such bytes in a json.RawMessage as they are; a peer stored them and
// answered them, and every strict client (Python's json) then failed on
// each page of GET /v1/tasks holding the task (audit s77, F10).
func TestRawJSONNotUTF8IsRefused(t *testing.T) {
	submitted := 0
	f := &fakeBackend{SubmitFn: func(context.Context, *shard.GroupSpec) (SubmitResult, error) {
		submitted++
		return SubmitResult{Group: "g1", Tasks: []shard.TaskID{"g1.0"}, Created: true}, nil
	}}
	h := newTestHandler(f, HandlerOptions{})
	ct := []string{"Content-Type", "application/json"}
	for _, tt := range []struct{ target, body, field string }{
		{"/v1/tasks", "{\"handler\": \"echo\", \"payload\": \"\xff\xfe\"}", "payload"},
		{"/v1/tasks", "{\"handler\": \"echo\", \"payload\": {\"a\": [1, \"x\xc3\"]}}", "payload"},
		{"/v1/groups", "{\"mode\": \"parallel\", \"tasks\": [{\"handler\": \"echo\"}, {\"handler\": \"echo\", \"payload\": \"\xff\"}]}", "tasks[1].payload"},
		{"/v1/groups", "{\"mode\": \"pipeline\", \"stages\": [{\"name\": \"a\", \"handler\": \"echo\"}], \"items\": [1, \"\xed\xa0\x80\"]}", "items[1]"},
	} {
		r := call(t, h, "POST", tt.target, tt.body, ct...)
		if e := errorOf(t, r); r.status != 400 || e.Field != tt.field {
			t.Errorf("POST %s %q = %d %s; want 400 naming %s", tt.target, tt.body, r.status, r.body, tt.field)
		}
	}
	if submitted != 0 {
		t.Errorf("%d submissions reached the backend; want none", submitted)
	}
	// UTF-8 beyond ASCII is taken as it is.
	if r := call(t, h, "POST", "/v1/tasks", `{"handler": "echo", "payload": "café ✓"}`, ct...); r.status != 201 || submitted != 1 {
		t.Errorf("POST /v1/tasks with a UTF-8 payload = %d %s; want 201", r.status, r.body)
	}

	var c CompleteRequest
	if err := DecodeComplete([]byte("{\"result\": \"\xff\"}"), &c); fieldOf(err) != "result" {
		t.Errorf("DecodeComplete of a result not UTF-8 = %v; want an error naming result", err)
	}
	if err := DecodeComplete([]byte(`{"result": "café"}`), &c); err != nil {
		t.Errorf("DecodeComplete of a UTF-8 result = %v", err)
	}
	lease := "0123456789abcdef0123456789abcdef"
	_, err := DecodeDone([]byte("[{\"lease\": \""+lease+"\", \"result\": {\"k\": \"\xc0\xaf\"}}]"), "done")
	if fieldOf(err) != "done[0].result" {
		t.Errorf("DecodeDone of a result not UTF-8 = %v; want an error naming done[0].result", err)
	}
}

// fieldOf returns the field a *FieldError names ("" for another error or
// none).
func fieldOf(err error) string {
	if fe, ok := err.(*FieldError); ok {
		return fe.Field
	}
	return ""
}
