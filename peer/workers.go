package peer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// External workers, the runtime side. A worker polls this peer for tasks
// of the handlers it serves; the free slots of the workers polling here
// (waiting, or polled within standingFor) are the peer's demand
// (Node.SetDemand), for which the owner leases READY tasks to this peer
// exactly as to its own slots or to a thief (same leases, rounds, outbox).
// A committed lease arrives as a Run with External set; the hub hands it
// to a waiting poll under a lease token, then turns what the worker
// reports on that token into the run's outcome. The hub is the holder's
// half of fencing: it refuses (409 lease_lost) any report on a lease that
// is no longer current here (expired, aborted, its worker declared dead);
// the owner fences the rest by round and holder, as for every outcome.

// DefaultWorkerTTL is how long an external worker may go without polling,
// heartbeating or reporting before it is dead and its leases are handed
// back.
const DefaultWorkerTTL = 10 * time.Second

// Bounds of the hub.
const (
	maxWorkers     = 10_000 // workers known to one peer
	maxDoneLeases  = 1 << 16
	doneLeaseKeep  = 10 * time.Minute // finished leases kept to answer a repeated report
	hubSweepFactor = 10               // the sweep runs ttl/hubSweepFactor apart
	// reportTimeout bounds the wait for the loop to take a worker's outcome
	// (once queued, it is taken whether or not the wait ends first).
	reportTimeout = 30 * time.Second
)

// hub holds the external workers of this peer, their waiting polls, the
// runs leased here for them and the leases handed out.
type hub struct {
	p   *Peer
	ttl time.Duration

	mu      sync.Mutex
	workers map[string]*xworker
	polls   []*xpoll           // waiting, oldest first
	queue   []*xrun            // runs leased to this peer, not handed to a worker yet
	leases  map[string]*xlease // by token
	byTask  map[shard.TaskID]*xlease
	done    []*xlease // finished or lost leases, oldest first (kept for repeats)
}

type xworker struct {
	id       string
	handlers []string
	labels   map[string]string
	seen     time.Time
	slots    int
	running  int
	polling  int
	// capacity is what the worker holds when full: the max of its last
	// poll plus the leases it held then; polled is when a poll of it last
	// started or ended.
	capacity int
	polled   time.Time
}

type xpoll struct {
	w        *xworker
	handlers []string
	labels   map[string]string
	max      int
	got      []*xlease
	ready    chan struct{} // closed once got is set
}

type xrun struct {
	run node.Run
	at  time.Time // when it arrived here
}

type leaseState uint8

const (
	leaseHeld leaseState = iota
	leaseDone            // an outcome was reported and accepted here
	leaseLost            // expired, aborted, its worker dead, or refused by the owner
)

type xlease struct {
	token    string
	run      node.Run
	worker   string
	deadline time.Time
	state    leaseState
	aborted  bool          // the node aborted the run (canceled, expired at the owner)
	outcome  shard.Outcome // leaseDone: what was reported, to recognise a repeat
	ended    time.Time
	logw     *logWriter
}

