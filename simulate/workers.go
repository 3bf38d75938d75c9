package simulate

import (
	"fmt"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// External workers (Config.Workers): processes that poll a peer for the
// tasks of an external handler, run them and report on their lease, as
// peer/workers.go's hub serves them over HTTP. The simulator has no HTTP:
// each node has a simHub, a minimal model of that hub's bookkeeping
// (waiting workers as the node's demand, runs queued until a worker takes
// them, leases by token, fencing of reports, the TTL sweep), and workers
// are simulated processes attached to one peer. The node side is the
// real one: node.SetDemand, Run.External, Node.Report.
//
// Faults ("worker" in Config.Faults): a worker dies (kill -9: what it runs
// vanishes; a new worker takes its place later), stalls past the TTL
// (SIGSTOP: the hub declares it dead and its tasks run again; once it
// continues, its late reports must be refused and change nothing), or
// repeats each report (a retry after a lost response: accepted once,
// answered as a repeat after). Invariant 6 (checker.workerVerdict): an
// outcome the hub hands the node is the reporting worker's, for the round
// of its own lease, on a lease not lost; a repeat of an accepted report is
// answered as one without a second outcome.

// extHandler is the handler external workers serve: with Config.Workers,
// every other task of the workload is of it (workload.external).
const extHandler = "ext"

// workerTTL is the hubs' --worker-ttl: a worker silent this long is dead.
const workerTTL = time.Second

// workerSlots is how many tasks a worker runs at once ("max" of its polls).
const workerSlots = 2

// simWorker is one external worker process.
type simWorker struct {
	id      string
	node    int           // the peer it polls
	running int           // tasks it runs (its slots taken)
	silent  time.Duration // since when it neither polls nor heartbeats; -1: it does
	dead    bool          // killed: it never reports again
	stalled bool          // stopped: its reports wait (held)
	held    []*wjob       // reports finished while stalled
	// busy: its host is overloaded (WorkerBusy): it polls no more, and
	// what it runs finishes only once that ends (slowed), heartbeating
	// meanwhile.
	busy   bool
	slowed []*wjob
	// polled is when a poll of it last started or ended (its free slots
	// stand in the demand node.WorkerStandingFor after).
	polled time.Duration
	// inst is its process's incarnation (WorkerRestart: the same id,
	// another instance); down while the new process has not polled yet.
	inst int
	down bool
	jobs []*wjob // what it runs, not finished yet (WorkerRelease)
	// hung: its handlers hang (WorkerHang): what it runs finishes only
	// once that ends (hangs), heartbeating meanwhile.
	hung  bool
	hangs []*wjob
}

// instance names w's process as its polls do (PollRequest.Instance).
func (w *simWorker) instance() string { return fmt.Sprintf("%s#%d", w.id, w.inst) }

// polling reports whether a poll of w waits at its hub: it runs, is not
// busy, and has a free slot.
func (w *simWorker) polling() bool {
	return !w.dead && !w.down && !w.stalled && !w.busy && w.running < workerSlots
}

// asks reports whether w asks its hub for work at now (node.WorkerAsks):
// a poll of it waits, or one started or ended within the standing time.
func (w *simWorker) asks(now time.Duration) bool {
	return node.WorkerAsks(w.polling(), now-w.polled)
}

// alive reports whether a hub still hears from w at now.
func (w *simWorker) alive(now time.Duration) bool {
	return w.silent < 0 || now-w.silent < workerTTL
}

// wjob is one task a worker runs: what it got from its poll.
type wjob struct {
	w     *simWorker
	hub   *simHub // the hub (peer incarnation) that handed it out
	inst  int     // the worker's process that runs it (simWorker.inst)
	token uint64
	task  shard.TaskID
	round shard.Round
	out   shard.Outcome
	sent  int  // reports sent so far
	ok    bool // a report of it was accepted (then repeats must be too)
}

type leaseState uint8

const (
	leaseHeld leaseState = iota
	leaseDone
	leaseLost
)

// simLease is a lease the hub handed to a worker.
type simLease struct {
	token    uint64
	run      node.Run
	w        *simWorker
	deadline time.Duration // virtual time (the hub's clock: see simHub)
	state    leaseState
	out      shard.Outcome
	suspect  bool // handed out alone (queuedRun.suspect)
	inst     int  // the worker's process it went to (simWorker.inst)
}

// simHub is one node incarnation's hub. It measures the TTL and leases'
// deadlines in virtual time, not the node's skewed clock.
type simHub struct {
	nd       *simNode
	queue    []*queuedRun
	leases   map[uint64]*simLease
	byTask   map[shard.TaskID]*simLease
	declared map[*simWorker]bool // declared dead (until it polls again)
	next     uint64
	// standing: the last demand handed to the node counted the free slots
	// of a worker that polls no more (they lapse at a later sweep).
	standing bool
	// The quarantine of tasks that crash their workers (workerquarantine.go),
	// by worker: the leases it holds here, the suspects among them, and
	// the queued suspect it drains for.
	held     map[*simWorker]int
	isolated map[*simWorker]int
	waitFor  map[*simWorker]*queuedRun
	// The instance of each worker its polls named, and those it had
	// before (workerrestart.go).
	instance map[*simWorker]string
	retired  map[*simWorker][]string
}

type queuedRun struct {
	run      node.Run
	at       time.Duration
	suspect  bool       // its task's workers kept dying (node.WorkerSuspect): handed out alone
	reserved *simWorker // the worker draining for it (suspect)
}

func newHub(nd *simNode) *simHub {
	return &simHub{nd: nd, leases: map[uint64]*simLease{}, byTask: map[shard.TaskID]*simLease{}, declared: map[*simWorker]bool{},
		held: map[*simWorker]int{}, isolated: map[*simWorker]int{}, waitFor: map[*simWorker]*queuedRun{},
		instance: map[*simWorker]string{}, retired: map[*simWorker][]string{}}
}

// workers returns the workers polling this hub's peer that it has not
// declared dead, in creation order.
func (h *simHub) workers() []*simWorker {
	var out []*simWorker
	for _, w := range h.nd.s.allWorkers {
		if w.node == h.nd.idx && !h.declared[w] {
			out = append(out, w)
		}
	}
	return out
}

// demand is what the workers ask for: the free slots of every live worker
// that asks (WorkerAsks: polling, or a busy one within the standing
// time), less the runs queued here (a worker with none still says what it
// serves).
func (h *simHub) demand() []node.Demand {
	ds, _ := h.demandOf()
	return ds
}

// demandOf is demand, and whether it counts the free slots of a worker
// that polls no more (standing).
func (h *simHub) demandOf() (ds []node.Demand, standing bool) {
	now := h.nd.s.now
	labels := nodeLabels(h.nd.s.cfg, h.nd.idx)
	d := node.Demand{Handler: extHandler, Labels: labels}
	served := false
	for _, w := range h.workers() {
		if w.dead || w.stalled || !w.alive(now) {
			continue
		}
		served = true
		if free := workerSlots - w.running; free > 0 && w.asks(now) && !h.isolating(w) {
			d.Want += free
			standing = standing || !w.polling()
		}
		d.Workers = append(d.Workers, w.id)
	}
	if !served {
		return nil, false
	}
	d.Want = max(d.Want-len(h.queue), 0)
	return []node.Demand{d}, standing
}

// push hands the node the demand (inside its drain).
func (h *simHub) push() {
	var ds []node.Demand
	ds, h.standing = h.demandOf()
	h.nd.n.SetDemand(ds)
}

// setDemand hands the node the demand, as one input (outside a drain).
func (h *simHub) setDemand() {
	nd := h.nd
	if nd.hub != h {
		return
	}
	nd.input(nd.gen, h.push)
}

// take queues a committed external run (inside the node's drain, as the
// runtime's hub.deliver) and hands what it can to workers.
func (h *simHub) take(r node.Run) {
	h.nd.s.chk.workerRun(h.nd, &workerRunView{task: r.Task, round: r.Round, worker: r.Worker})
	h.queue = append(h.queue, &queuedRun{run: r, at: h.nd.s.now, suspect: node.WorkerSuspect(&r, simCrashLimit)})
	h.fill()
	h.push()
}

// fill hands queued runs to live workers with a free slot, the freest
// first (ties: the oldest worker), honouring a run's pinned worker and
// the quarantine of suspects (node.WorkerFill): a suspect goes to a
// worker that holds nothing here, and a worker that holds one, or drains
// for one, takes nothing else.
func (h *simHub) fill() {
	h.polls()
	all := h.workers()
	var ws []*simWorker
	kept := h.queue[:0]
	for _, q := range h.queue {
		ws = ws[:0]
		for _, w := range all {
			if w.polling() && (q.run.Worker == "" || q.run.Worker == w.id) {
				ws = append(ws, w)
			}
		}
		slices.SortStableFunc(ws, func(a, b *simWorker) int { return a.running - b.running })
		if !h.place(q, ws) {
			kept = append(kept, q)
		}
	}
	clear(h.queue[len(kept):])
	h.queue = kept
}

// place offers queued run q to the polling workers ws in turn, as their
// polls would meet it; reports whether one took it.
func (h *simHub) place(q *queuedRun, ws []*simWorker) bool {
	for _, w := range ws {
		draining := h.draining(w)
		reserved := q.suspect && h.isolated[w] == 0 && h.held[w] > 0 && !draining && h.reservedBy(q) != nil
		fill := node.WorkerFill(q.suspect, h.held[w], h.isolated[w] > 0, draining, reserved)
		if h.nd.s.cfg.bugNoIsolation {
			fill = node.WorkerFill(q.suspect, 0, false, false, false)
		}
		switch fill {
		case node.FillAlone:
			if x := h.waitFor[w]; x != nil && x != q {
				x.reserved = nil
			}
			delete(h.waitFor, w)
			q.reserved = nil
			h.lease(w, q.run, true)
			return true
		case node.FillReserve:
			h.waitFor[w], q.reserved = q, w
		case node.FillLease:
			h.lease(w, q.run, false)
			return true
		}
	}
	return false
}

// lease hands run r to worker w, which starts it; a suspect (handed out
// alone) isolates w until it ends.
func (h *simHub) lease(w *simWorker, r node.Run, suspect bool) {
	s := h.nd.s
	if old := h.byTask[r.Task]; old != nil && old.state == leaseHeld {
		h.lose(old) // an older round of the same task: stale
	}
	s.chk.workerLease(h, w, suspect)
	h.next++
	l := &simLease{token: h.next, run: r, w: w, deadline: s.now + r.Timeout, suspect: suspect, inst: w.inst}
	h.leases[l.token] = l
	h.byTask[r.Task] = l
	h.held[w]++
	if suspect {
		h.isolated[w]++
	}
	s.chk.workerLeases++
	b := decodeBehaviour(r.Payload)
	o := shard.Outcome{OK: true, Result: r.Payload}
	if s.rng.IntN(1000) < int(b.failPM) {
		o = shard.Outcome{Error: "simulated failure", Permanent: s.rng.IntN(1000) < int(b.permPM)}
	}
	d := b.dur
	if r.Timeout > 0 && d > r.Timeout {
		d = r.Timeout + time.Millisecond // reported after the deadline: refused, timed out by the hub
	}
	o.Took = d
	j := &wjob{w: w, hub: h, inst: w.inst, token: l.token, task: r.Task, round: r.Round, out: o}
	w.jobs = append(w.jobs, j)
	w.running++
	w.polled = s.now // its poll ended with the task (and, with a slot free, another began)
	s.poisoned(w, r, d)
	s.after(d, func() { w.finish(s, j) })
}

// end moves a held lease to state st.
func (h *simHub) end(l *simLease, st leaseState) {
	l.state = st
	if h.byTask[l.run.Task] == l {
		delete(h.byTask, l.run.Task)
	}
	if h.held[l.w]--; h.held[l.w] <= 0 {
		delete(h.held, l.w)
	}
	if l.suspect {
		if h.isolated[l.w]--; h.isolated[l.w] <= 0 {
			delete(h.isolated, l.w)
		}
	}
}

// lose ends a held lease without an outcome (the caller reports what the
// node must learn).
func (h *simHub) lose(l *simLease) {
	if l.state != leaseHeld {
		return
	}
	h.end(l, leaseLost)
	h.nd.s.chk.leaseLost(h, l)
}

// holding returns the tasks the hub holds for its workers (leased or
// queued): the node's ExternalRunning once it settled.
func (h *simHub) holding() int {
	n := 0
	for _, l := range h.byTask {
		if l.state == leaseHeld {
			n++
		}
	}
	for _, q := range h.queue {
		if h.byTask[q.run.Task] == nil {
			n++
		}
	}
	return n
}

// abort marks the leases of aborted tasks lost and drops their queued runs
// (inside the drain, as the runtime's hub.abort); the node learns through
// a report it will find stale.
func (h *simHub) abort(r node.RunRef) {
	t := r.Task
	if l := h.byTask[t]; l != nil && l.state == leaseHeld && l.run.Round == r.Round {
		h.lose(l)
		_ = h.nd.n.Report(shard.Outcome{Task: t, Round: l.run.Round, Error: "aborted"})
	}
	for i, q := range h.queue {
		if q.run.Task == t && q.run.Round == r.Round {
			h.queue = slices.Delete(h.queue, i, i+1)
			_ = h.nd.n.Report(shard.Outcome{Task: t, Round: q.run.Round, Error: "aborted"})
			break
		}
	}
}

// verdicts of a worker's report.
const (
	verdictAccepted = "accepted"
	verdictRepeat   = "repeat"  // the same report again: answered 200, nothing changes
	verdictLost     = "lost"    // 409 lease_lost
	verdictUnknown  = "unknown" // 404: another incarnation's lease
	verdictStale    = "stale"   // the node refused it (fencing)
)

// report is a worker's report on lease token (one input of the node).
func (h *simHub) report(j *wjob) {
	s := h.nd.s
	l := h.leases[j.token]
	switch {
	case h.nd.hub != h || l == nil:
		s.chk.workerVerdict(h.nd, j, verdictUnknown, 0)
	case l.state == leaseDone:
		v := verdictLost
		if l.out.OK == j.out.OK && string(l.out.Result) == string(j.out.Result) && l.out.Error == j.out.Error {
			v = verdictRepeat
		}
		s.chk.workerVerdict(h.nd, j, v, 0)
	case l.state == leaseLost && s.cfg.bugWorkerFence && h.byTask[j.task] != nil && h.byTask[j.task].state == leaseHeld:
		// Seeded bug: the report is matched by task, not by lease, so a
		// late report lands on the task's newer lease here.
		h.accept(h.byTask[j.task], j)
	case l.state == leaseLost:
		s.chk.workerVerdict(h.nd, j, verdictLost, 0)
	case s.now > l.deadline:
		h.lose(l)
		_ = h.nd.n.Report(shard.Outcome{Task: l.run.Task, Round: l.run.Round, TimedOut: true, Took: l.run.Timeout,
			Error: fmt.Sprintf("timed out after %v: the worker %s reported no outcome", l.run.Timeout, l.w.id)})
		s.chk.workerVerdict(h.nd, j, verdictLost, 0)
	default:
		h.accept(l, j)
	}
}

// accept records j's outcome on lease l and hands it to the node.
func (h *simHub) accept(l *simLease, j *wjob) {
	s := h.nd.s
	h.end(l, leaseDone)
	l.out = j.out
	o := j.out
	o.Task, o.Round = l.run.Task, l.run.Round
	release := o.Lost && !o.OK
	if release {
		// A worker that hands work back wants none until it polls again:
		// its free slots leave the demand now (the rule of
		// peer/workers_report.go).
		o.Error = node.ReleaseText(l.w.id, o.Error)
		l.w.polled = -node.WorkerStandingFor
	}
	if err := h.nd.n.Report(o); err != nil {
		l.state = leaseLost
		s.chk.workerVerdict(h.nd, j, verdictStale, 0)
		return
	}
	s.chk.workerVerdict(h.nd, j, verdictAccepted, l.run.Round)
	if release {
		s.chk.released(h, l.run)
	}
}

// sweep declares dead the workers silent for the TTL and hands their
// leases back (the tasks run again at once), times out leases past their
// deadline, and hands back queued runs no live worker here serves (one
// input of the node).
func (h *simHub) sweep() {
	s := h.nd.s
	now := s.now
	changed := false
	for _, w := range h.workers() {
		if w.alive(now) {
			continue
		}
		h.declared[w] = true
		changed = true
		h.bury(w, fmt.Sprintf("no poll or heartbeat for %v", workerTTL))
	}
	for _, t := range sortedTasks(h.byTask) {
		if l := h.byTask[t]; l.state == leaseHeld && now > l.deadline {
			h.lose(l)
			_ = h.nd.n.Report(shard.Outcome{Task: t, Round: l.run.Round, TimedOut: true, Took: l.run.Timeout,
				Error: fmt.Sprintf("timed out after %v: the worker %s reported no outcome", l.run.Timeout, l.w.id)})
		}
	}
	served := h.demand() != nil
	wanted := slices.ContainsFunc(h.workers(), func(w *simWorker) bool { return w.asks(now) })
	clk := h.nd.now() // the peer's clock, which the owner's expiry is read by
	kept := h.queue[:0]
	for _, q := range h.queue {
		expired := node.QueuedExpired(&q.run, clk)
		if !expired && q.run.Worker != "" && h.pinnedGone(q.run.Worker) {
			_ = h.nd.n.Report(h.pinnedFailed(q.run.Task, q.run.Round, q.run.Worker))
			continue
		}
		if !served && now-q.at >= workerTTL {
			_ = h.nd.n.Report(shard.Outcome{Task: q.run.Task, Round: q.run.Round, Lost: true,
				Error: fmt.Sprintf("no live worker on peer %s serves handler %q", h.nd.id, q.run.Handler)})
			continue
		}
		if node.QueuedUnwanted(&q.run, wanted, q.suspect, now-q.at) {
			// Its workers serve it, but none asks: back to its owner, for
			// a worker elsewhere (the rule of peer/workers_sweep.go).
			s.chk.unwanted(h, q.run, false)
			_ = h.nd.n.Report(shard.Outcome{Task: q.run.Task, Round: q.run.Round, Lost: true,
				Error: fmt.Sprintf("no worker on peer %s asks for handler %q", h.nd.id, q.run.Handler)})
			continue
		}
		if expired {
			// Its lease ran out while it waited here (a suspect waiting
			// for a worker to drain, a copy for a busy worker): back to
			// its owner (the rule of peer/workers_sweep.go).
			s.chk.unwanted(h, q.run, true)
			_ = h.nd.n.Report(shard.Outcome{Task: q.run.Task, Round: q.run.Round, Lost: true,
				Error: fmt.Sprintf("its lease expired while queued on peer %s for a worker of handler %q", h.nd.id, q.run.Handler)})
			continue
		}
		kept = append(kept, q)
	}
	changed = changed || len(kept) < len(h.queue) // less queued: more wanted
	clear(h.queue[len(kept):])
	h.queue = kept
	if changed || h.standing {
		h.push() // or the free slots of a worker that polls no more lapse
	}
}

// heldBy returns w's held leases in task order.
func (h *simHub) heldBy(w *simWorker) []*simLease {
	var out []*simLease
	for _, t := range sortedTasks(h.byTask) {
		if l := h.byTask[t]; l.w == w && l.state == leaseHeld {
			out = append(out, l)
		}
	}
	return out
}

func sortedTasks(m map[shard.TaskID]*simLease) []shard.TaskID {
	ts := make([]shard.TaskID, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// finish is a worker's handler returning: it reports (unless dead; held
// while stalled) and its slot frees.
func (w *simWorker) finish(s *sim, j *wjob) {
	w.jobs = slices.DeleteFunc(w.jobs, func(x *wjob) bool { return x == j })
	switch {
	case w.dead, j.inst != w.inst: // its process is gone
		return
	case w.stalled:
		w.held = append(w.held, j)
		return
	case w.busy:
		w.slowed = append(w.slowed, j) // its host is overloaded: it ends once that does
		return
	case w.hung:
		w.hangs = append(w.hangs, j)
		return
	}
	w.send(s, j)
	w.running--
	w.polled = s.now // a slot freed: it polls
	if nd := s.nodes[w.node]; nd.hub != nil {
		nd.hub.wake()
	}
}

// send delivers a report to the hub that handed the lease out (dropped
// with that incarnation of the peer); a repeating worker sends it again a
// little later.
func (w *simWorker) send(s *sim, j *wjob) {
	h := j.hub
	j.sent++
	h.nd.input(h.gen(), func() { h.report(j) })
	if s.workersRepeat && j.sent == 1 {
		s.after(time.Millisecond+time.Duration(s.rng.Int64N(int64(20*time.Millisecond))), func() {
			if !w.dead && j.inst == w.inst {
				w.send(s, j)
			}
		})
	}
}

// gen is the incarnation of the node this hub belongs to (a newer one
// drops inputs for it).
func (h *simHub) gen() int {
	if h.nd.hub != h {
		return -1
	}
	return h.nd.gen
}

// wake hands queued runs to workers that just freed a slot or came back,
// and updates the node's demand (one input).
func (h *simHub) wake() {
	nd := h.nd
	nd.input(nd.gen, func() {
		if nd.hub != h {
			return
		}
		for _, w := range h.nd.s.allWorkers {
			if w.node == nd.idx && h.declared[w] && !w.dead && w.alive(nd.s.now) {
				delete(h.declared, w) // it polls again: a new worker to the hub
			}
		}
		h.fill()
		h.push()
	})
}

// startWorkers attaches Config.Workers workers to every peer and starts
// the hubs' sweep (every tenth of the TTL).
func (s *sim) startWorkers() {
	if s.cfg.Workers == 0 {
		return
	}
	for i := range s.nodes {
		for range s.cfg.Workers {
			s.workers = append(s.workers, s.addWorker(i))
		}
	}
	s.after(workerTTL/10, s.sweepHubs)
}

// addWorker starts a new worker polling node i.
func (s *sim) addWorker(i int) *simWorker {
	s.workerSeq++
	w := &simWorker{id: fmt.Sprintf("w%d.n%d", s.workerSeq, i), node: i, silent: -1, polled: s.now}
	s.allWorkers = append(s.allWorkers, w)
	if nd := s.nodes[i]; nd.hub != nil {
		nd.hub.wake()
	}
	return w
}

func (s *sim) sweepHubs() {
	for _, nd := range s.nodes {
		if h := nd.hub; h != nil && nd.up && !nd.paused {
			nd.input(nd.gen, h.sweep)
		}
	}
	s.after(workerTTL/10, s.sweepHubs)
}

// external makes every other task of the workload's groups (even index)
// one of the external handler, so runs mix both kinds; all of them with
// all set (the workers workload).
func (w *workload) external(all bool) {
	for _, a := range w.arrivals {
		a.spec.Tasks = slices.Clone(a.spec.Tasks) // groups may share their specs (batches)
		for i := range a.spec.Tasks {
			if all || i%2 == 0 {
				a.spec.Tasks[i].Handler = extHandler
			}
		}
	}
}

// workers is the workers workload: parallel groups of 10 tasks for
// external workers (every fourth a broadcast to the workers instead), each running 100 ms to 1.5 s (1% fail), arriving at
// about 60% of the workers' capacity. The workers are busy but not
// swamped: a task whose worker stalled past the TTL runs again at once,
// and is still running elsewhere when the stalled worker continues.
func (g *gen) workers() *workload {
	slots := max(g.cfg.Peers*g.cfg.Workers*workerSlots, 1)
	gap := 10 * 800 * time.Millisecond * 10 / time.Duration(6*slots)
	w := &workload{}
	for left := g.cfg.Tasks; left > 0; left -= 10 {
		tasks := make([]shard.TaskSpec, min(10, left))
		for i := range tasks {
			d := 100*time.Millisecond + time.Duration(g.rng.Int64N(int64(1400*time.Millisecond)))
			tasks[i] = g.task(behaviour{dur: d, failPM: 10, permPM: 200}, i)
		}
		mode := shard.ModeParallel
		if len(w.arrivals)%4 == 3 {
			// A broadcast to the workers (workerbroadcast.go).
			mode, tasks = shard.ModeBroadcast, tasks[:1]
			tasks[0].Name = toWorkersName
		}
		w.arrivals = append(w.arrivals, arrival{at: time.Duration(len(w.arrivals)) * gap,
			spec: g.group(mode, "", tasks), cancelTask: -1})
	}
	w.span = time.Duration(len(w.arrivals)) * gap
	w.scheds = []*schedPlan{{spec: g.workersSchedule(), deleteAt: w.span}}
	return w
}

// workersSchedule is the workers workload's schedule: a broadcast to the
// workers every 2 s, each firing one copy in every worker live in its
// owner's view then (shard.WorkersTemplate; none live: skipped).
func (g *gen) workersSchedule() *shard.ScheduleSpec {
	tmpl := g.task(behaviour{dur: 100 * time.Millisecond}, 0)
	tmpl.Name, tmpl.Handler = shard.WorkersTemplate, extHandler
	return &shard.ScheduleSpec{ID: shard.KeyedScheduleID(fmt.Sprintf("workers-%d", g.cfg.Seed)), Name: "workers",
		Every: 2 * time.Second, Overlap: shard.OverlapAllow, Misfire: shard.MisfireOnce,
		Group: shard.GroupSpec{Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{tmpl}}}
}
