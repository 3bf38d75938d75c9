package steal

import (
	"testing"
	"time"
)

// Out of the tail a thief gets what it asked for; in it, its free slots
// only, none when it has no free slot.
func TestTailCap(t *testing.T) {
	for _, c := range []struct {
		tail              bool
		free, asked, want int
	}{
		{tail: false, free: 0, asked: 3, want: 3},
		{tail: true, free: 0, asked: 3, want: 0},
		{tail: true, free: 1, asked: 3, want: 1},
		{tail: true, free: 5, asked: 3, want: 3},
		{tail: true, free: -2, asked: 3, want: 0}, // leases ahead held: Running > Slots
	} {
		if got := TailCap(c.tail, c.free, c.asked); got != c.want {
			t.Errorf("TailCap(%v, %d, %d) = %d; want %d", c.tail, c.free, c.asked, got, c.want)
		}
	}
}

// A backlog is in its tail at TailRounds tasks per draining slot, or when
// its slots run it within TailSlowRuns of the longest runs: W3's 20 ms and
// 400 ms tasks (58 ms on average) on 6 slots are in their tail at 82
// READY, uniform tasks at 24.
func TestInTail(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		ready, drain int
		run, slow    time.Duration
		want         bool
	}{
		{ready: 1000, drain: 20, run: 10 * ms, slow: 10 * ms},
		{ready: TailRounds*20 + 1, drain: 20, run: 10 * ms, slow: 10 * ms},
		{ready: TailRounds * 20, drain: 20, run: 10 * ms, slow: 10 * ms, want: true},
		{ready: TailRounds * 20, drain: 20, want: true},     // nothing timed yet: the count
		{ready: 10, drain: 0, run: 10 * ms, slow: 400 * ms}, // nobody drains it: no tail
		{ready: 82, drain: 6, run: 58 * ms, slow: 400 * ms, want: true},
		{ready: 83, drain: 6, run: 58 * ms, slow: 400 * ms},
		{ready: 25, drain: 6, run: 58 * ms, slow: 58 * ms},
		{ready: 1 << 40, drain: 6, run: time.Hour, slow: 2 * time.Hour}, // no overflow
	} {
		if got := InTail(c.ready, c.drain, c.run, c.slow, 2); got != c.want {
			t.Errorf("InTail(%d, %d, %v, %v) = %v; want %v", c.ready, c.drain, c.run, c.slow, got, c.want)
		}
	}
}

// Drainers counts each thief once, with its latest slots, over the
// current window and the one before, and forgets a thief two windows
// after it last asked.
func TestDrainersWindows(t *testing.T) {
	var d Drainers
	if got := d.Slots(t0, 2); got != 2 {
		t.Fatalf("no thief: %d slots, want own 2", got)
	}
	d.Asked(t0, "a", 4)
	d.Asked(t0.Add(10*time.Millisecond), "a", 4) // the same thief again
	d.Asked(t0.Add(20*time.Millisecond), "b", 2)
	if got := d.Slots(t0.Add(30*time.Millisecond), 2); got != 8 {
		t.Errorf("a(4) + b(2) + own 2 = %d, want 8", got)
	}
	d.Asked(t0.Add(40*time.Millisecond), "b", 3) // b's slots changed
	if got := d.Slots(t0.Add(50*time.Millisecond), 0); got != 7 {
		t.Errorf("a(4) + b(3) = %d, want 7", got)
	}
	// Next window: a asks again, b not; the window before still counts.
	d.Asked(t0.Add(drainWindow+time.Millisecond), "a", 4)
	if got := d.Slots(t0.Add(drainWindow+2*time.Millisecond), 0); got != 7 {
		t.Errorf("the window before counts: %d, want 7", got)
	}
	// The window after that: only a, asked in the window before.
	if got := d.Slots(t0.Add(2*drainWindow+2*time.Millisecond), 0); got != 4 {
		t.Errorf("b forgotten: %d, want 4", got)
	}
	// Silent for two windows: nobody.
	if got := d.Slots(t0.Add(5*drainWindow), 1); got != 1 {
		t.Errorf("after a silence: %d, want own 1", got)
	}
}

// "Not now" ends the request without a backoff, and for TailHold the
// thief asks for its free slots only.
func TestNotNowHoldsAheadWithoutBackoff(t *testing.T) {
	th := mustThief(t, 1, nil)
	now := t0
	th.Observe(Load{Peer: "v", Ready: 10, Slots: 2, At: now})
	self := Load{Peer: "me", Slots: 3, Running: 2}
	victim, _, ok := th.Next(now, self)
	if !ok || victim != "v" {
		t.Fatalf("Next = %q, %v", victim, ok)
	}
	if !th.Ahead(now) {
		t.Fatal("Ahead before any not-now")
	}
	th.NotNow(now, "v")
	if th.Ahead(now) || th.Ahead(now.Add(TailHold-time.Millisecond)) {
		t.Error("Ahead within TailHold of a not-now")
	}
	if !th.Ahead(now.Add(TailHold)) {
		t.Error("not Ahead TailHold after a not-now")
	}
	if !th.BackoffUntil("v").IsZero() {
		t.Errorf("not-now backed v off until %v", th.BackoffUntil("v"))
	}
	if _, out := th.Pending(now); out {
		t.Error("the request is still outstanding after its answer")
	}
	if v, _, ok := th.Next(now.Add(time.Millisecond), self); !ok || v != "v" {
		t.Errorf("v not asked again at once: %q, %v", v, ok)
	}
	if s := th.Stats(); s.NotNow != 1 || s.Refused != 0 {
		t.Errorf("stats %+v, want NotNow 1, Refused 0", s)
	}
}
