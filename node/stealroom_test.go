package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// The runtime sizes its job queue for the runs a peer holds at most,
// Slots x (1 + LeaseAhead). A peer that asked for a steal while it had
// nothing of its own, then got a backlog of its own, leased it up to that
// bound and took the grant on top: a restarted peer under load held
// 400-700 runs for 387 places. Its own leases stop short of the bound by
// the tasks of the request in flight, and only while it is in flight.
func TestOwnLeasesLeaveRoomForStealInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		asked    int           // tasks of the steal request sent
		age      time.Duration // how long ago it went out
		reserved int           // slots the own leases leave for it
	}{
		{"no request", 0, 0, 0},
		{"request in flight", 20, 0, 20},
		{"request abandoned", 20, 2 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.tick(time.Second)
			bound := h.n.cfg.Slots * (1 + h.n.cfg.LeaseAhead)
			// Millisecond tasks whose leases commit in 100 ms: the pacer
			// holds as many leases ahead as LeaseAhead allows.
			h.n.pace.run, h.n.pace.commit = float64(time.Millisecond), float64(100*time.Millisecond)
			h.n.steal.asked, h.n.steal.askedAt = tc.asked, h.now.Add(-tc.age)
			if r := h.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(bound + 50)}); r.Err != nil {
				t.Fatal(r.Err)
			}
			if want := bound - tc.reserved; h.n.busy != want {
				t.Fatalf("busy %d with %d tasks asked for %v ago, want %d (bound %d)", h.n.busy, tc.asked, tc.age, want, bound)
			}
		})
	}
}
