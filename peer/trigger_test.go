package peer

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

func TestPeerScheduleTrigger(t *testing.T) {
	p, c, _ := startPeer(t, t.TempDir(), 2)
	ctx := t.Context()
	s, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "hourly", Every: "1h",
		Group: []byte(`{"mode": "parallel", "tasks": [{"name": "a", "handler": "echo", "payload": 1}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.TriggerSchedule(ctx, s.ID, "k1")
	if err != nil || !tr.Created || tr.Tasks["a"] == "" {
		t.Fatalf("trigger = %+v, %v", tr, err)
	}
	if sid, _, _, ok := shard.ParseTriggeredGroupID(shard.GroupID(tr.Group)); !ok || string(sid) != s.ID {
		t.Fatalf("group id %q is not a manual firing of %s", tr.Group, s.ID)
	}
	if g, err := c.GetGroup(ctx, tr.Group, 10*time.Second); err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("triggered group = %+v, %v", g, err)
	}
	again, err := c.TriggerSchedule(ctx, s.ID, "k1")
	if err != nil || again.Created || again.Group != tr.Group || again.Tasks["a"] != tr.Tasks["a"] {
		t.Fatalf("repeat with the same key = %+v, %v; want 200 with %s", again, err, tr.Group)
	}
	n1, err1 := c.TriggerSchedule(ctx, s.ID, "")
	n2, err2 := c.TriggerSchedule(ctx, s.ID, "")
	if err1 != nil || err2 != nil || !n1.Created || !n2.Created || n1.Group == n2.Group {
		t.Fatalf("two triggers without a key = %+v %v, %+v %v; want two firings", n1, err1, n2, err2)
	}
	got, err := c.GetSchedule(ctx, s.ID)
	if err != nil || got.Next == nil || !got.Next.Equal(*s.Next) || len(got.Firings) != 3 {
		t.Fatalf("schedule after triggers = %+v, %v; want next %v and 3 firings", got, err, s.Next)
	}
	for _, f := range got.Firings {
		if !f.Manual {
			t.Fatalf("firing %+v not marked manual", f)
		}
	}
	// Paused: a manual run is allowed and the pause stays.
	if _, err := c.PauseSchedule(ctx, s.ID, true); err != nil {
		t.Fatal(err)
	}
	if pt, err := c.TriggerSchedule(ctx, s.ID, "paused"); err != nil || !pt.Created {
		t.Fatalf("trigger while paused = %+v, %v", pt, err)
	}
	if got, _ := c.GetSchedule(ctx, s.ID); !got.Paused {
		t.Fatal("the trigger resumed the schedule")
	}
	var audit []shard.AuditEntry
	if err := p.read(ctx, func(n *node.Node) error { audit = n.Audit(); return nil }); err != nil {
		t.Fatal(err)
	}
	triggers := 0
	for _, a := range audit {
		if a.Type == shard.EvScheduleTriggered && strings.HasPrefix(a.Subject, s.ID+"~") && a.By != "" {
			triggers++
		}
	}
	if triggers != 4 {
		t.Fatalf("audit has %d triggers; want 4: %+v", triggers, audit)
	}
	for _, id := range []string{"sdead", s.ID} {
		if id == s.ID {
			if _, err := c.DeleteSchedule(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.TriggerSchedule(ctx, id, "")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Fatalf("trigger of %s = %v; want 404", id, err)
		}
	}
}

// A scheduled broadcast runs one copy on every matching live peer at each
// firing (here the one peer, named and pinned by its id); a template no
// live peer matches is accepted (one may join) but a trigger says why.
func TestPeerScheduledBroadcast(t *testing.T) {
	p, c, _ := startPeer(t, t.TempDir(), 2)
	ctx := t.Context()
	s, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "everywhere", Every: "1h",
		Group: []byte(`{"mode": "broadcast", "tasks": [{"handler": "echo", "payload": 1}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.TriggerSchedule(ctx, s.ID, "b1")
	if err != nil || !tr.Created {
		t.Fatalf("trigger = %+v, %v", tr, err)
	}
	g, err := c.GetGroup(ctx, tr.Group, 10*time.Second)
	self := p.tr.ID()
	if err != nil || g.State != "SUCCEEDED" || len(g.Tasks) != 1 || g.Tasks[0].Pin != self || g.Tasks[0].Name != self {
		t.Fatalf("broadcast firing = %+v, %v; want one copy pinned to %s", g, err, self)
	}
	gpu, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "gpus", Every: "1h",
		Group: []byte(`{"mode": "broadcast", "tasks": [{"handler": "echo", "require": ["gpu=true"]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TriggerSchedule(ctx, gpu.ID, "")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "group.tasks[0].require" || !strings.Contains(ae.Message, "gpu=true") {
		t.Fatalf("trigger with no matching peer: %v; want a 400 naming group.tasks[0].require", err)
	}
	_, err = c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "pinned", Every: "1h",
		Group: []byte(`{"mode": "broadcast", "tasks": [{"handler": "echo", "pin": "x"}]}`)})
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.HasPrefix(ae.Field, "group.tasks[0].pin") {
		t.Fatalf("pinned template: %v; want a 400 naming group.tasks[0].pin", err)
	}
}
