package shard

import (
	"math/rand/v2"
	"testing"
	"time"
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

// TestOnDue checks that Config.OnDue marks a shard whenever NextDue
// becomes due, as the Node's set of partitions with timers relies on: a
// mark is cleared when NextDue finds nothing, as the Node does, and
// NextDue must never be due while unmarked.
func TestOnDue(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		marked, calls := false, 0
		o := newOwner(t)
		o.s.cfg.OnDue = func() { marked, calls = true, calls+1 }
		o.s.SetLeader(false, o.now)
		o.s.SetLeader(true, o.now)
		r := rand.New(rand.NewPCG(seed, 4))
		for range 30 {
			runRandom(o, r, 1)
			o.advance(time.Duration(r.IntN(10)) * time.Second)
			if _, due := o.s.NextDue(); !due {
				marked = false
			} else if !marked {
				t.Fatalf("seed %d: NextDue is due but OnDue was not called since it was last empty", seed)
			}
		}
		if calls == 0 {
			t.Fatalf("seed %d: OnDue never called", seed)
		}
	}
}

// TestOnDueCalls names what must call Config.OnDue: a delayed task's
// timer armed, a group finished (its retention removal), the leadership
// switched on.
func TestOnDueCalls(t *testing.T) {
	calls := 0
	o := newOwner(t)
	o.s.cfg.OnDue = func() { calls++ }
	expect := func(what string, f func()) {
		t.Helper()
		before := calls
		f()
		if calls == before {
			t.Fatalf("%s did not call OnDue", what)
		}
	}
	expect("a delayed task", func() {
		o.submit(GroupSpec{ID: "d", Mode: ModeDAG, Tasks: []TaskSpec{{Name: "a", Handler: "h", Delay: 5 * time.Second}}})
	})
	o.advance(6 * time.Second)
	ids := o.lease(1, "w")
	if len(ids) != 1 {
		t.Fatalf("leased %v", ids)
	}
	expect("a group finished", func() {
		if err := o.report(ids[0], "w", true, false); err != nil {
			t.Fatal(err)
		}
	})
	o.s.SetLeader(false, o.now)
	expect("the leadership switched on", func() { o.s.SetLeader(true, o.now) })
}
