package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// wake moves the harness clock to the node's deadline and ticks there.
func (h *harness) wake() {
	h.tb.Helper()
	d := h.n.NextDeadline()
	if !d.After(h.now) {
		h.tb.Fatalf("deadline %v is not after the node's time %v with nothing due", d, h.now)
	}
	h.now = d
	h.n.Tick(h.now)
	h.stabilize()
}

// TestNextDeadlineIdle: a lone peer with nothing to do needs no Raft tick
// (its partitions have no follower) and no timer: it wakes once per
// heartbeat interval.
func TestNextDeadlineIdle(t *testing.T) {
	h := newHarness(t, 8)
	h.tick(10 * time.Millisecond)
	start := h.now
	wakes := 0
	for h.now.Sub(start) < time.Minute {
		h.wake()
		wakes++
	}
	if hb := int(time.Minute / h.n.cfg.HeartbeatEvery); wakes > hb+1 {
		t.Errorf("%d wakeups in a minute idle; want at most %d (one per heartbeat)", wakes, hb+1)
	}
}

// TestNextDeadlineTimers drives a node only by its deadlines (and the
// handlers' outcomes): a delayed task, a retried one and a lease that
// expires all happen on time, with a handful of wakeups.
func TestNextDeadlineTimers(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(10 * time.Millisecond)
	t0 := h.now
	h.submit(shard.GroupSpec{ID: "d", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "echo", Delay: 2500 * time.Millisecond}}})
	h.fail["f.0"] = true
	h.submit(shard.GroupSpec{ID: "f", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "fail",
		Retry: shard.Retry{MaxAttempts: 2, Backoff: 3 * time.Second, MaxBackoff: 3 * time.Second}}}})
	// A lease whose handler never reports: it expires (timeout plus grace)
	// and the task runs again.
	h.submit(shard.GroupSpec{ID: "x", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "hang", Timeout: 4 * time.Second}}})
	var hung []Run
	finish := func() {
		runs := h.runs[:0:0]
		for _, r := range h.runs {
			if r.Task == "x.0" && len(hung) == 0 {
				hung = append(hung, r)
				continue
			}
			runs = append(runs, r)
		}
		h.runs = runs
		h.step()
	}
	finish()
	wakes := 0
	var doneAt time.Duration
	for h.now.Sub(t0) < 30*time.Second {
		h.wake()
		wakes++
		finish()
		if v, _ := h.n.Task("d.0"); v.State == shard.Succeeded && doneAt == 0 {
			doneAt = h.now.Sub(t0)
		}
	}
	// Its timer, not a heartbeat's wakeup, runs it: at the timer slot
	// after 2.5 s.
	if want := 2500 * time.Millisecond; doneAt < want || doneAt > want+2*timerResolution {
		t.Errorf("delayed task done %v after submission; want %v (to the timer slot)", doneAt, want)
	}
	for _, id := range []shard.TaskID{"d.0", "f.0", "x.0"} {
		v, _ := h.n.Task(id)
		if !v.State.Terminal() {
			t.Errorf("%s = %v after 30 s driven by deadlines; want terminal", id, v.State)
		}
	}
	if h.started["x.0"] != 1 || len(hung) != 1 {
		t.Errorf("x.0 ran %d times after its hung run; want once again after the lease expired", h.started["x.0"])
	}
	if v, _ := h.n.Task("f.0"); v.Attempt != 2 {
		t.Errorf("f.0 attempt %d; want 2 (retried after its backoff)", v.Attempt)
	}
	if wakes > 60 {
		t.Errorf("%d wakeups in 30 s; want about one per heartbeat plus the timers", wakes)
	}
}