func newHub(p *Peer, ttl time.Duration) *hub {
	if ttl <= 0 {
		ttl = DefaultWorkerTTL
	}
	return &hub{p: p, ttl: ttl, workers: map[string]*xworker{}, leases: map[string]*xlease{}, byTask: map[shard.TaskID]*xlease{}}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// serves reports whether a poll takes run r: its handler, and the labels
// the task requires.
func (q *xpoll) serves(r *node.Run) bool {
	if len(q.got) >= q.max || !slices.Contains(q.handlers, r.Handler) {
		return false
	}
	ts := shard.TaskSpec{Require: r.Require}
	return ts.Matches("", q.labels)
}

// worker records a worker's poll (or report): it is alive.
func (h *hub) worker(id string, now time.Time) *xworker {
	w := h.workers[id]
	if w == nil {
		w = &xworker{id: id}
		h.workers[id] = w
	}
	w.seen = now
	return w
}

// lease hands run r to worker w under a new token. h.mu is held.
func (h *hub) lease(w *xworker, r node.Run, now time.Time) *xlease {
	if old := h.byTask[r.Task]; old != nil && old.state == leaseHeld {
		h.lose(old, now) // an older round of the same task: stale
	}
	l := &xlease{token: newToken(), run: r, worker: w.id, deadline: now.Add(r.Timeout),
		logw: h.p.logs.writer(r.Task, r.Round)}
	h.leases[l.token] = l
	h.byTask[r.Task] = l
	w.running++
	return l
}

// end moves a lease out of the held state. h.mu is held.
func (h *hub) end(l *xlease, st leaseState, now time.Time) {
	if l.state != leaseHeld {
		return
	}
	l.state, l.ended = st, now
	if w := h.workers[l.worker]; w != nil && w.running > 0 {
		w.running--
	}
	if h.byTask[l.run.Task] == l {
		delete(h.byTask, l.run.Task)
	}
	h.done = append(h.done, l)
	h.p.logs.finish(l.run.Task, l.run.Round, h.p.cfg.Retention)
}

func (h *hub) lose(l *xlease, now time.Time) { h.end(l, leaseLost, now) }

// Poll answers a worker's poll: tasks queued here for its handlers at
// once, else it waits (its demand goes to the node) until tasks arrive or
// req.Wait passes.
func (h *hub) Poll(ctx context.Context, req api.PollRequest) (api.PollResult, error) {
	labels := node.ParseLabels(req.Labels)
	h.mu.Lock()
	if h.workers[req.Worker] == nil && len(h.workers) >= maxWorkers {
		h.mu.Unlock()
		return api.PollResult{}, fmt.Errorf("%w: this peer serves %d workers already", api.ErrUnavailable, maxWorkers)
	}
	now := time.Now()
	known := h.workers[req.Worker] != nil
	w := h.worker(req.Worker, now)
	changed := !known || !slices.Equal(w.handlers, req.Handlers) || !maps.Equal(w.labels, labels)
	w.handlers, w.labels, w.slots = slices.Clone(req.Handlers), labels, req.Max
	changed = changed || w.capacity != req.Max+w.running || now.Sub(w.polled) >= standingFor
	w.capacity, w.polled = req.Max+w.running, now
	q := &xpoll{w: w, handlers: w.handlers, labels: labels, max: req.Max, ready: make(chan struct{})}
	h.fill(q, now)
	if len(q.got) > 0 || req.Wait <= 0 {
		got := q.got
		h.mu.Unlock()
		if changed || len(got) > 0 {
			h.demandChanged(ctx) // what the worker serves, or its free slots, changed
		}
		return h.answer(got), nil
	}
	h.polls = append(h.polls, q)
	w.polling++
	h.mu.Unlock()
	h.demandChanged(ctx)

	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	select {
	case <-q.ready:
	case <-timer.C:
	case <-ctx.Done():
	case <-h.p.closed:
	}
	h.mu.Lock()
	now = time.Now()
	w.seen, w.polled = now, now
	got := q.got
	waiting := h.unpoll(q)
	if len(got) > 0 && ctx.Err() != nil {
		// The worker went away before it got them: the runs go back to
		// the queue for the next poll, their tokens void.
		for i := len(got) - 1; i >= 0; i-- {
			l := got[i]
			h.lose(l, now)
			delete(h.leases, l.token)
			h.queue = slices.Insert(h.queue, 0, &xrun{run: l.run, at: now})
		}
		got = nil
	}
	h.mu.Unlock()
	if waiting {
		h.demandChanged(context.Background())
	}
	return h.answer(got), nil
}

// unpoll removes q from the waiting polls; reports whether it was there.
// h.mu is held.
func (h *hub) unpoll(q *xpoll) bool {
	i := slices.Index(h.polls, q)
	if i < 0 {
		return false
	}
	h.polls = slices.Delete(h.polls, i, i+1)
	q.w.polling--
	return true
}

// fill hands poll q the queued runs it takes, oldest first. h.mu is held.
func (h *hub) fill(q *xpoll, now time.Time) {
	kept := h.queue[:0]
	for _, x := range h.queue {
		if q.takes(&x.run) {
			q.got = append(q.got, h.lease(q.w, x.run, now))
			continue
		}
		kept = append(kept, x)
	}
	clear(h.queue[len(kept):])
	h.queue = kept
}

// answer turns leases into the body of a poll's answer.
func (h *hub) answer(ls []*xlease) api.PollResult {
	res := api.PollResult{Tasks: make([]api.WorkerTask, 0, len(ls))}
	for _, l := range ls {
		r := &l.run
		start := l.deadline.Add(-r.Timeout)
		t := api.WorkerTask{
			Task: api.Task{ID: string(r.Task), Group: string(r.Task.Group()), Name: r.Name, Handler: r.Handler,
				State: shard.Running.String(), Attempt: r.Attempt, Round: uint64(r.Round), Peer: h.p.ID(),
				StartedAt: &start, Require: r.Require, Pin: r.Pin},
			Payload: payloadJSON(r.Payload), Inputs: r.Inputs, Timeout: r.Timeout.String(), Trace: r.Trace,
			Lease: l.token, Deadline: l.deadline.UTC(),
		}
		if r.Shards > 0 {
			i, n := r.Shard, r.Shards
			t.Shard, t.Shards = &i, &n
		}
		res.Tasks = append(res.Tasks, t)
	}
	return res
}

// payloadJSON returns a payload as JSON (it is stored compacted JSON; null
// when empty).
func payloadJSON(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// demandChanged hands the node the demand of this peer's workers.
func (h *hub) demandChanged(ctx context.Context) {
	ds := h.demand()
	ctx, cancel := contextWithTimeout(ctx)
	defer cancel()
	_ = h.p.send(ctx, command{query: func(n *node.Node) { n.SetDemand(ds) }})
}

// standingFor is how long a worker's free slots stay in this peer's demand
// after its last poll: the owners lease for it while it reports and polls
// again, and its next poll finds the tasks queued here, instead of waiting
// for a lease to commit on every poll. A worker that stopped polling
// leases no more after it.
const standingFor = time.Second

// demand sums, by handler and labels, the free slots of the workers
// polling now or within standingFor (at least what their waiting polls
// ask), less the runs queued here for them already.
func (h *hub) demand() []node.Demand {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.demandLocked()
}

func (h *hub) demandLocked() []node.Demand {
	by := map[string]*node.Demand{}
	now := time.Now()
	asked := map[*xworker]int{}
	for _, q := range h.polls {
		asked[q.w] += max(q.max-len(q.got), 0)
	}
	for _, w := range h.workers {
		if w.polling == 0 && now.Sub(w.seen) >= h.ttl {
			continue
		}
		room := asked[w]
		if w.polling > 0 || now.Sub(w.polled) < standingFor {
			room = max(room, w.capacity-w.running)
		}
		for _, hd := range w.handlers {
			d := node.Demand{Handler: hd, Labels: w.labels}
			k := d.Key()
			if by[k] == nil {
				by[k] = &d
			}
			by[k].Want += room
		}
	}
	for _, x := range h.queue {
		ts := shard.TaskSpec{Require: x.run.Require}
		for _, d := range by {
			if d.Want > 0 && d.Handler == x.run.Handler && ts.Matches("", d.Labels) {
				d.Want--
			}
		}
	}
	out := make([]node.Demand, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[k])
	}
	return out
}

// deliver takes the external runs of a Ready (on the loop goroutine):
// each goes to a waiting poll that takes it, or to the queue. The node's
// demand is updated at once, before its next Ready.
func (h *hub) deliver(n *node.Node, runs []node.Run) {
	now := time.Now()
	h.mu.Lock()
	for _, r := range runs {
		h.queue = append(h.queue, &xrun{run: r, at: now})
	}
	for _, q := range h.polls {
		h.fill(q, now)
	}
	polls := h.polls[:0]
	for _, q := range h.polls {
		if len(q.got) > 0 {
			q.w.polling--
			close(q.ready)
			continue
		}
		polls = append(polls, q)
	}
	clear(h.polls[len(polls):])
	h.polls = polls
	ds := h.demandLocked()
	h.mu.Unlock()
	n.SetDemand(ds)
}

// abort marks the leases of aborted tasks lost (on the loop goroutine): the
// owner expired or canceled them. Queued runs of them are dropped.
func (h *hub) abort(n *node.Node, ids []shard.TaskID) {
	now := time.Now()
	h.mu.Lock()
	var outs []shard.Outcome
	for _, id := range ids {
		if l := h.byTask[id]; l != nil {
			l.aborted = true
			h.lose(l, now)
			outs = append(outs, shard.Outcome{Task: id, Round: l.run.Round, Error: "aborted"})
		}
		for i, x := range h.queue {
			if x.run.Task == id {
				h.queue = slices.Delete(h.queue, i, i+1)
				outs = append(outs, shard.Outcome{Task: id, Round: x.run.Round, Error: "aborted"})
				break
			}
		}
	}
	h.mu.Unlock()
	for _, o := range outs {
		_ = n.Report(o) // frees the node's record of the run; stale at the owner
	}
}

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
	h.mu.Unlock()
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
			h.mu.Unlock()
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
	return a.OK == b.OK && string(a.Result) == string(b.Result) && a.Error == b.Error && a.Permanent == b.Permanent
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
		h.mu.Unlock()
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

// Heartbeat keeps a lease's worker alive and says whether its task was
// canceled (asking the task's owner).
func (h *hub) Heartbeat(ctx context.Context, token string) (api.HeartbeatResult, error) {
	now := time.Now()
	h.mu.Lock()
	l, err := h.find(token)
	if err != nil {
		h.mu.Unlock()
		return api.HeartbeatResult{}, err
	}
	if w := h.workers[l.worker]; w != nil {
		w.seen = now
	}
	st, deadline, run := l.state, l.deadline, l.run
	h.mu.Unlock()
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
			h.mu.Unlock()
		}
		return api.HeartbeatResult{Canceled: true, Deadline: deadline}, nil
	}
	if st == leaseLost || (err == nil && (v.State != shard.Running || v.Round != run.Round)) {
		if st == leaseHeld {
			h.mu.Lock()
			h.lose(l, now)
			h.mu.Unlock()
		}
		return api.HeartbeatResult{}, fmt.Errorf("%w: lease %s was lost (%s)", api.ErrLeaseLost, token, h.why(l))
	}
	return api.HeartbeatResult{Deadline: deadline}, nil
}

