package peer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// backend serves the HTTP API (api.Backend): requests for partitions this
// peer leads go into its loop; others are forwarded to their owner.
type backend struct{ p *Peer }

var _ api.Backend = backend{}

// GroupIDFor returns the group id of a submission: derived from the
// idempotency key when there is one (so a repeat lands on the same group,
// in the same partition, without a key index), random otherwise.
func GroupIDFor(key string) shard.GroupID {
	if key == "" {
		return shard.GroupID("g" + randomHex(12))
	}
	return shard.KeyedGroupID(key)
}

// Submit creates a group. Its trace (spec.Trace) is the traceparent of
// the submit span, a child of the client's traceparent (spec.Trace as the
// API found it); another id the client chose is kept; with none and no
// span recorded, a random id.
func (b backend) Submit(ctx context.Context, spec *shard.GroupSpec) (api.SubmitResult, error) {
	r, _, err := b.SubmitWait(ctx, ctx, spec, 0)
	return r, err
}

// SubmitWait implements api.SubmitWaiter: the owner waits, so a submission
// through another peer is forwarded once. With wait 0 it is Submit.
func (b backend) SubmitWait(ctx, waitCtx context.Context, spec *shard.GroupSpec, wait time.Duration) (r api.SubmitResult, v *shard.TaskView, err error) {
	spec.ID = GroupIDFor(spec.Key)
	ctx, span := b.p.startSpan(ctx, spec.Trace, "needle.submit", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("needle.group", string(spec.ID)), attribute.Int("needle.tasks", len(spec.Tasks))))
	defer func() { endSpan(span, err) }()
	if tp := traceparent(ctx); tp != "" && (spec.Trace == "" || isTraceparent(spec.Trace)) {
		spec.Trace = tp // an id the client chose stays (its spans' trace id derives from it)
	} else if spec.Trace == "" {
		spec.Trace = randomHex(8)
	}
	if spec.Mode == shard.ModeBroadcast {
		r, err = b.submitBroadcast(ctx, spec)
		return r, nil, err
	}
	// The group id is fixed before the first try, so a retry after an
	// owner change cannot create a second group.
	r, v, err = b.submit(ctx, waitCtx, spec, wait)
	b.p.countSubmitted(r, err)
	span.SetAttributes(attribute.Bool("needle.created", r.Created))
	return r, v, err
}

// countSubmitted adds the tasks a submission created to
// needle_tasks_submitted_total.
func (p *Peer) countSubmitted(r api.SubmitResult, err error) {
	if err == nil && r.Created {
		p.metrics.user.submitted.Add(float64(len(r.Tasks)))
	}
}

// submitBroadcast expands a broadcast on this peer, over the live peers
// matching its labels in this peer's membership view (the copies and
// their pins travel to the owner as they are, so a retry creates the same
// group), then submits it. A repeat of a keyed broadcast answers the
// group created first, whose peers may differ from this expansion: the
// names (peer ids) are then read back from it.
func (b backend) submitBroadcast(ctx context.Context, spec *shard.GroupSpec) (api.SubmitResult, error) {
	if err := b.p.read(ctx, func(n *node.Node) error { return n.ExpandBroadcast(spec) }); err != nil {
		return api.SubmitResult{}, err
	}
	r, _, err := b.submit(ctx, ctx, spec, 0)
	b.p.countSubmitted(r, err)
	if err != nil || r.Created || len(r.Tasks) == len(spec.Tasks) {
		return r, err
	}
	v, err := b.Group(ctx, r.Group, 0, true)
	if err != nil {
		return r, err
	}
	spec.Tasks = spec.Tasks[:0]
	for _, t := range v.Tasks {
		spec.Tasks = append(spec.Tasks, shard.TaskSpec{Name: t.Name, Pin: t.Pin, Require: t.Require, Handler: t.Handler})
	}
	return r, nil
}

