package shard

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Placement is a peer as a lease sees it: its id (for pins) and its labels
// (for require). A task is runnable by a placement when TaskSpec.Matches.
type Placement struct {
	Peer   string            // peer id
	Labels map[string]string // its labels, "key" -> "value"
	// Handlers are the external handlers (Config.External) this placement
	// serves: the workers polling a peer. A placement without them runs
	// built-in handlers only.
	Handlers []string
}

// runs reports whether a placement may run the tasks of class c.
func (p *Placement) runs(c *class) bool {
	if c.ext != "" && !slices.Contains(p.Handlers, c.ext) {
		return false
	}
	return c.spec.Matches(p.Peer, p.Labels)
}

// class holds the READY tasks of one placement constraint (the same pin and
// the same require), in priority order. Every task of a class matches the
// same peers, so a lease decides once per class, not once per task: a
// queue head of thousands of tasks that only a GPU peer may run costs the
// owner one check per lease, not a scan.
type class struct {
	key  string
	spec *TaskSpec // the first task's options (pol): only Pin and Require are read
	ext  string    // the external handler of its tasks; "" for built-in ones
	q    readyQueue
}

// classKey names the class of a constrained task; ext is its external
// handler, "" when it runs in peers.
func classKey(ts *TaskSpec, ext string) string {
	return ts.Pin + "\x00" + strings.Join(ts.Require, ",") + "\x00" + ext
}

// readySet holds the READY tasks: unconstrained ones in one queue,
// constrained ones in one queue per class. Its order is the ready queue's
// (priority, then FIFO), merged across the queues.
type readySet struct {
	plain    readyQueue
	classes  map[string]*class
	n        int
	ext      int                       // tasks queued in classes of external handlers
	external func(handler string) bool // Config.External
	onReady  func(nonEmpty bool)       // Config.OnReady
}

// Len returns the number of READY tasks queued.
func (r *readySet) Len() int { return r.n }

// Push adds t to its queue; t must not be queued already.
func (r *readySet) Push(t *task) {
	r.n++
	if r.n == 1 && r.onReady != nil {
		r.onReady(true)
	}
	ext := ""
	if r.external != nil && r.external(t.pol.Handler) {
		ext = t.pol.Handler
	}
	if !t.pol.Constrained() && ext == "" {
		t.cls = nil
		r.plain.Push(t)
		return
	}
	key := classKey(t.pol, ext)
	c := r.classes[key]
	if c == nil {
		if r.classes == nil {
			r.classes = make(map[string]*class)
		}
		c = &class{key: key, spec: t.pol, ext: ext}
		r.classes[key] = c
	}
	if ext != "" {
		r.ext++
	}
	t.cls = c
	c.q.Push(t)
}

// Remove takes t out of its queue if it is queued. An emptied class is
// dropped, so the classes stay bounded by the READY tasks.
func (r *readySet) Remove(t *task) {
	if t.heapIdx < 0 {
		return
	}
	r.n--
	if r.n == 0 && r.onReady != nil {
		r.onReady(false)
	}
	c := t.cls
	if c == nil {
		r.plain.Remove(t)
		return
	}
	c.q.Remove(t)
	if c.ext != "" {
		r.ext--
	}
	if c.q.Len() == 0 && r.classes[c.key] == c {
		delete(r.classes, c.key)
	}
}

// before reports whether a goes before b in the ready order.
func before(a, b *task) bool {
	if a.pol.Priority != b.pol.Priority {
		return a.pol.Priority > b.pol.Priority
	}
	return a.seq < b.seq
}

// queues returns the queues a lease may take from: the plain one when plain,
// and every class ok accepts (all of them when ok is nil).
func (r *readySet) queues(plain bool, ok func(*class) bool) []*readyQueue {
	qs := make([]*readyQueue, 0, 1+len(r.classes))
	if plain && r.plain.Len() > 0 {
		qs = append(qs, &r.plain)
	}
	for _, c := range r.classes {
		if ok == nil || ok(c) {
			qs = append(qs, &c.q)
		}
	}
	return qs
}

// first returns the first task across qs, or nil. The order is total
// (seq is unique), so the answer does not depend on the order of qs.
func first(qs []*readyQueue) *task {
	var best *task
	for _, q := range qs {
		if h := q.Peek(); h != nil && (best == nil || before(h, best)) {
			best = h
		}
	}
	return best
}

// Peek returns the first READY task of all, or nil.
func (r *readySet) Peek() *task { return first(r.queues(true, nil)) }