// Logs adds lines to the lease's attempt log.
func (h *hub) Logs(_ context.Context, token string, lines []string) error {
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
	var b strings.Builder
	for _, s := range lines {
		b.WriteString(strings.TrimRight(s, "\r\n"))
		b.WriteByte('\n')
	}
	_, _ = l.logw.Write([]byte(b.String()))
	return nil
}

// expire ends a lease that ran past its deadline: the attempt timed out,
// as a built-in's does.
func (h *hub) expire(ctx context.Context, l *xlease, now time.Time) {
	h.mu.Lock()
	if l.state != leaseHeld {
		h.mu.Unlock()
		return
	}
	h.lose(l, now)
	h.mu.Unlock()
	o := shard.Outcome{Task: l.run.Task, Round: l.run.Round, TimedOut: true, Took: l.run.Timeout,
		Error: fmt.Sprintf("timed out after %v: the worker %s reported no outcome", l.run.Timeout, l.worker)}
	_ = h.report(ctx, o, l.run.Handler)
}

// sweep declares dead the workers silent for the TTL and hands their
// leases back (the tasks run again at once, as a dead peer's), times out
// leases past their deadline, hands back queued runs no live worker here
// serves, and forgets old finished leases.
func (h *hub) sweep(ctx context.Context, now time.Time) {
	var lost, timedOut []*xlease
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
		for _, l := range h.byTask {
			if l.worker == id && l.state == leaseHeld {
				lost = append(lost, l)
			}
		}
	}
	for _, l := range lost {
		h.lose(l, now)
	}
	for _, l := range h.byTask {
		if l.state == leaseHeld && now.After(l.deadline) {
			timedOut = append(timedOut, l)
		}
	}
	for _, l := range timedOut {
		h.lose(l, now)
	}
	served := map[string]bool{}
	for _, w := range h.workers {
		for _, hd := range w.handlers {
			served[hd] = true
		}
	}
	kept := h.queue[:0]
	for _, x := range h.queue {
		expired := !x.run.Expiry.IsZero() && now.After(x.run.Expiry)
		if !expired && h.pinnedGone(&x.run, now) {
			pinned = append(pinned, x.run) // its worker is dead: no other may take it
			continue
		}
		if !served[x.run.Handler] && now.Sub(x.at) >= h.ttl || expired {
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
	h.mu.Unlock()
	if died || standing {
		h.demandChanged(ctx) // the mesh learns it serves no more; free slots lapse (standingFor)
	}
	for _, l := range lost {
		if l.run.Worker != "" {
			pinned = append(pinned, l.run)
			continue
		}
		_ = h.report(ctx, shard.Outcome{Task: l.run.Task, Round: l.run.Round, Lost: true,
			Error: fmt.Sprintf("worker %s lost: no poll or heartbeat for %v", l.worker, h.ttl)}, l.run.Handler)
	}
	for _, l := range timedOut {
		_ = h.report(ctx, shard.Outcome{Task: l.run.Task, Round: l.run.Round, TimedOut: true, Took: l.run.Timeout,
			Error: fmt.Sprintf("timed out after %v: the worker %s reported no outcome", l.run.Timeout, l.worker)}, l.run.Handler)
	}
	for _, r := range back {
		_ = h.report(ctx, shard.Outcome{Task: r.Task, Round: r.Round, Lost: true,
			Error: fmt.Sprintf("no live worker on peer %s serves handler %q", h.p.ID(), r.Handler)}, r.Handler)
	}
	for i := range pinned {
		_ = h.report(ctx, h.pinnedFailed(&pinned[i]), pinned[i].Handler)
	}
}

// run sweeps until ctx ends.
func (h *hub) run(ctx context.Context) {
	defer h.p.wg.Done()
	t := time.NewTicker(max(h.ttl/hubSweepFactor, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.sweep(ctx, now)
		}
	}
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
		out = append(out, api.WorkerInfo{ID: id, Peer: h.p.ID(), Handlers: w.handlers, Labels: node.LabelList(w.labels),
			Running: w.running, Slots: w.slots, LastSeen: w.seen.UTC(), Polling: w.polling > 0})
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

var _ api.Workers = backend{}

func (b backend) Poll(ctx context.Context, req api.PollRequest) (api.PollResult, error) {
	return b.p.hub.Poll(ctx, req)
}

func (b backend) Complete(ctx context.Context, lease string, result json.RawMessage) error {
	return b.p.hub.Complete(ctx, lease, result)
}

func (b backend) Fail(ctx context.Context, lease, msg string, permanent bool) error {
	return b.p.hub.Fail(ctx, lease, msg, permanent)
}

func (b backend) Heartbeat(ctx context.Context, lease string) (api.HeartbeatResult, error) {
	return b.p.hub.Heartbeat(ctx, lease)
}

func (b backend) Logs(ctx context.Context, lease string, lines []string) error {
	return b.p.hub.Logs(ctx, lease, lines)
}

// ListWorkers lists the workers of every live peer: its own, and those
// the others answer over the mesh (asked in parallel, 2 s at most).
func (b backend) ListWorkers(ctx context.Context) (api.WorkerList, error) {
	out := api.WorkerList{Workers: b.p.hub.list(time.Now())}
	var peers []string
	if err := b.p.read(ctx, func(n *node.Node) error {
		for _, m := range n.Members() {
			if m.ID != n.ID() && m.State != node.PeerDead {
				peers = append(peers, m.ID)
			}
		}
		return nil
	}); err != nil {
		return out, err
	}
	ctx, cancel := contextWithTimeout(ctx)
	defer cancel()
	type answer struct {
		peer    string
		workers []api.WorkerInfo
		err     error
	}
	answers := make(chan answer, len(peers))
	for _, id := range peers {
		go func() {
			a, err := forward[workersAns](ctx, b.p, id, &workersReq{})
			answers <- answer{id, a.Workers, err}
		}()
	}
	for range peers {
		a := <-answers
		if a.err != nil {
			out.Unreachable = append(out.Unreachable, a.peer)
			continue
		}
		out.Workers = append(out.Workers, a.workers...)
	}
	slices.Sort(out.Unreachable)
	slices.SortFunc(out.Workers, func(a, b api.WorkerInfo) int {
		if c := strings.Compare(a.Peer, b.Peer); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}
