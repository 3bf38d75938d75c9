package simulate

import "time"

// event is one entry of the discrete-event queue: fn runs when the virtual
// clock reaches at. Events at the same time run in the order they were
// scheduled (seq), so a run is a function of the seed alone.
type event struct {
	at  time.Duration // virtual time since the start of the run
	seq uint64        // scheduling order, the tie-break
	fn  func()
}

func (e *event) before(o *event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

// eventQueue is a binary min-heap of events ordered by (at, seq), held by
// value (a large run keeps millions of messages in flight: no pointer per
// event, no interface calls in the sift loops).
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }

// push and pop move a hole rather than swap (a swap writes each event
// twice, and its func pointer behind a write barrier while the collector
// marks): the event goes in once, where the hole stops.
func (q *eventQueue) push(e event) {
	*q = append(*q, event{})
	h := *q
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !e.before(&h[parent]) {
			break
		}
		h[i] = h[parent]
		i = parent
	}
	h[i] = e
}

func (q *eventQueue) pop() event {
	h := *q
	top := h[0]
	last := len(h) - 1
	e := h[last]
	h[last] = event{}
	h = h[:last]
	*q = h
	if last == 0 {
		return top
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
	return top
}

// at schedules fn at virtual time t (never before now). An event for now
// (a drain after an input, an aborted handler's return: half of a run's
// events) goes to the back of s.soon instead of the heap: it comes after
// every event scheduled before it, and before anything later.
func (s *sim) at(t time.Duration, fn func()) {
	s.seq++
	if t <= s.now {
		s.soon = append(s.soon, event{at: s.now, seq: s.seq, fn: fn})
		return
	}
	s.q.push(event{at: t, seq: s.seq, fn: fn})
}

// after schedules fn d after now.
func (s *sim) after(d time.Duration, fn func()) { s.at(s.now+d, fn) }

// pending is the number of events scheduled.
func (s *sim) pending() int { return s.q.Len() + len(s.soon) - s.soonHead }

// next pops the earliest event, in (at, seq) order. The events in s.soon
// are all at now (the clock moves only past them: an event of the heap
// at a later time comes after them all), in seq order; an event of the
// heap at now that was scheduled before one of them comes first.
func (s *sim) next() event {
	if s.soonHead < len(s.soon) {
		if e := &s.soon[s.soonHead]; s.q.Len() == 0 || e.before(&s.q[0]) {
			ev := *e
			*e = event{}
			if s.soonHead++; s.soonHead == len(s.soon) {
				s.soon, s.soonHead = s.soon[:0], 0
			}
			return ev
		}
	}
	return s.q.pop()
}
