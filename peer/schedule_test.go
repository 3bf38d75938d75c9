package peer

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// TestPeerScheduleEvery runs a peer on the virtual clock (synctest): a
// schedule every second fires, pauses, resumes and goes away.
func TestPeerScheduleEvery(t *testing.T) { synctest.Test(t, testPeerScheduleEvery) }

func testPeerScheduleEvery(t *testing.T) {
	c := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2}).c
	ctx := t.Context()
	s, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "tick", Every: "1s", Overlap: "allow",
		Group: []byte(`{"mode": "parallel", "tasks": [{"handler": "echo", "payload": 1}]}`)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !strings.HasPrefix(s.ID, "s") || s.Every != "1s" || s.Next == nil {
		t.Fatalf("created = %+v", s)
	}
	time.Sleep(3200 * time.Millisecond) // virtual: the bubble's clock
	got, err := c.GetSchedule(ctx, s.ID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(got.Firings) < 3 {
		t.Fatalf("firings after 3.2 s = %+v; want >= 3", got.Firings)
	}
	for _, f := range got.Firings {
		if want := s.ID + "~"; !strings.HasPrefix(f.Group, want) {
			t.Fatalf("firing group %q; want prefix %q", f.Group, want)
		}
		g, err := c.GetGroup(ctx, f.Group, 5*time.Second)
		if err != nil || g.State != "SUCCEEDED" {
			t.Fatalf("group %s = %+v, %v", f.Group, g, err)
		}
	}
	list, err := c.ListSchedules(ctx)
	if err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Fatalf("list = %+v, %v", list, err)
	}

	// Pause stops firing.
	if p, err := c.PauseSchedule(ctx, s.ID, true); err != nil || !p.Paused || p.Next != nil {
		t.Fatalf("pause = %+v, %v", p, err)
	}
	paused, _ := c.GetSchedule(ctx, s.ID)
	time.Sleep(2200 * time.Millisecond) // virtual
	after, _ := c.GetSchedule(ctx, s.ID)
	if len(after.Firings) != len(paused.Firings) {
		t.Fatalf("paused schedule fired: %d -> %d firings", len(paused.Firings), len(after.Firings))
	}
	if r, err := c.PauseSchedule(ctx, s.ID, false); err != nil || r.Paused || r.Next == nil {
		t.Fatalf("resume = %+v, %v", r, err)
	}

	// Delete removes it.
	d, err := c.DeleteSchedule(ctx, s.ID)
	if err != nil || d.ID != s.ID {
		t.Fatalf("delete = %+v, %v", d, err)
	}
	_, err = c.GetSchedule(ctx, s.ID)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("get after delete = %v; want 404", err)
	}
	if list, _ := c.ListSchedules(ctx); len(list) != 0 {
		t.Fatalf("list after delete = %+v", list)
	}
}

func TestPeerScheduleBadInput(t *testing.T) {
	_, c, _ := startPeer(t, t.TempDir(), 1)
	ctx := t.Context()
	for _, tt := range []struct {
		req   api.CreateScheduleRequest
		field string
	}{
		{api.CreateScheduleRequest{Cron: "61 * * * *", Group: []byte(`{"tasks":[{"name":"a","handler":"echo"}]}`)}, "cron"},
		{api.CreateScheduleRequest{Cron: "0 2 * * *", Timezone: "Mars/Olympus", Group: []byte(`{"tasks":[{"name":"a","handler":"echo"}]}`)}, "timezone"},
		{api.CreateScheduleRequest{Every: "500ms", Group: []byte(`{"tasks":[{"name":"a","handler":"echo"}]}`)}, "every"},
		{api.CreateScheduleRequest{Every: "1s", Group: []byte(`{"tasks":[{"name":"a"}]}`)}, "group.tasks[0].handler"},
	} {
		_, err := c.CreateSchedule(ctx, &tt.req)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tt.field {
			t.Errorf("create %+v = %v; want 400 naming %q", tt.req, err, tt.field)
		}
	}
	if list, err := c.ListSchedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list = %+v, %v; want none", list, err)
	}
}

// TestPeerScheduleSkipsWithoutNewWork: an owner short of memory (or disk)
// fires nothing: each tick is a skipped firing; once it takes work again
// the schedule fires groups.
func TestPeerScheduleSkipsWithoutNewWork(t *testing.T) {
	synctest.Test(t, testPeerScheduleSkipsWithoutNewWork)
}

func testPeerScheduleSkipsWithoutNewWork(t *testing.T) {
	mp := startMemPeer(t, newMemNet(), "solo", Config{Slots: 2})
	c, ctx := mp.c, t.Context()
	mp.p.heap.set(2<<30, 1<<30)
	s, err := c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "tick", Every: "1s", Overlap: "allow",
		Group: []byte(`{"mode": "parallel", "tasks": [{"handler": "echo", "payload": 1}]}`)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	time.Sleep(3200 * time.Millisecond) // virtual: the bubble's clock
	short, err := c.GetSchedule(ctx, s.ID)
	if err != nil || len(short.Firings) < 2 {
		t.Fatalf("firings after 3.2 s short of memory = %+v, %v; want >= 2", short, err)
	}
	for _, f := range short.Firings[1:] { // the first tick may come before the first sweep
		if f.State != "SKIPPED" || f.Group != "" {
			t.Errorf("firing short of memory = %+v; want SKIPPED, no group", f)
		}
	}
	mp.p.heap.set(100<<20, 1<<30)
	time.Sleep(3200 * time.Millisecond) // virtual
	after, err := c.GetSchedule(ctx, s.ID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	last := after.Firings[len(after.Firings)-1]
	if last.Group == "" {
		t.Fatalf("firings once work is taken again = %+v; want a group", after.Firings)
	}
	if g, err := c.GetGroup(ctx, last.Group, 5*time.Second); err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("group %s = %+v, %v", last.Group, g, err)
	}
}
