package shard

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestWheelTimerLaterInTheCurrentSlot: an advance that lands in a timer's
// slot before the timer is due must not skip the slot for a revolution.
func TestWheelTimerLaterInTheCurrentSlot(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	w := newWheel(base)
	w.add(timer{at: base.Add(105 * time.Millisecond).UnixNano()})
	if out := w.advance(base.Add(101*time.Millisecond), nil); len(out) != 0 {
		t.Fatalf("fired %d timers 4 ms early", len(out))
	}
	if out := w.advance(base.Add(111*time.Millisecond), nil); len(out) != 1 {
		t.Fatalf("advance past the timer fired %d, want 1 (not a revolution later)", len(out))
	}
}

// TestWheelFiresOnTime checks random timers against random advances: each
// fires at the first advance at or after its time, never before.
func TestWheelFiresOnTime(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		base := time.Unix(1_700_000_000, 0)
		w := newWheel(base)
		now := base
		due := map[int64]int{} // at -> timers pending
		for step := 0; step < 2000; step++ {
			if r.IntN(3) == 0 {
				at := now.Add(time.Duration(r.Int64N(int64(15 * time.Second)))).UnixNano()
				w.add(timer{at: at})
				due[at]++
			}
			now = now.Add(time.Duration(r.Int64N(int64(30 * time.Millisecond))))
			for _, tm := range w.advance(now, nil) {
				if tm.at > now.UnixNano() {
					t.Fatalf("seed %d: timer at %d fired early at %d", seed, tm.at, now.UnixNano())
				}
				due[tm.at]--
			}
			for at, n := range due {
				if n > 0 && at <= now.UnixNano() {
					t.Fatalf("seed %d: timer due %v ago did not fire", seed, time.Duration(now.UnixNano()-at))
				}
			}
		}
	}
}

// An empty wheel moves without visiting its slots; a timer added after a
// long idle stretch still fires at its time, neither early nor a
// revolution late.
func TestWheelIdleThenTimer(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	w := newWheel(base)
	now := base.Add(time.Hour + 3*time.Millisecond)
	if out := w.advance(now, nil); len(out) != 0 {
		t.Fatalf("an empty wheel fired %d timers", len(out))
	}
	w.add(timer{at: now.Add(5 * time.Millisecond).UnixNano()})
	if out := w.advance(now.Add(4*time.Millisecond), nil); len(out) != 0 {
		t.Fatal("fired 1 ms early")
	}
	if out := w.advance(now.Add(6*time.Millisecond), nil); len(out) != 1 {
		t.Fatalf("advance past the timer fired %d, want 1", len(out))
	}
}

// TestWheelNext checks next against random timers and advances: it is the
// earliest timer not yet fired, and a stale answer is never late.
func TestWheelNext(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 2))
		base := time.Unix(1_700_000_000, 0)
		w := newWheel(base)
		now := base
		pending := map[int64]int{}
		for step := 0; step < 1000; step++ {
			if r.IntN(3) == 0 {
				// Up to two revolutions ahead, and a few overdue ones.
				at := now.Add(time.Duration(r.Int64N(int64(25*time.Second))) - 50*time.Millisecond).UnixNano()
				w.add(timer{at: at})
				pending[at]++
			}
			if r.IntN(2) == 0 {
				now = now.Add(time.Duration(r.Int64N(int64(2 * time.Second))))
				for _, tm := range w.advance(now, nil) {
					pending[tm.at]--
				}
			}
			var want int64
			found := false
			for at, n := range pending {
				if n > 0 && (!found || at < want) {
					want, found = at, true
				}
			}
			got, ok := w.next()
			if ok != found || got != want {
				t.Fatalf("seed %d step %d: next = %d, %v; want %d, %v", seed, step, got, ok, want, found)
			}
		}
	}
}

// TestWheelPrune: dropping the dead timers as NextDue does (all of them
// once the earliest is dead) fires the live timers as a wheel that keeps
// the dead ones does, in the same order, and next is never later than
// the earliest live timer, nor dead.
func TestWheelPrune(t *testing.T) {
	dead := func(tm *timer) bool { return tm.round == 1 }
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 3))
		base := time.Unix(1_700_000_000, 0)
		kept, pruned := newWheel(base), newWheel(base)
		now := base
		for step := 0; step < 1000; step++ {
			for range r.IntN(4) {
				// Up to two revolutions ahead, a few overdue, many in
				// the same slot; a third dead.
				at := now.Add(time.Duration(r.Int64N(int64(25*time.Second))/int64(1+r.IntN(200))) - 30*time.Millisecond).UnixNano()
				tm := timer{at: at, round: Round(r.IntN(3)), kind: timerKind(step)}
				kept.add(tm)
				pruned.add(tm)
			}
			at, ok := pruned.next()
			if ok && pruned.firstDead(at, dead) {
				pruned.prune(dead)
				held := 0
				for _, slot := range pruned.slots {
					held += len(slot)
					for k := range slot {
						if dead(&slot[k]) {
							t.Fatalf("seed %d step %d: a dead timer at %d is left after prune", seed, step, slot[k].at)
						}
					}
				}
				if held != pruned.n {
					t.Fatalf("seed %d step %d: %d timers held, the wheel counts %d", seed, step, held, pruned.n)
				}
				if at, ok = pruned.next(); ok && pruned.firstDead(at, dead) {
					t.Fatalf("seed %d step %d: the earliest timer at %d is dead after prune", seed, step, at)
				}
			}
			if r.IntN(3) == 0 {
				now = now.Add(time.Duration(r.Int64N(int64(time.Second))))
				var live []timer
				for _, tm := range kept.advance(now, nil) {
					if !dead(&tm) {
						live = append(live, tm)
					}
				}
				got := slices.DeleteFunc(pruned.advance(now, nil), func(tm timer) bool { return dead(&tm) })
				if !slices.Equal(got, live) {
					t.Fatalf("seed %d step %d: fired %v; want %v", seed, step, got, live)
				}
				for _, tm := range live {
					if !ok || tm.at < at {
						t.Fatalf("seed %d step %d: next %d (%v) is later than a live timer at %d", seed, step, at, ok, tm.at)
					}
				}
			}
		}
	}
}
