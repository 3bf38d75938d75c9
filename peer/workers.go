package peer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	// Tasks that crash their workers (workers_quarantine.go).
	crashLimit int        // lone deaths that fail a task; 0: no limit, no isolation
	ended      []*xworker // workers whose isolation may have ended (refill)

	// wake restarts run's sweeps after it found nothing to sweep: a
	// worker's first poll, or a run for the workers (kick).
	wake   chan struct{}
	parked atomic.Int64 // times run stopped its ticker (tests wait on it)

	// tag ends this peer's lease tokens (leaseTag of its id), set once
	// the peer has an id.
	tagOnce sync.Once
	tag     string
	// tags maps the tags of other peers' tokens to their ids
	// (string -> string), filled from the membership as tokens come.
	tags sync.Map
	// buried are the lease counts of workers found dead here, oldest
	// first (workers_lone.go).
	buried []buriedWorker
}

type xworker struct {
	id       string
	handlers []string
	labels   map[string]string
	seen     time.Time
	asked    int // the max of its last poll
	slots    int // its capacity, as its last poll said (0: it did not)
	running  int
	polling  int
	// capacity is what the worker holds when full: the max of its last
	// poll plus the leases it held then; polled is when a poll of it last
	// started or ended.
	capacity int
	polled   time.Time
	instance string // PollRequest.Instance of its last poll that named one
	// retired are the instances it had before (the last maxRetired): a
	// poll from one of them is another live process under the same id.
	retired []string
	// isolated counts the suspects it holds (it takes nothing else
	// meanwhile); waitFor is the queued suspect it drains for.
	isolated int
	waitFor  *xrun
}

// maxRetired bounds the instances a worker remembers (xworker.retired).
const maxRetired = 8

type xpoll struct {
	w        *xworker
	handlers []string
	labels   map[string]string
	max      int
	got      []*xlease
	ready    chan struct{} // closed once got is set, or once denied
	// authorized re-checks the poll's token (api.PollRequest.Authorized;
	// nil: no tokens); denied is its error once it failed, after which
	// the poll is handed nothing.
	authorized func() error
	denied     error
}

// deny reports whether q may be handed no task: its token was revoked
// (or lost the scope) since it arrived. h.mu is held.
func (q *xpoll) deny() bool {
	if q.denied == nil && q.authorized != nil {
		q.denied = q.authorized()
	}
	return q.denied != nil
}

type xrun struct {
	run      node.Run
	at       time.Time // when it arrived here
	suspect  bool      // its task's workers kept dying (node.WorkerSuspect): handed out alone
	reserved *xworker  // the worker draining for it (suspect)
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
	suspect  bool          // handed out alone (xrun.suspect)
	outcome  shard.Outcome // leaseDone: what was reported, to recognise a repeat
	ended    time.Time
	granted  time.Time // when it was handed out: no log line of it is older
	logw     *logWriter
}

func newHub(p *Peer, ttl time.Duration, crashLimit int) *hub {
	if ttl <= 0 {
		ttl = DefaultWorkerTTL
	}
	switch {
	case crashLimit == 0:
		crashLimit = DefaultWorkerCrashLimit
	case crashLimit < 0:
		crashLimit = 0
	}
	return &hub{p: p, ttl: ttl, crashLimit: crashLimit, workers: map[string]*xworker{}, leases: map[string]*xlease{},
		byTask: map[shard.TaskID]*xlease{}, wake: make(chan struct{}, 1)}
}

// kick restarts the sweeps if run stopped them; a kick already pending
// absorbs it.
func (h *hub) kick() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// newToken mints a lease token: 128 random bits (the worker's proof that
// the lease is its own), then the tag of the peer that hands it out, so
// that any peer can route a report on it there (workers_route.go).
func (h *hub) newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + h.ownTag()
}

// ownTag is the tag of this peer's lease tokens (leaseTag of its id),
// hashed once.
func (h *hub) ownTag() string {
	h.tagOnce.Do(func() { h.tag = leaseTag(h.p.ID()) })
	return h.tag
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
		h.kick()
	}
	w.seen = now
	return w
}

