package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Report applies a batch of outcomes (POST /v1/leases/report, or a poll's
// "done"): each is fenced and answered as Complete or Fail would answer
// it alone, and those taken reach the node in one command of its loop
// rather than one each. It returns one error per entry.
func (h *hub) Report(ctx context.Context, done []api.LeaseOutcome) []error {
	type pending struct {
		i int
		l *xlease
		o shard.Outcome
	}
	errs := make([]error, len(done))
	var taken []pending
	var expired []pending
	now := time.Now()
	h.mu.Lock()
	for i := range done {
		o, tooBig := h.leaseOutcome(&done[i])
		l, err := h.take(done[i].Lease, &o, now)
		switch {
		case errors.Is(err, errExpired):
			expired = append(expired, pending{i: i, l: l})
		case err != nil:
			errs[i] = err
		case l != nil:
			taken = append(taken, pending{i: i, l: l, o: o})
			errs[i] = tooBig
		default: // a repeat
			errs[i] = tooBig
		}
	}
	h.unlock()
	if len(taken) > 0 {
		// As for one outcome: once taken here, the batch reaches the node
		// even if the worker hangs up.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
		outs := make([]shard.Outcome, len(taken))
		handlers := make([]string, len(taken))
		for k, p := range taken {
			outs[k], handlers[k] = p.o, p.l.run.Handler
		}
		rerrs := h.reportAll(rctx, outs, handlers)
		cancel()
		for k, p := range taken {
			if rerrs[k] == nil {
				continue
			}
			if errors.Is(rerrs[k], api.ErrLeaseLost) {
				h.mu.Lock()
				p.l.state = leaseLost
				h.unlock()
			}
			errs[p.i] = rerrs[k]
		}
	}
	for _, p := range expired {
		h.expire(ctx, p.l, now)
		errs[p.i] = fmt.Errorf("%w: lease %s ran out at %s", api.ErrLeaseLost, p.l.token, p.l.deadline.UTC().Format(time.RFC3339Nano))
	}
	return errs
}

// errExpired is take's answer for a lease past its deadline: the caller
// expires it (outside h.mu).
var errExpired = errors.New("peer: lease past its deadline")

// take checks a reported outcome against its lease and, when it is the
// lease's first, marks the lease done with it (filling o's task, round and
// run time). It returns the lease to report o for, or nil: a repeat of
// the outcome taken (nil error), or the error to answer (errExpired with
// the lease: it ran out). h.mu is held.
func (h *hub) take(token string, o *shard.Outcome, now time.Time) (*xlease, error) {
	l, err := h.find(token)
	if err != nil {
		return nil, err
	}
	if w := h.workers[l.worker]; w != nil {
		w.seen = now
	}
	if o.Lost && !o.OK { // a release: o.Error is its reason
		o.Error = node.ReleaseText(l.worker, o.Error)
		if w := h.workers[l.worker]; w != nil {
			// A worker that hands work back wants none until it asks
			// again: its free slots leave the demand now, or the task
			// would be leased straight back to it (standingFor).
			w.polled = time.Time{}
		}
	}
	switch {
	case l.state == leaseDone && sameOutcome(&l.outcome, o):
		return nil, nil // a repeat (its first answer was lost): changes nothing
	case l.state == leaseDone:
		return nil, fmt.Errorf("%w: lease %s already ended with another outcome", api.ErrLeaseLost, token)
	case l.state == leaseLost:
		return nil, fmt.Errorf("%w: lease %s was lost (%s)", api.ErrLeaseLost, token, h.why(l))
	case now.After(l.deadline):
		return l, errExpired
	}
	o.Task, o.Round = l.run.Task, l.run.Round
	o.Took = now.Sub(l.deadline.Add(-l.run.Timeout))
	l.outcome = *o
	h.end(l, leaseDone, now)
	return l, nil
}

// leaseOutcome turns a batch entry into the outcome to report. A result
// over --max-result is a permanent failure, and the entry's answer is the
// field error (as Complete's). h.mu is held.
func (h *hub) leaseOutcome(d *api.LeaseOutcome) (shard.Outcome, error) {
	switch {
	case d.Released:
		return shard.Outcome{Lost: true, Error: d.Error}, nil
	case d.Failed:
		return shard.Outcome{Error: d.Error, Permanent: d.Permanent}, nil
	}
	res := asJSON(d.Result)
	limit := h.p.cfg.MaxResult
	if limit <= 0 || len(res) <= limit {
		return shard.Outcome{OK: true, Result: res}, nil
	}
	handler := ""
	if l := h.leases[d.Lease]; l != nil {
		handler = l.run.Handler
	}
	return shard.Outcome{Error: fmt.Sprintf("handler %q: result of %d bytes is over the limit of %d", handler, len(res), limit), Permanent: true},
		&api.FieldError{Field: "result", Message: fmt.Sprintf("%d bytes, over this peer's --max-result of %d: the task failed permanently", len(res), limit)}
}

// reportAll hands outcomes of leases to the node in one command and
// returns its verdict on each: a stale round is ErrLeaseLost.
func (h *hub) reportAll(ctx context.Context, outs []shard.Outcome, handlers []string) []error {
	errs := make([]error, len(outs))
	err := h.p.read(ctx, func(n *node.Node) error {
		for i := range outs {
			outs[i].Holder = ""
			errs[i] = n.Report(outs[i])
			h.p.metrics.outcome(outs[i], errs[i])
		}
		n.SetDemand(h.demand()) // the workers' slots are free again
		return nil
	})
	for i := range outs {
		switch {
		case err != nil:
			errs[i] = err
		case errors.Is(errs[i], errStale):
			errs[i] = api.ErrLeaseLost
		case errs[i] != nil:
			errs[i] = mapErr(errs[i])
		case !outs[i].Lost:
			h.p.metrics.user.outcome(handlers[i], outs[i], false)
		}
	}
	return errs
}

// Report applies a batch of outcomes, each at the peer that holds its
// lease.
func (b backend) Report(ctx context.Context, done []api.LeaseOutcome) []error {
	return b.p.reportAt(ctx, done)
}
