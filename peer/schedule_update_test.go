package peer

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// TestMemMeshScheduleUpdate changes a schedule through every peer of a
// mesh (owner or not): each change commits once, keeps the id and the
// firings, is refused the same way everywhere, lands in the audit trail,
// and survives the owner's stop.
func TestMemMeshScheduleUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, peers := startMemMesh(t, 3, 16)
		ctx := t.Context()
		s, err := peers[0].c.CreateSchedule(ctx, &api.CreateScheduleRequest{Name: "tick", Every: "1s", Overlap: "allow",
			Group: []byte(`{"mode": "parallel", "tasks": [{"handler": "echo", "payload": 1}]}`)})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		time.Sleep(2500 * time.Millisecond)
		before, _ := peers[0].c.GetSchedule(ctx, s.ID)
		if len(before.Firings) < 2 {
			t.Fatalf("firings = %+v", before.Firings)
		}
		str := func(v string) *string { return &v }
		for i, mp := range peers {
			cur, _ := mp.c.GetSchedule(ctx, s.ID)
			got, err := mp.c.UpdateSchedule(ctx, s.ID, &api.UpdateScheduleRequest{Name: str(fmt.Sprintf("via-p%d", i)), Every: str(fmt.Sprintf("%ds", i+2))}, cur.Revision)
			if err != nil {
				t.Fatalf("update through p%d: %v", i, err)
			}
			if got.ID != s.ID || got.Name != fmt.Sprintf("via-p%d", i) || got.Every != fmt.Sprintf("%ds", i+2) || got.Revision == cur.Revision ||
				len(got.Firings) < len(before.Firings) || !got.CreatedAt.Equal(before.CreatedAt) {
				t.Fatalf("updated through p%d = %+v", i, got)
			}
			// Refused the same way through every peer, changing nothing.
			_, err = mp.c.UpdateSchedule(ctx, s.ID, &api.UpdateScheduleRequest{Name: str("stale")}, cur.Revision)
			wantError(t, fmt.Sprintf("p%d: a stale revision", i), err, http.StatusPreconditionFailed, api.CodePreconditionFailed, "")
			_, err = mp.c.UpdateSchedule(ctx, s.ID, &api.UpdateScheduleRequest{Every: str("100ms")}, "")
			wantError(t, fmt.Sprintf("p%d: every under --min-every", i), err, http.StatusBadRequest, api.CodeInvalidArgument, "every")
			_, err = mp.c.UpdateSchedule(ctx, "s000000000000000000000000", &api.UpdateScheduleRequest{Name: str("x")}, "")
			wantError(t, fmt.Sprintf("p%d: an unknown schedule", i), err, http.StatusNotFound, api.CodeNotFound, "")
			if now, _ := mp.c.GetSchedule(ctx, s.ID); now.Revision != got.Revision {
				t.Fatalf("p%d: a refused update changed the schedule: %+v", i, now)
			}
		}
		// A paused schedule stays paused across an update.
		if _, err := peers[1].c.PauseSchedule(ctx, s.ID, true); err != nil {
			t.Fatal(err)
		}
		got, err := peers[2].c.UpdateSchedule(ctx, s.ID, &api.UpdateScheduleRequest{Cron: str("*/2 * * * * *")}, "")
		if err != nil || !got.Paused || got.Next != nil || got.Every != "" || got.Cron != "*/2 * * * * *" {
			t.Fatalf("update of a paused schedule = %+v, %v", got, err)
		}
		entries, err := peers[0].c.Audit(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		var updates []api.AuditEntry
		for _, e := range entries {
			if e.Action == "schedule_updated" && e.Subject == s.ID {
				updates = append(updates, e)
			}
		}
		if len(updates) != 4 || !slices.Equal(updates[0].Fields, []string{"cron", "every"}) ||
			!slices.Equal(updates[1].Fields, []string{"name", "every"}) || updates[0].By == "" {
			t.Fatalf("audit of the updates = %+v", updates)
		}
		// The owner stops: another peer serves the schedule as updated.
		var owner string
		_ = peers[0].p.read(ctx, func(n *node.Node) error { owner = n.Owner(shard.GroupID(s.ID)); return nil })
		var rest []*memPeer
		for _, mp := range peers {
			if mp.p.tr.ID() == owner {
				mp.stop()
			} else {
				rest = append(rest, mp)
			}
		}
		waitFor(t, "a new owner serves the schedule", time.Minute, func() bool {
			v, err := rest[0].c.GetSchedule(ctx, s.ID)
			return err == nil && v.Revision == got.Revision && v.Paused && v.Cron == "*/2 * * * * *"
		})
	})
}
