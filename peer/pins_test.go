package peer

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/needle-mesh/needle/node"
)

// A pin to a peer this peer's node forgot is a 400 naming it, on the task,
// group and schedule routes, and creates nothing; a pin to a well-formed id
// that is not a member yet is accepted, and the task waits for it.
func TestSubmitPinForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2})
		if err := mp.p.read(t.Context(), func(n *node.Node) error { n.Forget("gone"); return nil }); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct{ path, body, field string }{
			{"/v1/tasks", `{"handler": "echo", "pin": "gone"}`, "pin"},
			{"/v1/groups", `{"mode": "parallel", "tasks": [{"handler": "echo", "pin": "later"}, {"handler": "echo", "pin": "gone"}]}`, "tasks[1].pin"},
			{"/v1/schedules", `{"name": "s", "every": "1h", "group": {"mode": "parallel", "tasks": [{"handler": "echo", "pin": "gone"}]}}`, "group.tasks[0].pin"},
		} {
			status, data := wcall(t, mp.c, "POST", tt.path, tt.body)
			if status != http.StatusBadRequest || !strings.Contains(string(data), `"field":"`+tt.field+`"`) || !strings.Contains(string(data), "was forgotten") {
				t.Errorf("POST %s pinned to a forgotten peer = %d %s; want 400 naming %s", tt.path, status, data, tt.field)
			}
		}
		if status, data := wcall(t, mp.c, "GET", "/v1/tasks", ""); status != http.StatusOK || strings.Contains(string(data), `"pin"`) {
			t.Errorf("tasks after the refusals = %d %s; want none pinned", status, data)
		}
		status, data := wcall(t, mp.c, "POST", "/v1/tasks?wait=0s", `{"handler": "echo", "pin": "later"}`)
		if status != http.StatusCreated {
			t.Fatalf("POST pinned to a peer not a member yet = %d %s; want 201", status, data)
		}
		var created struct{ ID string }
		if err := json.Unmarshal(data, &created); err != nil {
			t.Fatal(err)
		}
		v, err := mp.c.GetTask(t.Context(), created.ID, 0)
		if err != nil || v.State != "READY" || !strings.Contains(v.Waiting, "not a member of the mesh (yet") {
			t.Errorf("task pinned to a peer not a member yet = %+v, %v; want READY, waiting for it to join", v, err)
		}
	})
}
