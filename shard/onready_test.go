package shard

import (
	"math/rand/v2"
	"testing"
)

// TestOnReady checks that Config.OnReady follows the READY queue through
// random submissions, leases, outcomes and timers, and through a restore
// onto a shard with READY tasks of its own and onto an empty one.
func TestOnReady(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		var marked, calls int
		o := newOwner(t)
		watch := func(on bool) {
			calls++
			if on {
				marked++
			} else {
				marked--
			}
		}
		o.s.cfg.OnReady, o.s.ready.onReady = watch, watch
		r := rand.New(rand.NewPCG(seed, 3))
		for range 20 {
			runRandom(o, r, 1)
			if want := min(o.s.ReadyLen(), 1); marked != want {
				t.Fatalf("seed %d: marked %d with %d READY tasks", seed, marked, o.s.ReadyLen())
			}
		}
		if calls == 0 {
			t.Fatalf("seed %d: OnReady never called", seed)
		}
		// Restore a shard with READY tasks over this one, then an empty one.
		full := newOwner(t)
		full.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b")}})
		for _, snap := range [][]byte{full.s.Snapshot(), newOwner(t).s.Snapshot()} {
			if err := o.s.Restore(snap); err != nil {
				t.Fatal(err)
			}
			if want := min(o.s.ReadyLen(), 1); marked != want {
				t.Fatalf("seed %d: after a restore marked %d with %d READY tasks", seed, marked, o.s.ReadyLen())
			}
		}
	}
}
