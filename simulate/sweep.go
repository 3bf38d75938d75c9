package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// sample re-reads a few tasks observed terminal from their serving node:
// the state and result must not have changed (invariant 2), and the group
// must still exist (invariant 1).
func (c *checker) sample(k int) {
	for range min(k, len(c.terminal)) {
		t := c.terminal[c.s.rng.IntN(len(c.terminal))]
		if nd := c.s.serving(t.g.id); nd != nil {
			v, err := nd.n.Task(t.id)
			c.reread(nd, t, v, err)
		}
		if c.s.viol != nil {
			return
		}
	}
}

// reread checks t's view v on nd (as nd.n.Task returned it, with err) and
// returns its attempts (-1 if unreadable).
func (c *checker) reread(nd *simNode, t *taskRec, v shard.TaskView, err error) int {
	switch {
	case errors.Is(err, shard.ErrNotFound) && c.lostUnsafe(t.g):
		return -1 // the recovery lost it (lostunsafe.go)
	case errors.Is(err, shard.ErrNotFound):
		c.lost++
		c.s.fail(invLost, fmt.Sprintf("n%d: %s of acknowledged group %s is gone", nd.idx, t.id, t.g.id))
		return -1
	case err != nil:
		return -1
	case v.Retries != t.retries:
		// The node is a retry behind (its report of it is still to
		// come), or the run ends with a retry the checker saw applied
		// elsewhere: the last retry's runs are checked where they are.
		return -1
	case t.state != 0 && v.State != t.state:
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d: %s reads %v, observed %v at %v", nd.idx, t.id, v.State, t.state, t.at))
	case t.hasResult && !bytes.Equal(v.Result, t.result):
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d: result of %s reads %q, observed %q", nd.idx, t.id, v.Result, t.result))
	}
	return v.Attempt
}

// final sweeps every acknowledged task on its serving node: state, result,
// and a history with at most one accepted outcome per round and nothing
// after SUCCEEDED or CANCELED. It also counts duplicate executions: runs of
// a task beyond its finished attempts (at least one).
func (c *checker) final() {
	c.broadcastRuns()
	for _, g := range c.order {
		nd := c.s.serving(g.id)
		if !g.acked || nd == nil {
			continue
		}
		for _, t := range g.tasks {
			// One view a task: the sweep reads a million at 1,000
			// peers, when the heap is at its largest.
			v, err := nd.n.Task(t.id)
			if err == nil && v.Retries != t.retries {
				c.s.fail(invOutcome, fmt.Sprintf("n%d serves %s with %d retries applied at the end; %d were reported", nd.idx, t.id, v.Retries, t.retries))
				return
			}
			attempts := c.reread(nd, t, v, err)
			if c.s.viol != nil {
				return
			}
			if attempts < 0 {
				continue
			}
			c.dupExec += max(0, t.runs-max(attempts, 1))
			evs, err := nd.n.AppendTaskEvents(c.evBuf[:0], t.id)
			c.evBuf = evs
			if err != nil {
				continue
			}
			if msg := checkHistory(evs); msg != "" {
				c.doubleAcc++
				c.s.fail(invOutcome, fmt.Sprintf("n%d: history of %s: %s", nd.idx, t.id, msg))
				return
			}
			msg := c.checkUnwanted(nd, t, evs)
			if msg == "" {
				msg = c.checkCrashLimited(t, evs)
			}
			if msg != "" {
				c.s.fail(invWorkers, fmt.Sprintf("n%d: history of %s: %s", nd.idx, t.id, msg))
				return
			}
		}
	}
}

// checkHistory returns what is wrong with a task's history, or "".
func checkHistory(evs []shard.TaskEvent) string {
	outcomes := map[shard.Round]int{}
	final := shard.EventType(0)
	for _, e := range evs {
		switch e.Type {
		case shard.EvLeased, shard.EvSucceeded, shard.EvFailed, shard.EvCanceled:
			if final != 0 {
				return fmt.Sprintf("%v (round %d) after %v", e.Type, e.Round, final)
			}
		}
		switch e.Type {
		case shard.EvSucceeded, shard.EvFailed:
			if outcomes[e.Round]++; outcomes[e.Round] > 1 {
				return fmt.Sprintf("two accepted outcomes in round %d", e.Round)
			}
			if e.Type == shard.EvSucceeded {
				final = e.Type
			}
		case shard.EvCanceled:
			final = e.Type
		case shard.EvRetried:
			final = 0 // runs again
		}
	}
	return ""
}

// liveness fails the run when the oldest unfinished group has been
// acknowledged (or submitted, if never acknowledged) for longer than the
// bound since the faults healed.
func (c *checker) liveness() {
	for c.head < len(c.order) && c.order[c.head].left == 0 {
		c.head++
	}
	if c.head == len(c.order) {
		return
	}
	g := c.order[c.head]
	since, what := max(g.submitAt, c.s.healAt), "submitted (never acknowledged)"
	if g.acked {
		since, what = max(g.ackAt, c.s.healAt), "acknowledged"
	}
	if c.s.now-since > c.s.cfg.Liveness {
		c.s.fail(invLiveness, fmt.Sprintf("group %s %s at %v is not finished %v after the faults healed (at %v): %s",
			g.id, what, g.ackAt, c.s.cfg.Liveness, c.s.healAt, c.stuck(g)))
	}
}

// stuck describes up to five unfinished tasks of g.
func (c *checker) stuck(g *groupRec) string {
	nd := c.s.serving(g.id)
	var out []string
	for _, t := range g.tasks {
		if t.state != 0 || len(out) == 5 {
			continue
		}
		st := "unreadable"
		if nd != nil {
			if v, err := nd.n.Task(t.id); err == nil {
				st = fmt.Sprintf("%v round %d attempt %d holder %s", v.State, v.Round, v.Attempt, v.Holder)
				if v.Pin != "" || len(v.Require) > 0 {
					st += fmt.Sprintf(" pin %q require %v waiting %q", v.Pin, v.Require, v.Waiting)
				}
				for _, d := range v.Deps {
					if dv, err := nd.n.Task(d); err == nil {
						st += fmt.Sprintf(" [dep %s %v round %d holder %s]", d, dv.State, dv.Round, dv.Holder)
					}
				}
			} else {
				st = err.Error()
			}
		}
		out = append(out, fmt.Sprintf("%s %s", t.id, st))
	}
	if nd == nil {
		out = append(out, c.s.describePartition(c.s.partitionOf(g.id)))
	}
	return strings.Join(out, "; ")
}
