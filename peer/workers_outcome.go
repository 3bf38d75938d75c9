package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// errStale is the node's refusal of an outcome (fencing).
var errStale = shard.ErrStaleRound

// report hands an outcome of a lease to the node and waits for its
// verdict: a stale round is ErrLeaseLost.
func (h *hub) report(ctx context.Context, o shard.Outcome, handler string) error {
	o.Holder = ""
	err := h.p.read(ctx, func(n *node.Node) error {
		err := n.Report(o)
		h.p.metrics.outcome(o, err)
		n.SetDemand(h.demand()) // the worker's slot is free again
		return err
	})
	if err == nil && !o.Lost {
		h.p.metrics.user.outcome(handler, o, false)
	}
	if errors.Is(err, errStale) {
		return api.ErrLeaseLost
	}
	return err
}

// find returns the lease of a token, or a not-found error.
func (h *hub) find(token string) (*xlease, error) {
	l := h.leases[token]
	if l == nil {
		return nil, fmt.Errorf("%w: lease %s is not known to this peer (it ended long ago, was handed out by another peer, or this peer restarted): the task is no longer this worker's",
			shard.ErrNotFound, token)
	}
	return l, nil
}

// outcome is the common part of Complete and Fail.
func (h *hub) outcome(ctx context.Context, token string, o shard.Outcome) error {
	now := time.Now()
	h.mu.Lock()
	l, err := h.take(token, &o, now)
	h.unlock()
	if l == nil || err != nil {
		if errors.Is(err, errExpired) {
			h.expire(ctx, l, now)
			err = fmt.Errorf("%w: lease %s ran out at %s", api.ErrLeaseLost, token, l.deadline.UTC().Format(time.RFC3339Nano))
		}
		return err
	}
	// The lease is done here: the outcome must reach the node even if the
	// worker hangs up now (a repeat would be answered as taken), so the
	// report does not end with the request, only with the peer or a bound.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := h.report(rctx, o, l.run.Handler); err != nil {
		if errors.Is(err, api.ErrLeaseLost) {
			h.mu.Lock()
			l.state = leaseLost
			h.unlock()
		}
		return err
	}
	return nil
}

func (h *hub) why(l *xlease) string {
	if l.aborted {
		return "its task was canceled, or its lease expired at the owner"
	}
	return "it ran out, or its worker was declared dead"
}

func sameOutcome(a, b *shard.Outcome) bool {
	return a.OK == b.OK && string(a.Result) == string(b.Result) && a.Error == b.Error && a.Permanent == b.Permanent && a.Lost == b.Lost
}

// Complete reports a lease's result. A result over --max-result fails the
// attempt permanently, as a built-in's does, and is a 400 naming result.
func (h *hub) Complete(ctx context.Context, token string, result json.RawMessage) error {
	res := asJSON(result)
	if limit := h.p.cfg.MaxResult; limit > 0 && len(res) > limit {
		h.mu.Lock()
		l, err := h.find(token)
		handler := ""
		if err == nil {
			handler = l.run.Handler
		}
		h.unlock()
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("handler %q: result of %d bytes is over the limit of %d", handler, len(res), limit)
		if err := h.outcome(ctx, token, shard.Outcome{Error: msg, Permanent: true}); err != nil {
			return err
		}
		return &api.FieldError{Field: "result", Message: fmt.Sprintf("%d bytes, over this peer's --max-result of %d: the task failed permanently", len(res), limit)}
	}
	return h.outcome(ctx, token, shard.Outcome{OK: true, Result: res})
}

// Fail reports a lease's failed attempt.
func (h *hub) Fail(ctx context.Context, token, msg string, permanent bool) error {
	return h.outcome(ctx, token, shard.Outcome{Error: msg, Permanent: permanent})
}

// Release hands a lease's task back unrun: it is READY again in a new
// round, no attempt spent, as when a worker dies (but no strike against
// the task: the worker chose to). A worker stopping hands back what it
// has not started, and what it cannot finish.
func (h *hub) Release(ctx context.Context, token, reason string) error {
	return h.outcome(ctx, token, shard.Outcome{Lost: true, Error: reason})
}

// Heartbeat keeps a lease's worker alive and says whether its task was
// canceled (asking the task's owner).
func (h *hub) Heartbeat(ctx context.Context, token string) (api.HeartbeatResult, error) {
	now := time.Now()
	h.mu.Lock()
	l, err := h.find(token)
	if err != nil {
		h.unlock()
		return api.HeartbeatResult{}, err
	}
	if w := h.workers[l.worker]; w != nil {
		w.seen = now
	}
	st, deadline, run := l.state, l.deadline, l.run
	h.unlock()
	if st == leaseHeld && now.After(deadline) {
		h.expire(ctx, l, now)
		st = leaseLost
	}
	if st == leaseDone {
		return api.HeartbeatResult{Deadline: deadline}, nil
	}
	v, err := backend{h.p}.Task(ctx, run.Task, 0)
	if err == nil && v.State == shard.Canceled {
		if st == leaseHeld {
			h.mu.Lock()
			l.aborted = true
			h.lose(l, now)
			h.unlock()
		}
		return api.HeartbeatResult{Canceled: true, Deadline: deadline}, nil
	}
	if st == leaseLost || (err == nil && (v.State != shard.Running || v.Round != run.Round)) {
		if st == leaseHeld {
			h.mu.Lock()
			h.lose(l, now)
			h.unlock()
		}
		return api.HeartbeatResult{}, fmt.Errorf("%w: lease %s was lost (%s)", api.ErrLeaseLost, token, h.why(l))
	}
	return api.HeartbeatResult{Deadline: deadline}, nil
}

// Logs adds lines to the lease's attempt log.
func (h *hub) Logs(_ context.Context, token string, lines []api.WorkerLogLine) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, err := h.find(token)
	if err != nil {
		return err
	}
	if w := h.workers[l.worker]; w != nil {
		w.seen = time.Now()
	}
	if l.state != leaseHeld {
		return fmt.Errorf("%w: lease %s has ended", api.ErrLeaseLost, token)
	}
	// A line is at the time its worker says it was written, within the
	// lease's span: a clock ahead of this peer's (or a bogus time) makes
	// it now, one before the lease was handed out the time it was.
	now := time.Now()
	texts, at := make([]string, len(lines)), make([]time.Time, len(lines))
	for i, ln := range lines {
		texts[i], at[i] = ln.Text, now
		switch {
		case ln.At == nil, ln.At.After(now):
		case ln.At.Before(l.granted):
			at[i] = l.granted
		default:
			at[i] = *ln.At
		}
	}
	l.logw.WriteLines(texts, at)
	return nil
}
