package simulate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Tasks that crash their workers, in the simulated hub, by the runtime
// hub's rules (peer/workers_quarantine.go; node/hubrules.go): a worker
// found dead hands its leases back with the death recorded (Died), a
// task two workers died running is a suspect (node.WorkerSuspect) that a
// worker gets only while it holds nothing else here, and takes nothing
// else while it runs it (node.WorkerFill: a worker holding leases that
// meets a queued suspect reserves it and drains), and the lone death
// that makes the crash limit fails the task for good (node.WorkerDeath).
//
// The "poison" fault (WorkerPoison) makes a task whose handler kills
// every worker process that runs it. Invariant 6 checks the isolation
// at each lease (workerLease) and, at the end, that a task the crash
// limit failed ended FAILED with that one outcome (checkCrashLimited).

// simCrashLimit is the simulated hubs' --worker-crash-limit.
const simCrashLimit = node.DefaultWorkerCrashLimit

// draining reports whether worker w reserved a suspect still queued here
// (it takes nothing else until it holds nothing).
func (h *simHub) draining(w *simWorker) bool {
	q := h.waitFor[w]
	if q != nil && (q.reserved != w || !slices.Contains(h.queue, q)) {
		delete(h.waitFor, w)
		q = nil
	}
	return q != nil
}

// reservedBy returns the worker, not declared dead, that reserved queued
// suspect q, if any.
func (h *simHub) reservedBy(q *queuedRun) *simWorker {
	w := q.reserved
	if w != nil && (h.declared[w] || h.waitFor[w] != q) {
		q.reserved, w = nil, nil
	}
	return w
}

// isolating reports whether worker w takes no more tasks for now: it runs
// a suspect alone, or drains for one. Its free slots are not the peer's
// demand meanwhile.
func (h *simHub) isolating(w *simWorker) bool {
	return h.isolated[w] > 0 || h.draining(w)
}

// bury ends the leases of worker w, found dead (why): each goes back to
// its owner with the death recorded (node.WorkerDeath), or fails for good
// at the crash limit; a copy pinned to w fails its attempt.
func (h *simHub) bury(w *simWorker, why string) {
	held := h.heldBy(w)
	for _, l := range held {
		h.lose(l)
		if l.run.Worker != "" {
			_ = h.nd.n.Report(h.pinnedFailed(l.run.Task, l.run.Round, w.id))
			continue
		}
		died, failed, strikes := node.WorkerDeath(&l.run, len(held), simCrashLimit)
		if failed {
			h.nd.s.chk.crashLimited(h, &l.run)
			_ = h.nd.n.Report(shard.Outcome{Task: l.run.Task, Round: l.run.Round, Permanent: true,
				Error: fmt.Sprintf("%s: %d workers died running it alone, the last %s on peer %s (--worker-crash-limit %d); it runs no more",
					crashLimitError, strikes, w.id, h.nd.id, simCrashLimit)})
			continue
		}
		_ = h.nd.n.Report(shard.Outcome{Task: l.run.Task, Round: l.run.Round, Lost: true, Died: died,
			Error: fmt.Sprintf("worker %s lost: %s", w.id, why)})
	}
}

// crashLimitError begins the error of a task the crash limit failed.
const crashLimitError = "the task killed its workers"

// WorkerPoison makes a task kill its workers (the "poison" fault kind: a
// handler that crashes its process): the first task of the external
// handler a worker starts from At on (not a copy pinned to a worker)
// kills, until At+For, every worker that starts it a moment later, and
// each worker it kills is replaced by a new one (a new id) a little
// after. The hubs find each dead after the TTL: the task becomes a
// suspect, runs alone, and the crash limit fails it.
type WorkerPoison struct {
	Span
	task shard.TaskID
	rng  *rand.Rand
	on   bool
}

func (f *WorkerPoison) start(s *sim) {
	f.on = true
	s.poisons = append(s.poisons, f)
}

func (f *WorkerPoison) stop(s *sim) { f.on = false }

func (f *WorkerPoison) String() string {
	return fmt.Sprintf("the first external task started at %v kills its workers for %v", f.At, f.For)
}

// poisonFaults draws the "poison" fault: two tasks that kill their
// workers, from a generator of its own (the draws of the other faults
// and of the run stay the same).
func (s *sim) poisonFaults(window time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x706f69736f6e))
	var fs []Fault
	for range 2 {
		at := 100*time.Millisecond + time.Duration(rng.Int64N(int64(window*6/10)))
		fs = append(fs, &WorkerPoison{Span: Span{At: at, For: 20 * time.Second}, rng: rng})
	}
	return fs
}

