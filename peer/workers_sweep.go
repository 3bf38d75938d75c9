package peer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// expire ends a lease that ran past its deadline: the attempt timed out,
// as a built-in's does.
func (h *hub) expire(ctx context.Context, l *xlease, now time.Time) {
	h.mu.Lock()
	if l.state != leaseHeld {
		h.unlock()
		return
	}
	h.lose(l, now)
	h.unlock()
	o := shard.Outcome{Task: l.run.Task, Round: l.run.Round, TimedOut: true, Took: l.run.Timeout,
		Error: fmt.Sprintf("timed out after %v: the worker %s reported no outcome", l.run.Timeout, l.worker)}
	_ = h.report(ctx, o, l.run.Handler)
}

// sweep declares dead the workers silent for the TTL and hands their
// leases back (the tasks run again at once, as a dead peer's), times out
// leases past their deadline, hands back queued runs no live worker here
// serves, and forgets old finished leases.
func (h *hub) sweep(ctx context.Context, now time.Time) {
	var timedOut []*xlease
	var lost burial
	var back, pinned []node.Run
	died := false
	h.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(h.workers)) {
		w := h.workers[id]
		if w.polling > 0 || now.Sub(w.seen) < h.ttl {
			continue
		}
		delete(h.workers, id)
		died = true
		h.bury(w, &lost, fmt.Sprintf("no poll or heartbeat for %v", h.ttl), now)
	}
	for _, l := range h.byTask {
		if l.state == leaseHeld && now.After(l.deadline) {
			timedOut = append(timedOut, l)
		}
	}
	for _, l := range timedOut {
		h.lose(l, now)
	}
	served, wanted := map[string]bool{}, map[string]bool{}
	for _, w := range h.workers {
		asks := node.WorkerAsks(w.polling > 0, now.Sub(w.polled))
		for _, hd := range w.handlers {
			served[hd] = true
			wanted[hd] = wanted[hd] || asks
		}
	}
	kept := h.queue[:0]
	for _, x := range h.queue {
		expired := node.QueuedExpired(&x.run, now)
		if !expired && h.pinnedGone(&x.run, now) {
			pinned = append(pinned, x.run) // its worker is dead: no other may take it
			continue
		}
		// Back to its owner when no live worker here serves its handler,
		// or none has asked for its handler for unwantedFor
		// (node.QueuedUnwanted).
		unwanted := node.QueuedUnwanted(&x.run, wanted[x.run.Handler], x.suspect, now.Sub(x.at))
		if !served[x.run.Handler] && now.Sub(x.at) >= h.ttl || unwanted || expired {
			back = append(back, x.run)
			continue
		}
		kept = append(kept, x)
	}
	clear(h.queue[len(kept):])
	h.queue = kept
	for len(h.done) > 0 && (len(h.done) > maxDoneLeases || now.Sub(h.done[0].ended) > doneLeaseKeep) {
		delete(h.leases, h.done[0].token)
		h.done = h.done[1:]
	}
	standing := len(h.workers) > 0
	h.unlock()
	if died || standing {
		h.demandChanged(ctx) // the mesh learns it serves no more; free slots lapse (standingFor)
	}
	lost.report(ctx, h)
	for _, l := range timedOut {
		_ = h.report(ctx, shard.Outcome{Task: l.run.Task, Round: l.run.Round, TimedOut: true, Took: l.run.Timeout,
			Error: fmt.Sprintf("timed out after %v: the worker %s reported no outcome", l.run.Timeout, l.worker)}, l.run.Handler)
	}
	for _, r := range back {
		_ = h.report(ctx, shard.Outcome{Task: r.Task, Round: r.Round, Lost: true,
			Error: fmt.Sprintf("no worker on peer %s asks for handler %q", h.p.ID(), r.Handler)}, r.Handler)
	}
	for i := range pinned {
		_ = h.report(ctx, h.pinnedFailed(&pinned[i]), pinned[i].Handler)
	}
}

// burial holds the outcomes to report for the leases of dead workers.
type burial struct {
	outs     []shard.Outcome
	handlers []string
	// lone are the leases of workers that held nothing else here: a
	// strike against the task only if the worker held no other peer's
	// lease either (a worker behind a load balancer polls every peer),
	// which report asks the mesh first.
	lone []loneDeath
}

