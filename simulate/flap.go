package simulate

import (
	"fmt"
	"time"
)

// invFlap: once the faults have healed and the mesh settled, a partition's
// leadership does not go back and forth between peers. Peers that
// disagree for good on who should lead a partition (each prefers the
// other) hand it to each other every transferHold, and its requests are
// refused at each hand-over: a restarted peer held draining by one member
// did that (node: mesh.newRun; seed 72027, --peers 5 --workload sched,
// where only a schedule's missed ticks showed it).
const invFlap = "flap"

const (
	// flapSettle is how long after a fault window ends a hand-over may
	// still undo an earlier one (replica sets settling, a restarted peer's
	// partitions coming back to it).
	flapSettle = 10 * time.Second
	// flapWindow and maxBounces: a partition's leadership may return to
	// the peer that led it before the last hand-over fewer than
	// maxBounces times within flapWindow, counting only quiet time (no
	// fault window for flapSettle). Peers that hand leadership to each
	// other do so every transferHold (3 s).
	flapWindow = 20 * time.Second
	maxBounces = 4
)

// leadTrack follows one partition's serving leader (flap).
type leadTrack struct {
	cur, prev int             // node indexes; -1: none seen yet
	at        []time.Duration // bounces seen in quiet time, the last flapWindow
}

// checkFlap samples each partition's serving leader (once a virtual
// second, from periodic) and fails invariant flap when one returns to its
// previous leader maxBounces times within flapWindow of quiet time.
func (s *sim) checkFlap() {
	if s.flap == nil {
		s.flap = make([]leadTrack, s.cfg.Partitions)
		for i := range s.flap {
			s.flap[i] = leadTrack{cur: -1, prev: -1}
		}
	}
	settled := s.quietFor(flapSettle)
	leader := make([]int, s.cfg.Partitions)
	for i := range leader {
		leader[i] = -1
	}
	for _, nd := range s.nodes {
		if !nd.up || nd.paused || nd.n == nil {
			continue
		}
		for _, part := range nd.n.Leading() {
			if leader[part] == -1 {
				leader[part] = nd.idx
			} else {
				leader[part] = -2 // two serve for a moment: no sample
			}
		}
	}
	for part, l := range leader {
		t := &s.flap[part]
		if n := t.observe(l, s.now, settled); n >= maxBounces {
			s.fail(invFlap, fmt.Sprintf("partition %d's leadership went back and forth between n%d and n%d %d times in %v with no fault for %v before (at %v)",
				part, t.prev, t.cur, n, flapWindow, flapSettle, t.at))
			return
		}
	}
}

// observe records the serving leader l (-1: none, or not one) seen at
// now, and returns how many times within flapWindow the leadership
// returned to its previous leader while quiet (0 when l changes nothing).
func (t *leadTrack) observe(l int, now time.Duration, quiet bool) int {
	if l < 0 || l == t.cur {
		return 0
	}
	bounced := quiet && l == t.prev
	t.prev, t.cur = t.cur, l
	if !bounced {
		return 0
	}
	for len(t.at) > 0 && now-t.at[0] > flapWindow {
		t.at = t.at[1:]
	}
	t.at = append(t.at, now)
	return len(t.at)
}

// quietFor reports whether no fault's window (its start to its end) came
// within d of now.
func (s *sim) quietFor(d time.Duration) bool {
	for _, f := range s.faults {
		at, dur := f.Window()
		if at <= s.now && s.now < at+dur+d {
			return false
		}
	}
	return true
}
