package shard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Retry runs FAILED and CANCELED tasks again in place: the same ids, the
// attempt count going on, a fresh retry budget (MaxAttempts counts from the
// retry), the dependents that were canceled because of them re-armed (a
// streaming pipeline's skipped item re-enters at the stage that failed),
// and the group RUNNING again until it finishes anew (its webhook is then
// delivered again). It is the only way a terminal state changes (invariant
// 1), and only through a committed EvRetried.

// ErrNotRetryable is returned for a retry of a task or group with nothing
// to run again (not terminal, or SUCCEEDED); the error names the state.
var ErrNotRetryable = errors.New("shard: not retryable")

// maxRetryKeys bounds the retry idempotency keys a group remembers.
const maxRetryKeys = 32

// Retry returns the event retrying task (or every FAILED and CANCELED task
// of group g when task is ""); by names who asked (audit), key makes the
// request idempotent: a key the group has seen returns no events and no
// error. An unknown id is ErrNotFound; nothing to retry is ErrNotRetryable.
func (s *Shard) Retry(now time.Time, g GroupID, task TaskID, by, key string) ([]Event, error) {
	grp := s.groups[g]
	if grp == nil {
		return nil, ErrNotFound
	}
	if key != "" && slices.Contains(grp.retryKeys, key) {
		return nil, nil
	}
	if task == "" {
		if grp.counts[Failed]+grp.counts[Canceled] == 0 {
			return nil, fmt.Errorf("%w: group %s is %v, with no FAILED or CANCELED task", ErrNotRetryable, g, grp.state)
		}
	} else {
		t, err := s.lookup(task)
		if err != nil || t.g != grp {
			return nil, ErrNotFound
		}
		if err := retryable(t); err != nil {
			return nil, err
		}
	}
	return []Event{{Type: EvRetried, At: now, Group: g, Task: task, By: by, Key: key}}, nil
}

// retryable checks that t may run again alone: it is FAILED or CANCELED and
// none of its dependencies is (those would hold it PENDING for ever).
func retryable(t *task) error {
	if t.state != Failed && t.state != Canceled {
		return fmt.Errorf("%w: task %s is %v", ErrNotRetryable, t.id(), t.state)
	}
	for _, d := range t.deps() {
		if dt := t.g.tasks[d]; dt.state == Failed || dt.state == Canceled {
			return fmt.Errorf("%w: task %s depends on %s, which is %v (retry it first, or the group)", ErrNotRetryable, t.id(), dt.id(), dt.state)
		}
	}
	return nil
}

// applyRetried re-arms the tasks of a committed retry. It re-checks what
// Retry checked: the state may have moved since.
func (s *Shard) applyRetried(g *group, e *Event) {
	if e.Key != "" && slices.Contains(g.retryKeys, e.Key) {
		return
	}
	var set []int
	if e.Task == "" {
		for i, t := range g.tasks {
			if t.state == Failed || t.state == Canceled {
				set = append(set, i)
			}
		}
	} else {
		_, idx, ok := e.Task.Split()
		if !ok || e.Task.Group() != g.id || idx >= len(g.tasks) || retryable(g.tasks[idx]) != nil {
			return
		}
		set = rearmable(g, idx)
	}
	if len(set) == 0 {
		return
	}
	if e.Key != "" {
		g.retryKeys = append(g.retryKeys, e.Key)
		if len(g.retryKeys) > maxRetryKeys {
			g.retryKeys = g.retryKeys[1:]
		}
	}
	s.reopen(g)
	for _, i := range set {
		t := g.tasks[i]
		t.addEvent(taskEvent{typ: EvRetried, at: stampOf(e.At), round: t.round, note: noteOf("", e.By)})
		t.err, t.result, t.finished, t.notBefore = "", nil, 0, 0
		t.retried, t.crash = t.attempt, 0
		s.setState(t, Pending)
	}
	for _, i := range set {
		t := g.tasks[i]
		t.depsLeft = 0
		for _, d := range t.deps() {
			if g.tasks[d].state != Succeeded {
				t.depsLeft++
			}
		}
	}
	for _, i := range set {
		if t := g.tasks[i]; t.state == Pending && t.depsLeft == 0 {
			s.release(t, e)
		}
	}
	for _, i := range set {
		t := g.tasks[i]
		s.changes = append(s.changes, Change{Task: t.id(), Group: g.id, State: t.state, Retried: true, Retries: t.retries()})
	}
}

// retries counts the committed retries in t's history (a plain history
// has none).
func (t *task) retries() int {
	n := 0
	for _, h := range t.history {
		if h.typ == EvRetried {
			n++
		}
	}
	return n
}

// rearmable returns task idx and the dependents canceled because of it
// (transitively) that can run again: those whose every dependency
// succeeded or is re-armed with them. Indexes in ascending order.
func rearmable(g *group, idx int) []int {
	in := map[int]bool{idx: true}
	queue := []int{idx}
	for len(queue) > 0 {
		t := g.tasks[queue[0]]
		queue = queue[1:]
		for _, d := range t.dependents() {
			dt := g.tasks[d]
			if !in[d] && dt.state == Canceled && canceledByDependency(dt) {
				in[d] = true
				queue = append(queue, d)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for i := range in {
			if i != idx && blocked(g, i, in) {
				delete(in, i)
				changed = true
			}
		}
	}
	out := make([]int, 0, len(in))
	for i := range in {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// blocked reports whether task i has a dependency that did not succeed
// and is not re-armed.
func blocked(g *group, i int, in map[int]bool) bool {
	for _, d := range g.tasks[i].deps() {
		if st := g.tasks[d].state; st != Succeeded && !in[d] && st.Terminal() {
			return true
		}
	}
	return false
}

// canceledByDependency reports whether a CANCELED task was canceled because
// a dependency failed or was canceled (not by a client), or skipped in a
// streaming pipeline.
func canceledByDependency(t *task) bool {
	return strings.HasPrefix(t.err, "dependency ") || strings.HasPrefix(t.err, skippedPrefix)
}

// reopen makes a finished group RUNNING again: out of the retention order
// and the webhook queue, its webhook to be delivered anew when it ends.
func (s *Shard) reopen(g *group) {
	if !g.state.Terminal() {
		return
	}
	g.state, g.finished = GroupRunning, time.Time{}
	if i := slices.Index(s.done[s.doneHead:], g.id); i >= 0 {
		s.done = slices.Delete(s.done, s.doneHead+i, s.doneHead+i+1)
	}
	s.removalsChanged()
	delete(s.removing, g.id)
	g.notify = notifyState{}
	s.notifyPending = slices.DeleteFunc(s.notifyPending, func(id GroupID) bool { return id == g.id })
	if s.leader {
		delete(s.notifyInflight, g.id)
	}
}
