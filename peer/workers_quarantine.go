package peer

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Tasks that crash their workers. A worker found dead hands its leases
// back (Outcome.Lost: a new round, no attempt spent), and a task whose
// handler kills the worker process would go from worker to worker
// without end, taking every task running beside it down too. The hub
// cannot tell which of a dead worker's leases killed it, so the death is
// recorded with each of them (Outcome.Died, in the task's partition log:
// mesh-wide, whichever peer's workers run it next; Run.Deaths). One
// death is no evidence (hosts fail, deploys kill), and the task runs
// again as any other, at once. A task that two workers died running is
// a suspect: it is handed only to a worker that holds nothing else, and
// that worker gets nothing else until the suspect ends. A worker that
// dies holding a single lease is a strike against that task
// (Deaths.Alone); the death that would make --worker-crash-limit strikes
// fails the task for good instead of handing it back. An outcome clears
// the count: the task ran to an end in a worker that survived it.
//
// A busy worker never holds nothing, so the first worker whose poll
// meets a queued suspect while it holds leases reserves it: it takes
// nothing more, drains, and gets the suspect with its next poll (or its
// waiting one) once its last lease ended. A worker that holds nothing
// takes a suspect whoever reserved it.

// DefaultWorkerCrashLimit is how many workers in a row may die running a
// task alone before it fails for good. The rules are node's
// (node/hubrules.go), which the simulator's hub applies too.
const DefaultWorkerCrashLimit = node.DefaultWorkerCrashLimit

// lostWith returns the outcome to report for each of the leases ls that
// worker w held when it was found dead (why), holding held leases in
// all: Lost with the death recorded (the task runs again, isolated), or,
// for a task at the crash limit, a permanent failure. h.mu is held.
func (h *hub) lostWith(w string, ls []*xlease, held int, why string) []shard.Outcome {
	outs := make([]shard.Outcome, len(ls))
	for i, l := range ls {
		r := &l.run
		outs[i] = shard.Outcome{Task: r.Task, Round: r.Round, Lost: true, Died: shard.DiedWithOthers,
			Error: fmt.Sprintf("worker %s on peer %s died running it and %d other tasks: %s", w, h.p.ID(), held-1, why)}
		died, failed, strikes := node.WorkerDeath(r, held, h.crashLimit)
		if died != shard.DiedAlone {
			continue // any of them may have killed it
		}
		outs[i].Died = shard.DiedAlone
		outs[i].Error = fmt.Sprintf("worker %s on peer %s died running it alone: %s", w, h.p.ID(), why)
		if failed {
			shared := strconv.Itoa(r.Deaths.Shared)
			if r.Deaths.Shared >= shard.MaxSharedDeaths {
				shared = "at least " + shared // the count saturates
			}
			// Logged and counted once the mesh confirmed the worker held
			// nothing else (burial.report).
			outs[i] = shard.Outcome{Task: r.Task, Round: r.Round, Permanent: true,
				Error: fmt.Sprintf("the task killed its workers: %d workers died running it alone (and %s beside other tasks), the last %s on peer %s (--worker-crash-limit %d); it runs no more",
					strikes, shared, w, h.p.ID(), h.crashLimit)}
		}
	}
	return outs
}

// fill hands poll q the queued runs it takes, oldest first, isolating
// suspects (see above). h.mu is held.
func (h *hub) fill(q *xpoll, now time.Time) {
	w := q.w
	if q.deny() {
		return // its token was revoked: nothing for it
	}
	if w.isolated > 0 {
		return // runs a suspect alone
	}
	draining := h.draining(w)
	kept := h.queue[:0]
	for _, x := range h.queue {
		if !q.takes(&x.run) {
			kept = append(kept, x)
			continue
		}
		// reservedBy only where the rule reads it (it forgets a stale
		// reservation).
		reserved := x.suspect && w.isolated == 0 && w.running > 0 && !draining && h.reservedBy(x) != nil
		switch node.WorkerFill(x.suspect, w.running, w.isolated > 0, draining, reserved) {
		case node.FillAlone:
			if draining && w.waitFor != x {
				w.waitFor.reserved = nil
			}
			w.waitFor, x.reserved = nil, nil
			l := h.lease(w, x.run, now)
			l.suspect = true
			w.isolated++
			q.got = append(q.got, l)
		case node.FillReserve:
			w.waitFor, x.reserved, draining = x, w, true
			kept = append(kept, x)
		case node.FillLease:
			q.got = append(q.got, h.lease(w, x.run, now))
		default:
			kept = append(kept, x) // w runs a suspect alone, or drains for one
		}
	}
	clear(h.queue[len(kept):])
	h.queue = kept
}

// draining reports whether worker w reserved a suspect still queued here
// (it takes nothing else until it holds nothing). h.mu is held.
func (h *hub) draining(w *xworker) bool {
	x := w.waitFor
	if x != nil && (x.reserved != w || !slices.Contains(h.queue, x)) {
		w.waitFor, x = nil, nil
	}
	return x != nil
}

// reservedBy returns the live worker that reserved queued suspect x, if
// any. h.mu is held.
func (h *hub) reservedBy(x *xrun) *xworker {
	w := x.reserved
	if w != nil && (h.workers[w.id] != w || w.waitFor != x) {
		x.reserved, w = nil, nil
	}
	return w
}

// isolating reports whether worker w takes no more tasks for now: it runs
// a suspect alone, or drains for one. Its free slots are not this peer's
// demand meanwhile. h.mu is held.
func (h *hub) isolating(w *xworker) bool {
	return w.isolated > 0 || h.draining(w)
}

// refill hands the waiting polls of the workers whose isolation may have
// ended (a suspect's lease ended, or a draining worker's last lease) what
// they take now. h.mu is held.
func (h *hub) refill(now time.Time) {
	if len(h.ended) == 0 {
		return
	}
	ended := h.ended
	h.ended = nil
	h.fillPolls(now, func(q *xpoll) bool { return slices.Contains(ended, q.w) })
}

// fillPolls fills the waiting polls that pick selects and answers those
// that got tasks. h.mu is held.
func (h *hub) fillPolls(now time.Time, pick func(*xpoll) bool) {
	polls := h.polls[:0]
	for _, q := range h.polls {
		if pick == nil || pick(q) {
			h.fill(q, now)
		}
		if len(q.got) > 0 || q.denied != nil {
			q.w.polling--
			close(q.ready)
			continue
		}
		polls = append(polls, q)
	}
	clear(h.polls[len(polls):])
	h.polls = polls
}

// runOf returns the queued form of a run leased to this peer: isolated
// if its task is a suspect (and the limit is on).
func (h *hub) runOf(r node.Run, now time.Time) *xrun {
	return &xrun{run: r, at: now, suspect: node.WorkerSuspect(&r, h.crashLimit)}
}

// unlock releases h.mu, first refilling the waiting polls of workers
// whose isolation ended under it.
func (h *hub) unlock() {
	if len(h.ended) > 0 {
		h.refill(time.Now())
	}
	h.mu.Unlock()
}
