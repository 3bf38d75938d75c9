package steal

import "time"

// The tail of a backlog. A thief asks for a few tasks beyond its free
// slots (Prefetch, and the node's lease-ahead), so that a slot that frees
// finds its next task already leased instead of idling for a steal's round
// trip. While the victim's backlog is long that is free. At its end it is
// not: a task leased ahead waits in the thief's queue behind a whole run
// while other peers' slots idle with nothing left to steal, and the
// makespan ends a queued task's wait later than it had to (W3-like skew at
// 1,000 peers: the last 400 ms tasks waited behind 400 ms runs, 1.20 x LB
// where list scheduling promises LB plus the longest task).
//
// So a victim whose READY backlog is in its tail (InTail) grants a thief
// only its free slots, and answers one with none "not now" (TailCap)
// rather than with a refusal that backs it off: the thief asks again when
// a slot frees, and does not ask ahead for TailHold.

// TailRounds is how many tasks per draining slot a backlog holds, at most,
// for it to count as a tail: the granularity at which its last tasks are
// spread over the slots that drain it.
const TailRounds = 4

// TailSlowRuns is how many of the longest runs lately seen the slots
// draining a backlog take to run it, at most, for it to count as a tail
// (InTail). A task held ahead waits behind a run for up to the longest,
// then runs, for up to the longest again; when the rest of the backlog
// drains sooner, its end is the makespan's. W3 on 3 peers (30 tasks of
// 400 ms among 270 of 20 ms, 6 slots): a thief granted two 400 ms tasks
// at 49 READY, twice TailRounds per slot, ran the second 270 ms after
// the others' slots could have, and half the runs ended at 1.12 x LB,
// not 1.09 (with 1, the same happened at a thief granted at 49 READY,
// over 41).
const TailSlowRuns = 2

// TailHold is how long a thief told "not now" asks only for its free
// slots.
const TailHold = time.Second

// InTail reports whether a backlog of ready tasks, drained by drainSlots
// slots, is in its tail: TailRounds tasks per slot or fewer, or, with run
// the mean run time and slow the longest run lately seen, few enough that
// the slots run it all within slowRuns times slow. No slots drain it: no
// tail.
func InTail(ready, drainSlots int, run, slow time.Duration, slowRuns int) bool {
	switch {
	case drainSlots <= 0:
		return false
	case ready <= TailRounds*drainSlots:
		return true
	case run <= 0 || slow <= run:
		return false
	}
	return float64(ready)*float64(run) <= float64(drainSlots)*float64(slowRuns)*float64(slow)
}

// TailCap returns the most tasks of its backlog a victim grants a thief
// with thiefFree free slots that asked for asked: in the tail (InTail) its
// free slots, out of it what it asked.
func TailCap(tail bool, thiefFree, asked int) int {
	if !tail {
		return asked
	}
	return min(asked, max(thiefFree, 0))
}

// drainWindow is how long a thief's request counts it among a victim's
// drainers.
const drainWindow = time.Second

// Drainers counts the slots that drain a victim's backlog: its own, and
// those of the distinct thieves that asked it in the current window or
// the one before (drainWindow each). Its state is bounded by the peers
// that asked in two windows.
type Drainers struct {
	start     time.Time
	cur, prev map[string]int
	curSum    int
	prevSum   int
}

// Asked records a steal request from thief, which has slots slots.
func (d *Drainers) Asked(now time.Time, thief string, slots int) {
	d.roll(now)
	if d.cur == nil {
		d.cur = map[string]int{}
	}
	slots = max(slots, 0)
	if old, ok := d.cur[thief]; ok {
		d.curSum -= old
	}
	d.cur[thief] = slots
	d.curSum += slots
}

// Slots returns own plus the slots of the thieves that asked in the
// current window or the one before (the larger of the two windows').
func (d *Drainers) Slots(now time.Time, own int) int {
	d.roll(now)
	return own + max(d.curSum, d.prevSum)
}

// roll starts a new window when the current one is over.
func (d *Drainers) roll(now time.Time) {
	switch {
	case d.start.IsZero():
		d.start = now
	case now.Sub(d.start) >= 2*drainWindow:
		clear(d.cur)
		clear(d.prev)
		d.curSum, d.prevSum, d.start = 0, 0, now
	case now.Sub(d.start) >= drainWindow:
		d.prev, d.cur = d.cur, d.prev
		clear(d.cur)
		d.prevSum, d.curSum, d.start = d.curSum, 0, now
	}
}
