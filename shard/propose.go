package shard

import (
	"fmt"
	"time"
)

// The methods in this file are called by the partition's owner (the Raft
// leader) to turn commands and timers into events. They do not change the
// folded state: the events change it once committed and applied. They may
// change leader-local state (leases in flight, timers).

// SetLeader switches the leader-local state on or off. On becoming leader the
// timers are rebuilt from the state and leases in flight are forgotten, so a
// new owner starts from exactly what was committed.
func (s *Shard) SetLeader(leader bool, now time.Time) {
	for id := range s.inflight {
		if t, err := s.lookup(id); err == nil && t.state == Ready && t.heapIdx < 0 {
			s.ready.Push(t)
		}
	}
	s.leader = leader
	s.wheel = nil
	s.inflight = nil
	s.schedInflight = nil
	s.notifyInflight = nil
	s.removing = nil
	s.removalsChanged()
	if !leader {
		return
	}
	s.wheel = newWheel(now)
	s.inflight = make(map[TaskID]struct{})
	for _, id := range sortedGroupIDs(s.groups) {
		for _, t := range s.groups[id].tasks {
			switch t.state {
			case Waiting:
				s.addTimer(t, timer{at: t.notBefore.nanos(), kind: timerReady})
			case Running:
				s.addTimer(t, timer{at: t.expiry.nanos(), kind: timerExpiry, round: t.round})
			case Ready:
				if t.heapIdx < 0 {
					s.ready.Push(t) // a lease proposed by a former term that never committed
				}
			}
		}
	}
	s.armSchedules()
}

// Leader reports whether leader-local state is on.
func (s *Shard) Leader() bool { return s.leader }

// addTimer arms tm, a timer of t's, on the leader: the only replica with
// timers, and so the only one that makes t's ref for them.
func (s *Shard) addTimer(t *task, tm timer) {
	if s.leader {
		tm.task = t.refOf()
		s.wheel.add(tm)
		s.dueMaybe()
	}
}

// dueMaybe tells Config.OnDue that NextDue may be due, or a webhook wait.
func (s *Shard) dueMaybe() {
	if s.cfg.OnDue != nil {
		s.cfg.OnDue()
	}
}

// Submit checks spec against the state and returns the event that creates
// it. exists is true when a group with the same id is already there (an
// idempotent repeat): then no event is returned, and err is a
// *ConflictError when that group was created by a different request.
func (s *Shard) Submit(now time.Time, spec *GroupSpec) (ev Event, exists bool, err error) {
	if err := spec.Validate(); err != nil {
		return Event{}, false, err
	}
	if s.groups[spec.ID] != nil {
		return Event{}, true, s.CheckRepeat(spec)
	}
	return Event{Type: EvSubmitted, At: now, Group: spec.ID, Spec: spec}, false, nil
}

// Lease pops up to n READY tasks in priority order and returns a lease event
// for each, held by holder. The tasks stay READY in the state until the
// events apply; until then they are in flight and not offered again.
// accept filters tasks (e.g. a thief that lacks a handler); nil accepts all.
// Lease ignores placement: constrained tasks go to holder too (LeaseFor
// respects it).
func (s *Shard) Lease(now time.Time, n int, holder string, accept func(TaskView) bool) []Event {
	return s.lease(now, n, holder, s.ready.queues(true, nil), accept)
}

// lease pops up to n tasks from qs, first in the ready order first.
func (s *Shard) lease(now time.Time, n int, holder string, qs []*readyQueue, accept func(TaskView) bool) []Event {
	if !s.leader || n <= 0 {
		return nil
	}
	k := 0
	for _, q := range qs {
		k += q.Len()
	}
	evs := make([]Event, 0, min(n, k)) // an Event is large: sized once, not doubled
	var skipped []*task
	for len(evs) < n {
		t := first(qs)
		if t == nil {
			break
		}
		s.ready.Remove(t)
		id := t.id()
		if accept != nil && !accept(t.viewAs(id, nil)) {
			skipped = append(skipped, t)
			continue
		}
		s.inflight[id] = struct{}{}
		timeout := t.pol.Timeout
		if timeout <= 0 {
			timeout = s.cfg.DefaultTimeout
		}
		evs = append(evs, Event{
			Type: EvLeased, At: now, Group: t.g.id, Task: id, Round: t.round + 1,
			Holder: holder, Expiry: now.Add(timeout + s.cfg.LeaseGrace),
		})
	}
	for _, t := range skipped {
		s.ready.Push(t)
	}
	return evs
}