// loneDeath is a dead worker's only lease here: outs[i] of its burial.
type loneDeath struct {
	i                int
	worker, instance string
	run              node.Run
	why              string
}

// bury ends the leases worker w held: it is dead (silent for the TTL), or
// its process is (it polls as another instance). b gets the outcome to
// report for each: its death recorded with the task (lostWith), or the
// failed attempt of a copy pinned to it; why says how it was found dead.
// h.mu is held.
func (h *hub) bury(w *xworker, b *burial, why string, now time.Time) {
	var held, free []*xlease
	for _, l := range h.byTask {
		if l.worker == w.id && l.state == leaseHeld {
			held = append(held, l)
		}
	}
	slices.SortFunc(held, func(a, b *xlease) int { return strings.Compare(string(a.run.Task), string(b.run.Task)) })
	for _, l := range held {
		h.lose(l, now)
		if l.run.Worker != "" {
			b.outs, b.handlers = append(b.outs, h.pinnedFailed(&l.run)), append(b.handlers, l.run.Handler)
			continue
		}
		free = append(free, l)
	}
	h.p.metrics.user.workerDied(len(held))
	h.remember(w, len(held), now)
	// A pinned copy held beside a task counts: the task was not alone.
	for i, o := range h.lostWith(w.id, free, len(held), why) {
		if len(held) == 1 {
			b.lone = append(b.lone, loneDeath{i: len(b.outs), worker: w.id, instance: w.instance, run: free[i].run, why: why})
		}
		b.outs, b.handlers = append(b.outs, o), append(b.handlers, free[i].run.Handler)
	}
}

// report hands the node the outcomes of b (h.mu is not held), even if ctx
// (a poll's) ends first: the leases are over here already.
func (b *burial) report(ctx context.Context, h *hub) {
	if len(b.outs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	for _, d := range b.lone {
		if n, known := h.heldElsewhere(ctx, d.worker, d.instance); !known || n > 0 {
			b.outs[d.i] = elsewhereDeath(h.p.ID(), &d, n, known)
		} else if o := b.outs[d.i]; o.Permanent {
			h.p.log.Warn("task failed: its workers died running it", "task", o.Task, "handler", d.run.Handler,
				"worker", d.worker, "strikes", d.run.Deaths.Alone+1, "shared", d.run.Deaths.Shared)
			h.p.metrics.user.crashLimit.Inc()
		}
	}
	for i, o := range b.outs {
		_ = h.report(ctx, o, b.handlers[i])
	}
}

// run sweeps until ctx ends. A sweep that leaves nothing to sweep (no
// worker, run, poll or lease, not even a finished one kept for repeats)
// stops the ticker until a worker polls or a run for the workers comes
// (kick): a peer nobody uses as a worker's peer costs no wakeups here.
func (h *hub) run(ctx context.Context) {
	defer h.p.wg.Done()
	every := max(h.ttl/hubSweepFactor, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.sweep(ctx, now)
			if !h.empty() {
				continue
			}
			t.Stop()
			h.parked.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-h.wake:
			}
			t.Reset(every)
		}
	}
}

// empty reports whether the hub holds nothing a sweep would look at.
func (h *hub) empty() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.workers) == 0 && len(h.polls) == 0 && len(h.queue) == 0 && len(h.leases) == 0 && len(h.done) == 0
}

// list returns this peer's workers, sorted by id.
func (h *hub) list(now time.Time) []api.WorkerInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]api.WorkerInfo, 0, len(h.workers))
	for _, id := range slices.Sorted(maps.Keys(h.workers)) {
		w := h.workers[id]
		if w.polling == 0 && now.Sub(w.seen) >= h.ttl {
			continue
		}
		info := api.WorkerInfo{ID: id, Peer: h.p.ID(), Handlers: w.handlers, Labels: node.LabelList(w.labels),
			Running: w.running, Asked: w.asked, LastSeen: w.seen.UTC(), Polling: w.polling > 0}
		if w.slots > 0 {
			info.Slots = new(w.slots)
		}
		out = append(out, info)
	}
	return out
}

// served returns the handlers the live workers of this peer serve, sorted.
func (h *hub) served(now time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := map[string]bool{}
	for _, w := range h.workers {
		if w.polling > 0 || now.Sub(w.seen) < h.ttl {
			for _, hd := range w.handlers {
				set[hd] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
