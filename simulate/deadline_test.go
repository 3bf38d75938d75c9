package simulate

import (
	"slices"
	"testing"
)

// TestIdleSleeps: nodes wake at their deadlines, not every timer slot. A
// lone idle peer wakes once per heartbeat; on a mesh, whose partitions
// quiesce (no Raft ticks), for the failure detector: its probe period
// (500 ms) and the indirect check half a period after each probe, which
// the simulator's wakeup keeps when the ack came first (the runtime resets
// its timer): 3.2 per node per second with 3 peers, 4.0 with 5 (2.1 with
// heartbeats to every peer every second, which cost O(N) at scale; Raft
// ticks made it 12). With 5 peers the founder keeps copies of partitions
// it is no replica of any more, which tick for nothing (3.85 when they
// did).
func TestIdleSleeps(t *testing.T) {
	for _, b := range []struct {
		peers   int
		perNode float64 // wakeups per node per virtual second, at most
	}{{1, 1.1}, {3, 3.5}, {5, 4.5}} {
		r := mustRun(t, Config{Seed: 1, Peers: b.peers, Workload: "idle", Faults: []string{}})
		if r.Failed() {
			t.Fatalf("peers %d: %v", b.peers, r.Violations)
		}
		if r.SimSeconds < idleFor.Seconds() {
			t.Errorf("peers %d: ran %.0f s; want the idle workload's %v", b.peers, r.SimSeconds, idleFor)
		}
		if got := float64(r.Wakeups) / float64(b.peers) / r.SimSeconds; got > b.perNode {
			t.Errorf("peers %d: %.1f wakeups per node per second idle; want at most %.1f", b.peers, got, b.perNode)
		}
	}
}

// TestWorkloadsByDeadline runs the workloads TestSeedsMesh does not (sched
// has TestSchedSeeds) on a few seeds, with and without faults, driven by
// the nodes' deadlines: no invariant breaks and every task finishes (a
// timer the deadline missed would leave a task waiting until the liveness
// bound).
func TestWorkloadsByDeadline(t *testing.T) {
	t.Parallel()
	for _, wl := range []string{"w1", "w2", "w3", "placement"} {
		for seed := uint64(1); seed <= 3; seed++ {
			for _, faults := range [][]string{{}, slices.Clone(FaultKinds)} {
				cfg := Config{Seed: seed, Peers: 3, Tasks: 60, Workload: wl, Faults: faults}
				r := mustRun(t, cfg)
				if r.Failed() {
					t.Errorf("%s\nreplay: %s", r.Violations[0], cfg.ReplayCommand())
				}
			}
		}
	}
}