// Unlease returns tasks whose lease proposals were dropped to the ready
// queue.
func (s *Shard) Unlease(evs []Event) {
	for i := range evs {
		if evs[i].Type == EvNotified {
			delete(s.notifyInflight, evs[i].Group)
			continue
		}
		if evs[i].Type == EvRemoved {
			delete(s.removing, evs[i].Group)
			s.removalsChanged() // due again now
			continue
		}
		if evs[i].Type != EvLeased && (evs[i].Type != EvFailed || evs[i].Holder != "") {
			continue // only leases and FailPinnedTo's failures hold tasks back
		}
		delete(s.inflight, evs[i].Task)
		t, err := s.lookup(evs[i].Task)
		if err == nil && t.state == Ready && t.heapIdx < 0 {
			s.ready.Push(t)
		}
	}
}

// Timeout returns the per-attempt timeout of a task spec.
func (s *Shard) Timeout(ts *TaskSpec) time.Duration {
	if ts.Timeout > 0 {
		return ts.Timeout
	}
	return s.cfg.DefaultTimeout
}

// Outcome is what a lease holder reports when a handler returns.
type Outcome struct {
	Task      TaskID
	Round     Round
	Holder    string
	OK        bool
	Result    []byte
	Error     string
	Permanent bool
	TimedOut  bool
	// Lost hands the lease back without an attempt: the external worker
	// that held it is gone (it stopped polling and heartbeating). The task
	// runs again, as when a dead peer's lease expires (EvExpired).
	Lost bool
	// Died, with Lost, says the worker died holding the lease
	// (Event.Died): the task becomes a suspect of killing its workers.
	Died Death
	Took time.Duration // how long the handler ran (an input for pacing, not stored)
}

// Report checks an outcome against the current lease (fencing) and returns
// the event to propose. ErrStaleRound means the outcome belongs to an older
// or another lease: the caller drops it (and acknowledges it, so the
// holder's outbox lets go of it).
func (s *Shard) Report(now time.Time, o Outcome) (Event, error) {
	t, err := s.lookup(o.Task)
	if err != nil {
		return Event{}, err
	}
	if t.state == Ready && o.Round == t.round+1 {
		return Event{}, fmt.Errorf("%w: task %s round %d holder %q", ErrNotLeased, o.Task, o.Round, o.Holder)
	}
	if t.state != Running || t.round != o.Round || t.holder != o.Holder {
		return Event{}, fmt.Errorf("%w: task %s round %d holder %q (current round %d, state %v)",
			ErrStaleRound, o.Task, o.Round, o.Holder, t.round, t.state)
	}
	return s.outcomeEvent(now, t, o), nil
}

// ReportHeld is Report for an outcome of a lease the leader proposed and
// holds back (node's defer.go), which goes into the log with it: the task
// is READY with that lease in flight, and the outcome is of the next
// round. The event is the one Report would return once the lease applied
// (a lease changes nothing a failure's retry reads).
func (s *Shard) ReportHeld(now time.Time, o Outcome) (Event, error) {
	t, err := s.lookup(o.Task)
	if err != nil {
		return Event{}, err
	}
	if _, leased := s.inflight[t.idOr(o.Task)]; !leased || t.state != Ready || o.Round != t.round+1 {
		return Event{}, fmt.Errorf("%w: task %s round %d holder %q: no lease of that round in flight",
			ErrStaleRound, o.Task, o.Round, o.Holder)
	}
	return s.outcomeEvent(now, t, o), nil
}