// submit routes a submission to its owner and runs it there: here in one
// trip through the loop (submitHere), or forwarded. A forward that waits
// is made with waitCtx, and one it cut is made again without a wait: the
// owner may have created the group before the cut or not, and the same
// group id asked again answers the group (Created false) or creates it.
func (b backend) submit(ctx, waitCtx context.Context, spec *shard.GroupSpec, wait time.Duration) (api.SubmitResult, *shard.TaskView, error) {
	var a submitAns
	end := time.Now().Add(wait)
	cut := false
	var req string // names this request to the owner, asked again after a cut
	if spec.Key != "" && wait > 0 {
		req = randomHex(16)
	}
	err := retryUnavailable(ctx, func() error {
		wait := waitLeft(wait, end)
		s, v, to, features, err := local{b.p}.submitHere(ctx, waitCtx, spec, wait)
		if err != nil || to == "" {
			a = submitAns{Submit: &s, Task: v}
			return err
		}
		fctx := ctx
		if cut = cut || wait > 0 && waitCtx.Err() != nil; cut {
			wait = 0
		} else if wait > 0 {
			fctx = waitCtx
		}
		a, err = forwardSpan[submitAns](fctx, b.p, to, wireForm(&submitReq{Spec: spec, Wait: wait, Req: req}, features))
		if err != nil && wait > 0 && waitCtx.Err() != nil && ctx.Err() == nil {
			cut = true
			a, err = forwardSpan[submitAns](ctx, b.p, to, wireForm(&submitReq{Spec: spec, Req: req}, features))
		}
		return b.p.forwardUnavailable(spec.ID, to, err)
	})
	r, err := answered(a.Submit, b.p.whyUnavailable(spec.ID, err))
	if err != nil {
		return r, nil, err
	}
	if cut && spec.Key == "" {
		// A random group id is this request's alone: if the owner had it
		// already, the cut forward created it.
		r.Created = true
	}
	return r, a.Task, nil
}

// Task and Group route a read to the owner; a retry (the owner moved
// while it waited, and let the wait go: waiters.sweep) waits only what is
// left of the wait, not all of it again.
func (b backend) Task(ctx context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
	req := &taskReq{Task: id, Wait: wait}
	end := time.Now().Add(wait)
	var a taskAns
	err := untilWaitEnds(ctx, wait, end, func() (err error) {
		a, err = routedWith[taskAns](ctx, b.p, id.Group(), req, func() { req.Wait = waitLeft(wait, end) })
		return err
	})
	return answered(a.Task, err)
}

func (b backend) Group(ctx context.Context, id shard.GroupID, wait time.Duration, withTasks bool) (shard.GroupView, error) {
	req := &groupReq{Group: id, Wait: wait, NoTasks: !withTasks}
	end := time.Now().Add(wait)
	var a groupAns
	err := untilWaitEnds(ctx, wait, end, func() (err error) {
		a, err = routedWith[groupAns](ctx, b.p, id, req, func() { req.Wait = waitLeft(wait, end) })
		return err
	})
	return answered(a.Group, err)
}

