package api

import (
	"context"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// A cancel takes no body: one it does not understand is a 400 naming what
// is wrong, and nothing is canceled, rather than a cancel that ignored
// what it was sent (audit s77, F1). No body, or {}, cancels as before.
func TestCancelRefusesABody(t *testing.T) {
	var canceled []string
	f := &fakeBackend{
		CancelTaskFn: func(_ context.Context, id shard.TaskID, _ string) (shard.TaskView, error) {
			canceled = append(canceled, string(id))
			return shard.TaskView{ID: id, Group: id.Group(), Handler: "echo", State: shard.Canceled}, nil
		},
		CancelGroupFn: func(_ context.Context, id shard.GroupID, _ string) (shard.GroupView, error) {
			canceled = append(canceled, string(id))
			return shard.GroupView{ID: id, Mode: shard.ModeParallel, State: shard.GroupCanceled}, nil
		},
	}
	h := newTestHandler(f, HandlerOptions{})
	ct := []string{"Content-Type", "application/json"}
	for _, target := range []string{"/v1/tasks/g1.0/cancel", "/v1/groups/g1/cancel"} {
		for _, tt := range []struct{ body, field, msg string }{
			{`{"reason": "stuck"}`, "reason", "unknown field"},
			{`{bad`, "", "malformed JSON"},
			{`[]`, "", "want"},
			{`{"a": "` + strings.Repeat("x", maxNoBody) + `"}`, "", "takes no body"},
		} {
			canceled = nil
			r := call(t, h, "POST", target, tt.body, ct...)
			e := errorOf(t, r)
			if r.status != 400 || e.Field != tt.field || !strings.Contains(e.Message, tt.msg) || len(canceled) != 0 {
				t.Errorf("POST %s %.40s = %d %s (canceled %v); want 400 naming %q (%s), nothing canceled",
					target, tt.body, r.status, r.body, canceled, tt.field, tt.msg)
			}
		}
		for _, body := range []string{"", "{}", " { } \n"} {
			canceled = nil
			hdr := ct
			if body == "" {
				hdr = nil
			}
			if r := call(t, h, "POST", target, body, hdr...); r.status != 200 || len(canceled) != 1 {
				t.Errorf("POST %s %q = %d %s (canceled %v); want 200, canceled", target, body, r.status, r.body, canceled)
			}
		}
	}
}