// outcomeEvent is the event of outcome o of task t's lease.
func (s *Shard) outcomeEvent(now time.Time, t *task, o Outcome) Event {
	o.Bound()
	ev := Event{At: now, Group: t.g.id, Task: t.idOr(o.Task), Round: o.Round, Holder: o.Holder}
	if o.Lost {
		ev.Type = EvExpired
		if o.Died <= DiedAlone {
			// The history says which worker died, or which handed it back.
			ev.Died, ev.Error = o.Died, o.Error
		}
		return ev
	}
	if o.OK {
		ev.Type = EvSucceeded
		ev.Result = o.Result
		return ev
	}
	ev.Type = EvFailed
	ev.Error = o.Error
	ev.Permanent = o.Permanent
	ev.TimedOut = o.TimedOut
	if !o.Permanent && int(t.attempt-t.retried)+1 < max(t.pol.Retry.MaxAttempts, 1) {
		ev.NotBefore = now.Add(t.pol.Retry.Delay(int(t.attempt-t.retried)+1, s.cfg.Rand.Float64()))
	}
	return ev
}

// Renew returns an event extending the lease of a running task.
func (s *Shard) Renew(now time.Time, id TaskID, round Round, holder string) (Event, error) {
	t, err := s.lookup(id)
	if err != nil {
		return Event{}, err
	}
	if t.state != Running || t.round != round || t.holder != holder {
		return Event{}, ErrStaleRound
	}
	return Event{Type: EvRenewed, At: now, Group: t.g.id, Task: id, Round: round, Holder: holder,
		Expiry: now.Add(s.Timeout(t.pol) + s.cfg.LeaseGrace)}, nil
}

// Cancel returns the event canceling a task (and its dependents), or a whole
// group when task is "". A terminal task or group yields no event.
func (s *Shard) Cancel(now time.Time, g GroupID, task TaskID, by string) ([]Event, error) {
	grp := s.groups[g]
	if grp == nil {
		return nil, ErrNotFound
	}
	if task != "" {
		t, err := s.lookup(task)
		if err != nil {
			return nil, err
		}
		if t.state.Terminal() {
			return nil, nil
		}
	} else if grp.state.Terminal() {
		return nil, nil
	}
	return []Event{{Type: EvCanceled, At: now, Group: g, Task: task, By: by}}, nil
}

// Due returns the events that timers ask for at now: tasks whose delay or
// backoff ended (readied), leases that expired (expired), and finished
// groups past retention (removed).
func (s *Shard) Due(now time.Time) []Event {
	if !s.leader {
		return nil
	}
	var evs []Event
	s.fired = s.wheel.advance(now, s.fired[:0])
	for _, tm := range s.fired {
		if tm.kind == timerSchedule {
			evs = s.dueSchedule(now, tm, evs)
			continue
		}
		t := tm.task.t
		if t == nil || s.groups[t.g.id] != t.g {
			continue // removed
		}
		switch {
		case tm.kind == timerReady && t.state == Waiting && t.notBefore.nanos() <= tm.at:
			evs = append(evs, Event{Type: EvReadied, At: now, Group: t.g.id, Task: t.id()})
		case tm.kind == timerExpiry && t.state == Running && t.round == tm.round && !t.expiry.time().After(now):
			evs = append(evs, Event{Type: EvExpired, At: now, Group: t.g.id, Task: t.id(), Round: t.round})
		}
	}
	clear(s.fired)
	return s.dueRemovals(now, evs)
}

// NextDue returns when Due next has something to return without any new
// input: the earliest timer (a delay or backoff ending, a lease expiring, a
// schedule's tick) or retention removal; ok is false when nothing is
// pending (or this replica does not lead). It may be early (a delay's
// timer whose task moved on is counted until it fires; a lease's expiry
// whose lease ended, or a removed task's timer, is dropped here once the
// earliest is one: deadTimer), never late, so a driver that
// sleeps until then misses nothing.
func (s *Shard) NextDue() (at time.Time, ok bool) {
	if !s.leader {
		return time.Time{}, false
	}
	ns, found := s.wheel.next()
	if found && s.wheel.firstDead(ns, s.deadTimer) {
		// A lease that ended long before its expiry leaves its timer
		// behind: the dead ones go when the earliest is one, or the
		// node wakes at every such expiry to find nothing due (a third
		// of a mixed run's wakeups).
		s.wheel.prune(s.deadTimer)
		ns, found = s.wheel.next()
	}
	if found {
		at, ok = time.Unix(0, ns), true
	}
	if r, found := s.nextRemoval(); found && (!ok || r.Before(at)) {
		at, ok = r, true
	}
	return at, ok
}