// untilWaitEnds calls read (a routed long poll) again while it answers
// unavailable and its wait, which ends at end, has time left: a partition
// that moves while a client waits on it (a peer joined or drained, its
// leadership changed hands) may take an election, longer than a routed
// call's own retries, and the client asked to wait, not to be told 503
// in the middle of its wait. A read without a wait is read once.
func untilWaitEnds(ctx context.Context, wait time.Duration, end time.Time, read func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := read()
		left := time.Until(end)
		if wait <= 0 || left <= 0 || !errors.Is(err, api.ErrUnavailable) {
			return err
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

// waitLeft is what is left, at a retry, of a wait that ends at end: at
// least a millisecond (a wait of 0 is no wait at all, whose answer to a
// submission has no view of its task).
func waitLeft(wait time.Duration, end time.Time) time.Duration {
	if wait <= 0 {
		return wait
	}
	return max(time.Until(end), time.Millisecond)
}

func (b backend) TaskEvents(ctx context.Context, id shard.TaskID) ([]shard.TaskEvent, error) {
	a, err := routed[eventsAns](ctx, b.p, id.Group(), &eventsReq{Task: id})
	return a.Events, err
}

func (b backend) CancelTask(ctx context.Context, id shard.TaskID, by string) (shard.TaskView, error) {
	if err := b.cancel(ctx, id.Group(), id, by); err != nil {
		return shard.TaskView{}, err
	}
	return b.Task(ctx, id, 0)
}

func (b backend) CancelGroup(ctx context.Context, id shard.GroupID, by string) (shard.GroupView, error) {
	if err := b.cancel(ctx, id, "", by); err != nil {
		return shard.GroupView{}, err
	}
	return b.Group(ctx, id, 0, true)
}

func (b backend) cancel(ctx context.Context, g shard.GroupID, t shard.TaskID, by string) error {
	_, err := routed[rpcError](ctx, b.p, g, &cancelReq{Group: g, Task: t, By: by})
	return err
}

// local serves requests for partitions this peer leads, through its loop.
type local struct{ p *Peer }

// SubmitWait proposes a submission as owner and waits for its commit, then,
// with wait > 0, for the view of the first task, until it is terminal or
// the wait has passed (nil when it cannot be read). A task that ends with
// its creation's commit (its outcome in the same entry) comes back with
// the commit's reply. The commit span is a child of the submit span
// (spec.Trace), here or on the peer that forwarded it. req names the
// forwarded request (submitReq.Req), "" for none: one that created the
// group is remembered as its creator before the wait, and answered so
// when asked again.
func (b local) SubmitWait(ctx context.Context, spec *shard.GroupSpec, wait time.Duration, req string) (api.SubmitResult, *shard.TaskView, error) {
	start := time.Now()
	if err := b.p.admit(start); err != nil {
		return api.SubmitResult{}, nil, b.p.refuse(err)
	}
	r, err := b.p.callWith(ctx, command{do: func(n *node.Node, req uint64) { n.Submit(req, spec) }, view: wait > 0})
	if err == nil {
		r.Submit.Created = b.p.creators.note(req, r.Submit.Group, r.Submit.Created)
	}
	return b.submitted(ctx, ctx, spec, wait, start, r, err)
}

// submitHere is SubmitWait in one trip through the loop when this peer
// owns spec's group: the loop routes the submission and proposes it at
// once (a route, then a submission, took two trips). When another peer
// owns it, nothing is proposed and to names that peer, with the features
// it advertised; when none is known, the error is ErrUnavailable.
func (b local) submitHere(ctx, waitCtx context.Context, spec *shard.GroupSpec, wait time.Duration) (s api.SubmitResult, v *shard.TaskView, to string, features uint64, err error) {
	p := b.p
	start := time.Now()
	// Read before the loop, used only if the group is this peer's.
	full := p.admit(start)
	r, err := p.callWith(ctx, command{view: wait > 0, do: func(n *node.Node, req uint64) {
		switch owner := n.Owner(spec.ID); {
		case owner == p.tr.ID() && full != nil:
			p.answerNow(req, callReply{Reply: node.Reply{Err: p.refuse(full)}})
		case owner == p.tr.ID():
			n.Submit(req, spec)
		case owner == "":
			p.answerNow(req, callReply{Reply: node.Reply{Err: n.Unavailable(spec.ID)}, routed: true})
		default:
			p.answerNow(req, callReply{routed: true, to: owner, features: n.MemberFeatures(owner)})
		}
	}})
	if r.routed {
		return s, nil, r.to, r.features, err
	}
	s, v, err = b.submitted(ctx, waitCtx, spec, wait, start, r, err)
	return s, v, "", 0, err
}

// submitted records the commit span of a submission made here (from
// start) and completes its answer from its reply r, the wait made with
// waitCtx.
func (b local) submitted(ctx, waitCtx context.Context, spec *shard.GroupSpec, wait time.Duration, start time.Time, r callReply, err error) (api.SubmitResult, *shard.TaskView, error) {
	_, span := b.p.startSpan(ctx, spec.Trace, "needle.commit", trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("needle.group", string(spec.ID)), attribute.String("needle.peer", b.p.ID())))
	endSpan(span, err)
	if err != nil {
		return api.SubmitResult{}, nil, err
	}
	s := api.SubmitResult{Group: r.Submit.Group, Tasks: r.Submit.Tasks, Created: r.Submit.Created}
	if wait <= 0 || len(s.Tasks) == 0 {
		return s, nil, nil
	}
	if r.view != nil {
		return s, r.view, nil
	}
	v, err := b.Task(waitCtx, s.Tasks[0], wait)
	if err != nil {
		return s, nil, nil
	}
	return s, &v, nil
}

func (b local) Task(ctx context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
	if wait > 0 {
		w := &waiter{task: id}
		if err := b.p.wait(ctx, w, wait); err != nil {
			return shard.TaskView{}, err
		}
		if v, ok := w.terminal(); ok {
			return *v, nil
		}
	}
	var v shard.TaskView
	err := b.p.read(ctx, func(n *node.Node) (err error) { v, err = n.Task(id); return err })
	return v, err
}

func (b local) Group(ctx context.Context, id shard.GroupID, wait time.Duration, withTasks bool) (shard.GroupView, error) {
	if wait > 0 {
		if err := b.p.wait(ctx, &waiter{group: id}, wait); err != nil {
			return shard.GroupView{}, err
		}
	}
	var v shard.GroupView
	err := b.p.read(ctx, func(n *node.Node) (err error) {
		if withTasks {
			v, err = n.Group(id)
		} else {
			v, err = n.GroupSummary(id)
		}
		return err
	})
	return v, err
}

func (b local) TaskEvents(ctx context.Context, id shard.TaskID) ([]shard.TaskEvent, error) {
	var evs []shard.TaskEvent
	err := b.p.read(ctx, func(n *node.Node) (err error) { evs, err = n.TaskEvents(id); return err })
	return evs, err
}

func (b local) cancel(ctx context.Context, g shard.GroupID, t shard.TaskID, by string) error {
	_, err := b.p.call(ctx, func(n *node.Node, req uint64) { n.Cancel(req, g, t, by) })
	return err
}

// call runs a request in the loop (f gets the request's number) and waits
// for its reply, once applied.
func (p *Peer) call(ctx context.Context, f func(n *node.Node, req uint64)) (node.Reply, error) {
	r, err := p.callWith(ctx, command{do: f})
	return r.Reply, err
}

// callWith is call for a command that may ask for more (command.view).
func (p *Peer) callWith(ctx context.Context, c command) (callReply, error) {
	c.reply = make(chan callReply, 1)
	if err := p.send(ctx, c); err != nil {
		return callReply{}, err
	}
	select {
	case r := <-c.reply:
		return r, mapErr(r.Err)
	case <-ctx.Done():
		return callReply{}, ctx.Err()
	case <-p.closed:
		return callReply{}, errStopping
	}
}

// read runs f on the loop goroutine and waits for it. f writes the
// caller's variables, so a caller that gives up (its context ended, or
// the peer closed) first takes f back: the loop then skips it. When the
// loop has already begun f, the caller waits for f to finish (a read of
// the node is short) and its answer stands, so f never writes what the
// caller has gone on to read.
func (p *Peer) read(ctx context.Context, f func(n *node.Node) error) error {
	const queued, begun, withdrawn = 0, 1, 2
	var state atomic.Int32
	done := make(chan error, 1)
	q := func(n *node.Node) {
		if state.CompareAndSwap(queued, begun) {
			done <- f(n)
		}
	}
	if err := p.send(ctx, command{query: q}); err != nil {
		return err
	}
	var gaveUp error
	select {
	case err := <-done:
		return mapErr(err)
	case <-ctx.Done():
		gaveUp = ctx.Err()
	case <-p.closed:
		gaveUp = errStopping
	}
	if state.CompareAndSwap(queued, withdrawn) {
		return gaveUp
	}
	return mapErr(<-done)
}

// wait parks a waiter in the loop until its target is terminal, the wait
// passes, or the client goes away. Passing the wait is not an error; a
// waiter let go because another peer owns its target now (waiters.sweep),
// or not parked because this peer does not serve it now (waiters.add), is
// unavailable.
func (p *Peer) wait(ctx context.Context, w *waiter, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w.ctx = ctx
	w.done = make(chan struct{})
	if err := p.send(ctx, command{query: func(n *node.Node) { p.waiters.add(n, w) }}); err != nil {
		return nil
	}
	select {
	case <-w.done:
		if w.moved {
			// Another peer owns the target now, or this one does not
			// serve it now: the caller routes the rest of the wait.
			return mapErr(node.ErrUnavailable)
		}
	case <-ctx.Done():
	case <-p.closed:
		return errStopping
	}
	return nil
}

func (p *Peer) send(ctx context.Context, c command) error {
	select {
	case p.inbox <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closed:
		return errStopping
	}
}

// errStopping is a request's answer once this peer is stopping.
var errStopping = fmt.Errorf("%w: this peer is stopping", api.ErrUnavailable)

// mapErr puts the node's errors in the API's vocabulary (the shard's are
// in its table): a node that cannot serve is unavailable, a retry of
// nothing retryable a conflict that says why (the task's state).
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, node.ErrUnavailable), errors.Is(err, node.ErrStopped):
		if ae := unavailableAPIError(err); ae != nil {
			return ae // it says why (unavailable.go)
		}
		return errors.Join(api.ErrUnavailable, err)
	case errors.Is(err, shard.ErrNotRetryable):
		return api.NewError(api.CodeConflict, "", strings.TrimPrefix(err.Error(), shard.ErrNotRetryable.Error()+": "))
	}
	return err
}

// contextWithTimeout bounds an internal query of the loop.
func contextWithTimeout(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, 2*time.Second)
}

// retryUnavailable retries f while it fails with unavailable: leadership
// moves for a moment after a peer joins, dies or comes back, and the next
// try routes to the new owner. It gives up after about a second, or when
// ctx ends, and returns the last error.
func retryUnavailable(ctx context.Context, f func() error) error {
	delay := 25 * time.Millisecond
	for try := 0; ; try++ {
		err := f()
		if err == nil || try == 5 || !errors.Is(err, api.ErrUnavailable) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay *= 2
	}
}
