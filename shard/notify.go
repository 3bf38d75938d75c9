package shard

import (
	"slices"
	"time"
)

// Webhook deliveries. When a group with a Notify URL reaches a terminal
// state it joins notifyPending (replicated). Its owner hands deliveries to
// the runtime (NotifyDue), which makes the HTTP call and reports back; the
// owner proposes the attempt as an EvNotified (Notified), which records it
// in the group (and in the task's history for a single task). Delivery is
// at least once: an owner that loses leadership mid-call leaves the attempt
// unrecorded, and the next owner makes it again (receivers dedupe on the
// delivery id).

// NotifyMaxAttempts is how many deliveries are tried before giving up.
const NotifyMaxAttempts = 8

// NotifyBackoff is the delay before the retry after attempt n (1-based):
// 1 s doubling up to 5 min, drawn from [d/2, d].
func NotifyBackoff(n int, jitter float64) time.Duration {
	return Retry{Backoff: time.Second, MaxBackoff: 5 * time.Minute}.Delay(n, jitter)
}

// NotifyJob is one webhook delivery to make.
type NotifyJob struct {
	Group   GroupID
	URL     string
	Attempt int // 1-based
}

// NotifyDue returns up to max deliveries due at now that are not in flight,
// and marks them in flight until their outcome applies (or Unlease returns
// a dropped one).
func (s *Shard) NotifyDue(now time.Time, max int) []NotifyJob {
	if !s.leader || max <= 0 {
		return nil
	}
	var jobs []NotifyJob
	for _, id := range s.notifyPending {
		if len(jobs) == max {
			break
		}
		g := s.groups[id]
		if g == nil {
			continue
		}
		if _, busy := s.notifyInflight[id]; busy || g.notify.next.After(now) {
			continue
		}
		if s.notifyInflight == nil {
			s.notifyInflight = make(map[GroupID]struct{})
		}
		s.notifyInflight[id] = struct{}{}
		jobs = append(jobs, NotifyJob{Group: id, URL: g.spec.Notify, Attempt: g.notify.attempts + 1})
	}
	return jobs
}

// NotifyPending returns the number of groups whose webhook is not yet
// delivered or given up.
func (s *Shard) NotifyPending() int { return len(s.notifyPending) }

// Notified returns the event recording attempt j: errMsg is "" when the
// receiver accepted it. A failed attempt is retried after NotifyBackoff,
// and the NotifyMaxAttempts-th failure gives up.
func (s *Shard) Notified(now time.Time, j NotifyJob, errMsg string) Event {
	e := Event{Type: EvNotified, At: now, Group: j.Group, Round: Round(j.Attempt), Error: errMsg}
	if errMsg != "" {
		if j.Attempt >= NotifyMaxAttempts {
			e.Permanent = true
		} else {
			e.NotBefore = now.Add(NotifyBackoff(j.Attempt, s.cfg.Rand.Float64()))
		}
	}
	return e
}

// NotifyRefused returns the event recording attempt j as a permanent
// failure, retried no more: the delivering owner will not call the URL
// (it is not on that owner's allow-list). errMsg says why.
func (s *Shard) NotifyRefused(now time.Time, j NotifyJob, errMsg string) Event {
	return Event{Type: EvNotified, At: now, Group: j.Group, Round: Round(j.Attempt), Error: errMsg, Permanent: true}
}

func (g *group) notifyView() *NotifyView {
	if g.spec.Notify == "" {
		return nil
	}
	n := g.notify
	v := &NotifyView{URL: g.spec.Notify, Attempts: n.attempts, LastError: n.err}
	switch {
	case !g.state.Terminal():
		v.State = "waiting"
	case n.delivered:
		v.State = "delivered"
	case n.gaveUp:
		v.State = "failed"
	default:
		v.State, v.Next = "pending", n.next
	}
	return v
}

// rebuildNotifyPending lists the pending deliveries after a restore, in
// finish order (then id), as the log would have.
func (s *Shard) rebuildNotifyPending() {
	s.notifyPending = s.notifyPending[:0]
	for _, id := range sortedGroupIDs(s.groups) {
		g := s.groups[id]
		if g.spec.Notify != "" && g.state.Terminal() && !g.notify.delivered && !g.notify.gaveUp {
			s.notifyPending = append(s.notifyPending, id)
		}
	}
	slices.SortStableFunc(s.notifyPending, func(a, b GroupID) int {
		return s.groups[a].finished.Compare(s.groups[b].finished)
	})
	if len(s.notifyPending) > 0 {
		s.dueMaybe()
	}
}