// deadTimer reports whether tm can fire nothing whatever happens next (Due
// would skip it): its task's group was removed or replaced, or it is the
// expiry of a lease that ended (the task is no longer RUNNING in tm's
// round; rounds only grow, by one per lease applied).
func (s *Shard) deadTimer(tm *timer) bool {
	if tm.kind == timerSchedule {
		return false
	}
	t := tm.task.t
	switch {
	case t == nil, tm.kind == timerExpiry && (t.state != Running || t.round != tm.round):
		return true
	}
	return s.groups[t.g.id] != t.g
}

// nextRemoval returns when the first finished group whose removal is not
// in flight passes its retention.
func (s *Shard) nextRemoval() (time.Time, bool) {
	if s.cfg.Retention <= 0 {
		return time.Time{}, false
	}
	if !s.remKnown {
		s.remNext, s.remOK, s.remKnown = s.findNextRemoval()
	}
	return s.remNext, s.remOK
}

// findNextRemoval is nextRemoval without the cache.
func (s *Shard) findNextRemoval() (time.Time, bool, bool) {
	for i := s.doneHead; i < len(s.done); i++ {
		g := s.groups[s.done[i]]
		if g == nil {
			continue
		}
		if _, ok := s.removing[g.id]; ok {
			continue
		}
		return g.finished.Add(s.cfg.Retention), true, true
	}
	return time.Time{}, false, true
}

// removalsChanged forgets what is cached about the next removal: done,
// doneHead or removing changed.
func (s *Shard) removalsChanged() {
	s.removeAt = time.Time{}
	s.remKnown = false
	s.dueMaybe()
}

func (s *Shard) dueRemovals(now time.Time, evs []Event) []Event {
	if s.cfg.Retention <= 0 || now.Before(s.removeAt) {
		return evs
	}
	// The finished groups are in finish order; the ones whose removal is
	// in flight are skipped (removing), and the list itself only moves
	// when a removal applies, on every replica alike (applyRemoved).
	n := 0
	for i := s.doneHead; i < len(s.done) && n < s.cfg.RemoveBatch; i++ {
		g := s.groups[s.done[i]]
		if g == nil {
			continue
		}
		if at := g.finished.Add(s.cfg.Retention); at.After(now) {
			s.removeAt = at
			break
		}
		if _, ok := s.removing[g.id]; ok {
			continue
		}
		if s.removing == nil {
			s.removing = make(map[GroupID]struct{})
		}
		s.removing[g.id] = struct{}{}
		s.remKnown = false
		evs = append(evs, Event{Type: EvRemoved, At: now, Group: g.id, By: "retention"})
		n++
	}
	return evs
}

// ExpireHolders returns an expiry event for every RUNNING task whose holder
// matches: leases the owner cannot confirm (a dead peer, a former life of
// itself). The tasks run again in the next round.
func (s *Shard) ExpireHolders(now time.Time, match func(holder string) bool) []Event {
	var evs []Event
	for _, id := range sortedGroupIDs(s.groups) {
		g := s.groups[id]
		if g.counts[Running] == 0 {
			continue
		}
		for _, t := range g.tasks {
			if t.state == Running && match(t.holder) {
				evs = append(evs, Event{Type: EvExpired, At: now, Group: g.id, Task: t.id(), Round: t.round})
			}
		}
	}
	return evs
}

// Delay returns the backoff before retry attempt n+1 after attempt n
// failed (n >= 1): d = min(Backoff * 2^(n-1), MaxBackoff), then a jittered
// value uniformly in [d/2, d] ("equal jitter"), never below Backoff. jitter
// is a uniform draw in [0, 1).
func (r Retry) Delay(n int, jitter float64) time.Duration {
	base := r.Backoff
	if base <= 0 {
		base = time.Second
	}
	ceiling := max(r.MaxBackoff, base)
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	j := d/2 + time.Duration(jitter*float64(d/2))
	return max(j, base)
}