// poisoned arms a poison fault with run r, which worker w starts and
// would end d later, if one waits for a task, and kills w before that if
// r's task is poison.
func (s *sim) poisoned(w *simWorker, r node.Run, d time.Duration) {
	for _, f := range s.poisons {
		if !f.on {
			continue
		}
		if f.task == "" && r.Worker == "" && !slices.ContainsFunc(s.poisons, func(g *WorkerPoison) bool { return g.task == r.Task }) {
			f.task = r.Task
			s.chk.poisoned++
		}
		if f.task != r.Task {
			continue
		}
		s.after(time.Duration(f.rng.Int64N(int64(d/2)+1)), func() {
			if w.dead {
				return
			}
			s.chk.poisonDeaths++
			w.dead, w.silent, w.stalled = true, s.now, false
			w.polled = s.now
			if i := slices.Index(s.workers, w); i >= 0 {
				s.after(100*time.Millisecond+time.Duration(f.rng.Int64N(int64(500*time.Millisecond))), func() {
					if s.workers[i] == w {
						s.workers[i] = s.addWorker(w.node)
					}
				})
			}
		})
		return
	}
}

// workerLease checks a lease hub h hands worker w (suspect: alone) against
// the quarantine: a suspect goes to a worker that holds nothing here, and
// a worker that holds one gets nothing else.
func (c *checker) workerLease(h *simHub, w *simWorker, suspect bool) {
	switch {
	case h.isolated[w] > 0:
		c.s.fail(invWorkers, fmt.Sprintf("n%d handed worker %s a lease while it runs a suspect alone", h.nd.idx, w.id))
	case suspect && h.held[w] > 0:
		c.s.fail(invWorkers, fmt.Sprintf("n%d handed worker %s a suspect while it holds %d other leases", h.nd.idx, w.id, h.held[w]))
	case suspect:
		c.suspectLeases++
	}
	if l := h.restartedHeld(w); l != nil {
		c.s.fail(invWorkers, fmt.Sprintf("n%d handed worker %s a lease while it holds %s round %d of its process before a restart",
			h.nd.idx, w.id, l.run.Task, l.run.Round))
	}
}

// crashLimited records that hub h fails run r's task at the crash limit.
func (c *checker) crashLimited(h *simHub, r *node.Run) {
	if r.Deaths.Alone+1 != simCrashLimit || r.Deaths.Total() < node.WorkerIsolateAfter {
		c.s.fail(invWorkers, fmt.Sprintf("n%d failed %s round %d at the crash limit %d with deaths %+v", h.nd.idx, r.Task, r.Round, simCrashLimit, r.Deaths))
	}
	if c.crashRounds == nil {
		c.crashRounds = map[shard.TaskID][]shard.Round{}
	}
	c.crashRounds[r.Task] = append(c.crashRounds[r.Task], r.Round)
	c.crashLimit++
}

// checkCrashLimited checks at the end the history of a task a hub failed
// at the crash limit since its last retry (a retry runs it again): it
// ended FAILED, with one outcome only from the first round a hub failed
// it in on, the crash limit's.
func (c *checker) checkCrashLimited(t *taskRec, evs []shard.TaskEvent) string {
	if len(c.crashRounds[t.id]) == 0 {
		return ""
	}
	var retried shard.Round
	for _, e := range evs {
		if e.Type == shard.EvRetried {
			retried = e.Round
		}
	}
	var rounds []shard.Round
	for _, r := range c.crashRounds[t.id] {
		if r > retried {
			rounds = append(rounds, r)
		}
	}
	if len(rounds) == 0 {
		return ""
	}
	first := slices.Min(rounds)
	var outs []shard.TaskEvent
	for _, e := range evs {
		if (e.Type == shard.EvSucceeded || e.Type == shard.EvFailed) && e.Round >= first {
			outs = append(outs, e)
		}
	}
	switch {
	case t.state != shard.Failed:
		return fmt.Sprintf("%v after a hub failed it at the crash limit (rounds %v)", t.state, rounds)
	case len(outs) != 1:
		return fmt.Sprintf("%d outcomes after a hub failed it at the crash limit (rounds %v); want that one", len(outs), rounds)
	case !slices.Contains(rounds, outs[0].Round) || !strings.HasPrefix(outs[0].Error, crashLimitError):
		return fmt.Sprintf("ended with %v in round %d (%q); a hub failed it at the crash limit in rounds %v", outs[0].Type, outs[0].Round, outs[0].Error, rounds)
	}
	c.crashLimitFailed++
	return ""
}