// lease hands run r to worker w under a new token. h.mu is held.
func (h *hub) lease(w *xworker, r node.Run, now time.Time) *xlease {
	if old := h.byTask[r.Task]; old != nil && old.state == leaseHeld {
		h.lose(old, now) // an older round of the same task: stale
	}
	l := &xlease{token: h.newToken(), run: r, worker: w.id, deadline: now.Add(r.Timeout), granted: now,
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
	if w := h.workers[l.worker]; w != nil {
		if w.running > 0 {
			w.running--
		}
		if l.suspect && w.isolated > 0 {
			w.isolated--
		}
		if l.suspect || w.waitFor != nil && w.running == 0 {
			h.ended = append(h.ended, w)
		}
	}
	if h.byTask[l.run.Task] == l {
		delete(h.byTask, l.run.Task)
	}
	h.done = append(h.done, l)
	h.p.logs.finish(l.logw, h.p.cfg.Retention)
}

func (h *hub) lose(l *xlease, now time.Time) { h.end(l, leaseLost, now) }

// fullHubMessage is the 503 of a new worker's poll to a peer that serves
// max workers already: why, and what to do. It said "api: unavailable:
// this peer serves 10000 workers already", and not whether to retry.
func fullHubMessage(max int, ttl time.Duration) string {
	return fmt.Sprintf("this peer serves %d workers already, the most one peer takes (a worker is forgotten once silent for %v, --worker-ttl): "+
		"poll another peer of the mesh; the poll did nothing: retry it", max, ttl)
}

// Poll answers a worker's poll: tasks queued here for its handlers at
// once, else it waits (its demand goes to the node) until tasks arrive or
// req.Wait passes.
func (h *hub) Poll(ctx context.Context, req api.PollRequest) (api.PollResult, error) {
	labels := node.ParseLabels(req.Labels)
	h.mu.Lock()
	if h.workers[req.Worker] == nil && len(h.workers) >= maxWorkers {
		h.unlock()
		return api.PollResult{}, api.NewError(api.CodeUnavailable, "", fullHubMessage(maxWorkers, h.ttl))
	}
	now := time.Now()
	known := h.workers[req.Worker] != nil
	w := h.worker(req.Worker, now)
	var gone burial
	if change := node.WorkerInstance(w.instance, req.Instance, w.retired); change != node.InstanceSame {
		if change == node.InstanceConflict {
			// Not a restart: two live processes poll under one id, and
			// each poll would bury the other's tasks (a death of each,
			// at every poll, until the crash limit fails them).
			cur := w.instance
			h.unlock()
			return api.PollResult{}, &shard.ConflictError{Field: "instance", Message: fmt.Sprintf(
				"worker %q: instance %s polls again after instance %s took its id over; two worker processes run under one id (give each its own)", req.Worker, req.Instance, cur)}
		}
		if change == node.InstanceRestarted {
			// The worker restarted: its previous process holds nothing.
			h.bury(w, &gone, fmt.Sprintf("it polls again as another instance (%s, was %s): its process restarted", req.Instance, w.instance), now)
			if w.retired = append(w.retired, w.instance); len(w.retired) > maxRetired {
				w.retired = w.retired[1:]
			}
		}
		w.instance = req.Instance
	}
	changed := !known || !slices.Equal(w.handlers, req.Handlers) || !maps.Equal(w.labels, labels)
	w.handlers, w.labels, w.asked, w.slots = slices.Clone(req.Handlers), labels, req.Max, req.Slots
	changed = changed || w.capacity != req.Max+w.running || now.Sub(w.polled) >= standingFor
	w.capacity, w.polled = req.Max+w.running, now
	q := &xpoll{w: w, handlers: w.handlers, labels: labels, max: req.Max, ready: make(chan struct{}), authorized: req.Authorized}
	h.fill(q, now)
	if q.denied != nil {
		h.unlock()
		gone.report(ctx, h)
		return api.PollResult{}, q.denied
	}
	if len(q.got) > 0 || req.Wait <= 0 {
		got := q.got
		h.unlock()
		gone.report(ctx, h)
		if changed || len(got) > 0 {
			h.demandChanged(ctx) // what the worker serves, or its free slots, changed
		}
		return h.answer(got), nil
	}
	h.polls = append(h.polls, q)
	w.polling++
	h.unlock()
	gone.report(ctx, h)
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
	denied := q.deny()
	if len(got) > 0 && (ctx.Err() != nil || denied) {
		// The worker went away before it got them, or its token was
		// revoked: the runs go back to the queue, their tokens void, for
		// another waiting poll or the next.
		for i := len(got) - 1; i >= 0; i-- {
			l := got[i]
			h.lose(l, now)
			delete(h.leases, l.token)
			h.queue = slices.Insert(h.queue, 0, h.runOf(l.run, now))
		}
		got = nil
		h.fillPolls(now, nil)
		waiting = true // the demand changed
	}
	h.unlock()
	if waiting {
		h.demandChanged(context.Background())
	}
	if denied {
		return api.PollResult{}, q.denied
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
		if !r.Created.IsZero() {
			c := r.Created.UTC()
			t.CreatedAt = &c
		}
		if r.Shards > 0 {
			i, n := r.Shard, r.Shards
			t.Shard, t.Shards = &i, &n
		}
		if r.Deaths.Total() > 0 {
			d := r.Deaths
			t.WorkerDeaths = &d
		}
		if ri := r.Info; ri.MaxAttempts > 0 { // zero from an older peer's grant
			t.Priority, t.MaxAttempts = ri.Priority, ri.MaxAttempts
			if ri.Error != "" {
				e := ri.Error
				t.Error = &e
			}
			if ri.Stage > 0 {
				s := ri.Stage - 1
				t.Stage = &s
			}
			if ri.Item > 0 {
				i := ri.Item - 1
				t.Item = &i
			}
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

// standingFor and unwantedFor are the hub's rules of demand and of the
// queue (node.WorkerAsks, node.QueuedUnwanted), which the simulator's hub
// applies too.
const (
	standingFor = node.WorkerStandingFor
	unwantedFor = node.WorkerUnwantedFor
)

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
		if node.WorkerAsks(w.polling > 0, now.Sub(w.polled)) {
			room = max(room, w.capacity-w.running)
		}
		if h.isolating(w) {
			room = 0
		}
		for _, hd := range w.handlers {
			d := node.Demand{Handler: hd, Labels: w.labels}
			k := d.Key()
			if by[k] == nil {
				by[k] = &d
			}
			by[k].Want += room
			by[k].Workers = append(by[k].Workers, w.id)
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
		h.queue = append(h.queue, h.runOf(r, now))
	}
	if len(runs) > 0 {
		h.kick()
	}
	h.fillPolls(now, nil)
	h.ended = nil
	ds := h.demandLocked()
	h.unlock()
	n.SetDemand(ds)
}

// abort marks the leases of aborted tasks lost (on the loop goroutine): the
// owner expired or canceled them. Queued runs of them are dropped.
func (h *hub) abort(n *node.Node, runs []node.RunRef) {
	now := time.Now()
	h.mu.Lock()
	var outs []shard.Outcome
	for _, r := range runs {
		id := r.Task
		if l := h.byTask[id]; l != nil && l.run.Round == r.Round {
			l.aborted = true
			h.lose(l, now)
			outs = append(outs, shard.Outcome{Task: id, Round: l.run.Round, Error: "aborted"})
		}
		for i, x := range h.queue {
			if x.run.Task == id && x.run.Round == r.Round {
				h.queue = slices.Delete(h.queue, i, i+1)
				outs = append(outs, shard.Outcome{Task: id, Round: x.run.Round, Error: "aborted"})
				break
			}
		}
	}
	h.unlock()
	for _, o := range outs {
		_ = n.Report(o) // frees the node's record of the run; stale at the owner
	}
}

var _ api.Workers = backend{}

func (b backend) Poll(ctx context.Context, req api.PollRequest) (api.PollResult, error) {
	return b.p.hub.Poll(ctx, req)
}

func (b backend) Complete(ctx context.Context, lease string, result json.RawMessage) error {
	if _, ok, err := b.p.onLease(ctx, &leaseReq{Do: leaseComplete, Lease: lease, Result: result}); ok {
		return err
	}
	return b.p.hub.Complete(ctx, lease, result)
}

func (b backend) Fail(ctx context.Context, lease, msg string, permanent bool) error {
	if _, ok, err := b.p.onLease(ctx, &leaseReq{Do: leaseFail, Lease: lease, Error: msg, Permanent: permanent}); ok {
		return err
	}
	return b.p.hub.Fail(ctx, lease, msg, permanent)
}

func (b backend) Release(ctx context.Context, lease, reason string) error {
	if _, ok, err := b.p.onLease(ctx, &leaseReq{Do: leaseRelease, Lease: lease, Error: reason}); ok {
		return err
	}
	return b.p.hub.Release(ctx, lease, reason)
}

func (b backend) Heartbeat(ctx context.Context, lease string) (api.HeartbeatResult, error) {
	if a, ok, err := b.p.onLease(ctx, &leaseReq{Do: leaseHeartbeat, Lease: lease}); ok {
		if err == nil && a.Heartbeat == nil {
			err = fmt.Errorf("peer: forwarded heartbeat of lease %s: no answer", lease)
		}
		if err != nil {
			return api.HeartbeatResult{}, err
		}
		return *a.Heartbeat, nil
	}
	return b.p.hub.Heartbeat(ctx, lease)
}

func (b backend) Logs(ctx context.Context, lease string, lines []api.WorkerLogLine) error {
	req := &leaseReq{Do: leaseLogs, Lease: lease, Lines: make([]string, len(lines))}
	for i, ln := range lines {
		req.Lines[i] = ln.Text
		if ln.At != nil {
			if req.At == nil {
				req.At = make([]time.Time, len(lines))
			}
			req.At[i] = *ln.At
		}
	}
	if _, ok, err := b.p.onLease(ctx, req); ok {
		return err
	}
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
