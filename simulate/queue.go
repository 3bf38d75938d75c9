package simulate

import (
	"container/heap"
	"time"
)

// event is one entry of the discrete-event queue: fn runs when the virtual
// clock reaches at. Events at the same time run in the order they were
// scheduled (seq), so a run is a function of the seed alone.
type event struct {
	at  time.Duration // virtual time since the start of the run
	seq uint64        // scheduling order, the tie-break
	fn  func()
}

// eventQueue is a min-heap of events ordered by (at, seq).
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// at schedules fn at virtual time t (never before now).
func (s *sim) at(t time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.q, &event{at: max(t, s.now), seq: s.seq, fn: fn})
}

// after schedules fn d after now.
func (s *sim) after(d time.Duration, fn func()) { s.at(s.now+d, fn) }

// next pops the earliest event.
func (s *sim) next() *event { return heap.Pop(&s.q).(*event) }