// ReadyFor returns the number of READY tasks a peer may run (unconstrained
// ones, and those whose pin and labels it matches).
func (s *Shard) ReadyFor(at Placement) int {
	n := s.ready.plain.Len()
	if len(s.ready.classes) == 0 {
		return n // no map iterator started: a node asks at every input
	}
	for _, c := range s.ready.classes {
		if at.runs(c) {
			n += c.q.Len()
		}
	}
	return n
}

// HeadFor returns the priority and queue order of the first READY task
// that at may run.
func (s *Shard) HeadFor(at Placement) (prio int32, seq uint64, ok bool) {
	t := first(s.ready.queues(true, at.runs))
	if t == nil {
		return 0, 0, false
	}
	return t.pol.Priority, t.seq, true
}

// LeaseFor is Lease for a holder running at placement at: it takes
// unconstrained tasks and those of the classes at matches, in priority
// order across them; the other constrained tasks stay queued for a peer
// that matches. Each class is checked once per call.
func (s *Shard) LeaseFor(now time.Time, n int, holder string, at Placement, accept func(TaskView) bool) []Event {
	return s.lease(now, n, holder, s.ready.queues(true, at.runs), accept)
}

// LeaseStranded leases to a thief at placement to up to n READY tasks
// that to may run and self may not: the constrained tasks the owner can
// only hand on. Unconstrained tasks are not taken (the owner runs them, or
// grants its surplus through LeaseFor).
func (s *Shard) LeaseStranded(now time.Time, n int, holder string, to, self Placement) []Event {
	qs := s.ready.queues(false, func(c *class) bool { return c.ext == "" && to.runs(c) && !self.runs(c) })
	return s.lease(now, n, holder, qs, nil)
}

// Stranded returns the number of READY tasks self may not run: tasks only
// other peers can take. Tasks of external handlers are not counted: they
// go to peers that serve them (ExternalReady), not to thieves.
func (s *Shard) Stranded(self Placement) int {
	return s.ready.Len() - s.ready.ext - s.ReadyFor(Placement{Peer: self.Peer, Labels: self.Labels})
}

// ExternalReady returns the number of READY tasks of external handlers
// (Config.External).
func (s *Shard) ExternalReady() int { return s.ready.ext }

// ExternalHandlers returns the external handlers that have READY tasks,
// sorted, each with how many.
func (s *Shard) ExternalHandlers(into map[string]int) map[string]int {
	for _, c := range s.ready.classes {
		if c.ext != "" && c.q.Len() > 0 {
			if into == nil {
				into = map[string]int{}
			}
			into[c.ext] += c.q.Len()
		}
	}
	return into
}

// StrandedRunners adds to into the peers of cands that may run some READY
// task self may not run (its stranded tasks), and returns it: the peers
// worth telling there is work here for them.
func (s *Shard) StrandedRunners(self Placement, cands []Placement, into map[string]bool) map[string]bool {
	for _, c := range s.ready.classes {
		if c.q.Len() == 0 || c.ext != "" || self.runs(c) {
			continue
		}
		for i := range cands {
			if !into[cands[i].Peer] && cands[i].runs(c) {
				if into == nil {
					into = map[string]bool{}
				}
				into[cands[i].Peer] = true
			}
		}
	}
	return into
}

// FailPinnedTo proposes to fail, for good, the READY tasks pinned to a
// peer gone says has left the mesh (it was forgotten: it can never run
// them). Without it a broadcast copy or a pinned task whose peer was
// decommissioned stayed READY, and its group RUNNING, forever. Tasks
// pinned to a peer that is only down wait for it, as before. Leader only;
// the tasks are held out of the ready queue until the events apply (or
// Unlease returns them).
func (s *Shard) FailPinnedTo(now time.Time, gone func(peer string) bool) []Event {
	if !s.leader || len(s.ready.classes) == 0 {
		return nil
	}
	var evs []Event
	for _, key := range slices.Sorted(maps.Keys(s.ready.classes)) { // map order must not reach the log
		c := s.ready.classes[key]
		if c.spec.Pin == "" || !gone(c.spec.Pin) {
			continue
		}
		for c.q.Len() > 0 {
			t := c.q.Peek()
			s.ready.Remove(t)
			id := t.id()
			s.inflight[id] = struct{}{}
			evs = append(evs, Event{Type: EvFailed, At: now, Group: t.g.id, Task: id, Round: t.round + 1, Permanent: true,
				Error: fmt.Sprintf("pinned to peer %s, which left the mesh: no other peer may run it", c.spec.Pin)})
		}
	}
	return evs
}
