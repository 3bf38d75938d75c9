package shard

import (
	"slices"
	"time"
)

// timerKind says what a timer does when it fires.
type timerKind uint8

const (
	timerReady    timerKind = iota + 1 // WAITING task reaches its not-before time
	timerExpiry                        // RUNNING task's lease expires
	timerSchedule                      // a schedule's next tick
)

type timer struct {
	at    int64    // unix nanoseconds
	task  *taskRef // timerReady, timerExpiry
	kind  timerKind
	round Round     // the lease round an expiry timer belongs to
	sched *schedule // timerSchedule
}

// taskRef is a timer's hold on its task: applyRemoved clears it, so a
// removed group's tasks are freed at once, not when their timers fire (a
// lease expiry can be a year away).
type taskRef struct{ t *task }

// wheel is a hashed timing wheel: slotCount slots of resolution each; a timer
// due beyond one revolution waits in its slot for later revolutions. Add is
// O(1); Advance visits only the slots passed since the last call. Stale
// timers (the task moved on) are dropped when they fire, or, when dead,
// before (prune).
type wheel struct {
	resolution int64     // nanoseconds per slot
	slots      [][]timer // wheelSlots of them once a timer was added; nil before
	cur        int64     // last tick fully past (time / resolution); the next advance starts after it
	n          int       // timers held
	// first is the earliest timer's time (unix nanoseconds) when
	// firstOK; add keeps it, advance that fires drops it (next finds it
	// again).
	first   int64
	firstOK bool
}

// A wheel of 256 slots turns in 2.56 s: a lease of 10 s waits four turns
// in its slot. Each partition a peer leads has a wheel, and a 1,000-peer
// mesh of 4,096 partitions held 100 MB of 1,024-slot wheels (24 KiB each)
// where 6 KiB do.
const (
	wheelResolution = 10 * time.Millisecond
	wheelSlots      = 256
)

func newWheel(now time.Time) *wheel {
	w := &wheel{resolution: int64(wheelResolution)}
	w.cur = now.UnixNano() / w.resolution
	return w
}

func (w *wheel) add(tm timer) {
	if w.slots == nil {
		// Made at the first timer: most partitions a peer leads in a
		// large mesh never hold one, and the slots are 6 KiB.
		w.slots = make([][]timer, wheelSlots)
	}
	tick := tm.at / w.resolution
	if tick <= w.cur {
		tick = w.cur + 1 // overdue: fire on the next advance
	}
	i := int(tick % int64(len(w.slots)))
	w.slots[i] = append(w.slots[i], tm)
	w.n++
	if w.n == 1 {
		w.first, w.firstOK = tm.at, true
	} else if w.firstOK && tm.at < w.first {
		w.first = tm.at
	}
}

// next returns the time (unix nanoseconds) of the earliest timer held; ok
// is false when none is. Timers that went stale are counted until they
// fire, so the answer may be early, never late. It walks the slots from
// the current one to the first holding a timer of this revolution (once
// per change of the earliest timer, not per call).
func (w *wheel) next() (at int64, ok bool) {
	if w.n == 0 {
		return 0, false
	}
	if w.firstOK {
		return w.first, true
	}
	// The slots from the current one on: the first timer of this
	// revolution met is the earliest; when there is none, the walk saw
	// every timer, and the earliest of them is the answer.
	size := int64(len(w.slots))
	var far int64
	farOK := false
	for s := int64(1); s <= size; s++ {
		found := false
		for _, tm := range w.slots[int((w.cur+s)%size)] {
			switch {
			case tm.at/w.resolution <= w.cur+s:
				if !found || tm.at < at {
					at, found = tm.at, true
				}
			case !farOK || tm.at < far:
				far, farOK = tm.at, true
			}
		}
		if found {
			w.first, w.firstOK = at, true
			return at, true
		}
	}
	at = far
	w.first, w.firstOK = at, true
	return at, true
}

// firstDead reports whether the timer due at at, the earliest held
// (next), can fire nothing any more: dead says so (Shard.deadTimer).
func (w *wheel) firstDead(at int64, dead func(*timer) bool) bool {
	is := func(tm timer) bool { return tm.at == at }
	slot := w.slots[int((at/w.resolution)%int64(len(w.slots)))]
	if j := slices.IndexFunc(slot, is); j >= 0 {
		return dead(&slot[j])
	}
	for _, slot := range w.slots { // added overdue, to the slot after the one it was added in
		if j := slices.IndexFunc(slot, is); j >= 0 {
			return dead(&slot[j])
		}
	}
	return false
}

// prune drops every timer dead says can fire nothing any more, in one
// pass over the slots; those of a slot keep their order (they fire in
// it).
func (w *wheel) prune(dead func(*timer) bool) {
	left := w.n // timers not yet looked at: the walk ends at the last
	for i, slot := range w.slots {
		if left == 0 {
			break
		}
		if len(slot) == 0 {
			continue // most are: a NextDue of a busy shard prunes often
		}
		left -= len(slot)
		keep := slot[:0]
		for k := range slot {
			if dead(&slot[k]) {
				w.n--
				continue
			}
			keep = append(keep, slot[k])
		}
		if len(keep) < len(slot) {
			clear(slot[len(keep):])
			w.slots[i] = keep
		}
	}
	w.firstOK = false
}

// advance moves the wheel to now and appends every timer due to out.
func (w *wheel) advance(now time.Time, out []timer) []timer {
	nowNs := now.UnixNano()
	target := nowNs / w.resolution
	if target <= w.cur {
		return out
	}
	if w.n == 0 {
		// Nothing to fire: an idle partition's wheel moves without
		// visiting its slots (a peer advances every partition it leads
		// every 10 ms).
		w.cur = target - 1
		return out
	}
	if w.firstOK && w.first <= nowNs {
		w.firstOK = false // it fires now
	}
	steps := target - w.cur
	if steps > int64(len(w.slots)) {
		steps = int64(len(w.slots)) // one full revolution visits every slot
	}
	for s := int64(1); s <= steps; s++ {
		i := int((w.cur + s) % int64(len(w.slots)))
		out = w.fireSlot(i, nowNs, out)
	}
	// The slot of now is only partly past: a timer later in it is still
	// there, and the next advance must visit it again (not a revolution
	// later).
	w.cur = target - 1
	return out
}

func (w *wheel) fireSlot(i int, nowNs int64, out []timer) []timer {
	slot := w.slots[i]
	keep := slot[:0]
	for _, tm := range slot {
		if tm.at <= nowNs {
			out = append(out, tm)
			w.n--
		} else {
			keep = append(keep, tm)
		}
	}
	for j := len(keep); j < len(slot); j++ {
		slot[j] = timer{}
	}
	w.slots[i] = keep
	return out
}