// TestShardTimersCacheNeverLate: the cached earliest shard timer is never
// later than a walk over every partition finds, as timers are armed in
// other partitions (delays of all lengths), fire, and groups finish and
// are removed; and a timer armed earlier than the cached one is seen at
// once.
func TestShardTimersCacheNeverLate(t *testing.T) {
	h := newHarness(t, 16)
	h.tick(10 * time.Millisecond)
	check := func(what string) {
		t.Helper()
		at, ok := h.n.shardTimers()
		fresh, fok := h.n.walkTimers()
		if fok && (!ok || at.After(fresh)) {
			t.Fatalf("%s: cached earliest timer %v (%v), a walk finds %v", what, at, ok, fresh)
		}
	}
	for i := range 40 {
		delay := time.Duration(40-i) * 250 * time.Millisecond // each earlier than the last
		h.submit(shard.GroupSpec{ID: shard.GroupID("d" + string(rune('a'+i%26)) + string(rune('a'+i/26))), Mode: shard.ModeSingle,
			Tasks: []shard.TaskSpec{{Handler: "echo", Delay: delay}}})
		check("after a submission")
		if at, ok := h.n.shardTimers(); !ok || at.After(h.now.Add(delay)) {
			t.Fatalf("submission %d: earliest timer %v (%v); want by %v", i, at, ok, h.now.Add(delay))
		}
		if i%5 == 0 {
			h.wake()
			h.step()
			check("after a wakeup")
		}
	}
	for range 50 {
		h.wake()
		h.step()
		check("after a wakeup")
	}
}

// TestNextDeadlineSkipsEndedLeases: a lease whose run succeeded long
// before its expiry leaves no deadline behind, so the node does not wake
// at that expiry to find nothing due (its timer stayed in the shard's
// wheel until it fired).
func TestNextDeadlineSkipsEndedLeases(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(10 * time.Millisecond)
	h.submit(shard.GroupSpec{ID: "e", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "echo", Timeout: time.Minute}}})
	h.step()
	h.tick(h.n.cfg.LeaseDefer)
	if v, _ := h.n.Task("e.0"); v.State != shard.Succeeded {
		t.Fatalf("e.0 = %v; want succeeded", v.State)
	}
	// The lease expired a minute and a grace after it was taken; the
	// group's removal is days away.
	h.n.timers.known = false
	if at, ok := h.n.shardTimers(); ok && at.Before(h.now.Add(time.Hour)) {
		t.Errorf("earliest shard timer %v after the task succeeded (%v from now); want none before its removal", at, at.Sub(h.now))
	}
}

// TestNextDeadlineSkipsCarriedCommits: a commit held back for a Raft tick
// (commit.go) that the next append carried leaves no deadline behind:
// NextDeadline reports what is still held, not when the flush was first
// set for.
func TestNextDeadlineSkipsCarriedCommits(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(10 * time.Millisecond)
	p := h.n.parts[h.n.held[0]]
	d0 := h.n.NextDeadline()
	due := h.now.Add(d0.Sub(h.now) / 2)
	if !due.After(h.now) {
		t.Fatalf("next deadline %v is not after the node's time %v", d0, h.now)
	}
	h.n.dueBy(p, due) // set for something released since
	if at, ok := h.n.nextHeld(); ok {
		t.Fatalf("nothing held, but nextHeld = %v", at)
	}
	if d := h.n.NextDeadline(); !d.Equal(d0) {
		t.Errorf("NextDeadline %v with nothing held; want %v, not the stale flush at %v", d, d0, due)
	}
	if h.n.holdParts.has(p.id) {
		t.Errorf("partition %d still marked holding after nextHeld found nothing", p.id)
	}
	p.commits = append(p.commits, heldCommit{to: "p2", due: due})
	h.n.dueBy(p, due)
	if at, ok := h.n.nextHeld(); !ok || !at.Equal(due) {
		t.Errorf("nextHeld = %v, %v with a commit held until %v", at, ok, due)
	}
	if d := h.n.NextDeadline(); !d.Equal(due) {
		t.Errorf("NextDeadline %v with a commit held until %v", d, due)
	}
	p.commits = nil
}
