package simulate

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
	"github.com/needle-mesh/needle/wal"
)

// simNode is one simulated peer: a node.Node, its disk (a wal.Memory that
// survives crashes), its clock, and the handlers it runs. It drives the
// Node exactly like the runtime's loop (peer/loop.go): every input is
// preceded by Tick(now), all inputs of one instant are followed by one
// drain of Ready, and between inputs the node sleeps until its
// NextDeadline (a wakeup on its own clock).
type simNode struct {
	s   *sim
	idx int
	id  string
	n   *node.Node   // nil while down
	drv *node.Driver // drives n's Readies (handler.go, simIO)
	log *wal.Memory  // the disk: kept across crashes
	clk clock
	// lateSeed picks how late each of its timers fires (timerLate).
	lateSeed uint64

	up, paused  bool
	left        bool          // left the mesh for good (Leave): never restarts
	joining     bool          // not joined yet (Join): nothing starts it before
	resumedAt   time.Duration // when a pause last ended (checker.submitted)
	gen         int           // incarnation: bumped by crash and stop; stale events compare it
	boots       int           // starts so far; the Node's Boot nonce
	drainQueued bool          // a drain is scheduled at the current instant
	drainFn     func()        // the scheduled drain (queueDrain)
	// agreed is, per partition, where this node's replica last matched
	// the others' (checkReplicas).
	agreed map[int]agreedAt
	held   []func() // inputs that arrived while paused, in order

	jobs   map[shard.TaskID]*job // handlers running or queued here
	queue  []*job                // jobs waiting for a worker slot
	active int                   // jobs holding a worker slot
	// slowFactor, when > 1, multiplies the run time of handlers started
	// now (Slow).
	slowFactor int
	reqs       map[uint64]*request // client requests by the Node's request id
	// wakeAt is the virtual time of the wakeup scheduled for incarnation
	// wakeGen (see scheduleWake); wakeSet is false when none is.
	wakeAt  time.Duration
	wakeGen int
	wakeSet bool
	hub     *simHub // its external workers' hub (Config.Workers; workers.go)
}

// now returns the node's own time.
func (nd *simNode) now() time.Time { return nd.clk.now(nd.s.now) }

// start builds the Node from what the disk holds (nothing at the first
// start) with a new Boot nonce; its first drain schedules its first
// wakeup.
func (nd *simNode) start() error {
	states := map[uint32]wal.PartitionState{}
	parts, err := nd.log.Partitions()
	if err != nil {
		return err
	}
	for _, p := range parts {
		if states[p], err = nd.log.Load(p); err != nil {
			return fmt.Errorf("simulate: %s: load partition %d: %w", nd.id, p, err)
		}
	}
	nd.boots++
	cfg := node.DefaultNodeConfig(nd.id, fmt.Sprint(nd.boots))
	cfg.Partitions, cfg.Slots = nd.s.cfg.Partitions, nd.s.cfg.Slots
	cfg.Founder = nd.idx == 0
	if nd.s.cfg.Start == StartTogether {
		// A peer started late (a Join fault) has the same list: it was
		// named in it, and bootstraps its partitions when it comes.
		cfg.Founder, cfg.Initial = false, nd.s.initial
	}
	cfg.Replicas, cfg.Placement = nd.s.cfg.Replicas, nd.s.cfg.Placement
	cfg.Labels = nodeLabels(nd.s.cfg, nd.idx)
	cfg.SnapshotEvery = snapshotEvery(nd.s.cfg)
	cfg.Shard = shard.DefaultConfig()
	cfg.Shard.LeaseGrace = 2 * time.Second
	cfg.Shard.DefaultTimeout = 10 * time.Second
	cfg.Shard.Next = cron.Next
	if nd.s.cfg.Workers > 0 {
		cfg.Shard.External = func(h string) bool { return h == extHandler }
	}
	cfg.Rand = rand.New(rand.NewPCG(nd.s.rng.Uint64(), nd.s.rng.Uint64()))
	cfg.Rings = nd.s.rings
	cfg.Addrs = []string{"/sim/" + nd.id} // reachable once known (links.go)
	if nd.s.cfg.Log != nil {
		cfg.Logger = slog.New(vtHandler{nd.s.cfg.Log.Handler(), nd.s})
	}
	if err = cfg.LoadMeta(nd.log); err != nil {
		return fmt.Errorf("simulate: %s: load: %w", nd.id, err)
	}
	n, err := node.NewNode(cfg, states, nd.now())
	if err != nil {
		return fmt.Errorf("simulate: %s: start: %w", nd.id, err)
	}
	outbox, err := nd.log.Outbox()
	if err == nil {
		err = n.RestoreOutbox(outbox)
	}
	if err != nil {
		return fmt.Errorf("simulate: %s: outbox: %w", nd.id, err)
	}
	nd.n, nd.up, nd.paused = n, true, false
	nd.s.net.links.started(nd.idx, nd.s.now)
	nd.drv = &node.Driver{Node: n, IO: simIO{nd}, MaxRounds: 100_000, Trace: nd.s.cfg.trace(nd.id)}
	nd.jobs, nd.reqs = map[shard.TaskID]*job{}, map[uint64]*request{}
	nd.queue, nd.active = nil, 0
	nd.wakeSet = false
	if nd.s.cfg.Workers > 0 {
		nd.hub = newHub(nd)
		nd.hub.wake() // its workers poll the new incarnation
	}
	nd.queueDrain()
	return nil
}

// stop takes the node down. A crash (lose) drops the disk's unsynced tail,
// as kill -9 plus a power loss; a clean stop syncs it (Close). Running
// handlers, held inputs and pending requests die with the process.
func (nd *simNode) stop(lose bool) {
	nd.s.checkIdentity(nd)
	nd.s.disconnect(nd)
	if lose {
		nd.log.Crash()
	} else if err := nd.log.Close(); err != nil {
		nd.s.fail(invWAL, fmt.Sprintf("%s: close: %v", nd.id, err))
	}
	nd.up, nd.paused, nd.n, nd.drv, nd.drainQueued = false, false, nil, nil, false
	nd.gen++
	nd.held, nd.jobs, nd.reqs = nil, nil, nil
	nd.queue, nd.active = nil, 0
	nd.hub = nil // the peer's leases die with it; its workers' reports are refused
}

// restart starts the node again from its disk; once it serves, the checker
// verifies that every acknowledged group it owns is still there.
func (nd *simNode) restart() {
	if nd.left || nd.joining {
		return
	}
	if err := nd.start(); err != nil {
		nd.s.fail(invWAL, err.Error())
		return
	}
	nd.s.durCheck = true
}

// scheduleWake schedules the node's next Tick at its NextDeadline, read
// on its own clock, unless a wakeup at that very time is already
// scheduled. It runs after every drain (every input and wakeup ends with
// one), so the deadline is always that of the node's latest state, as the
// runtime's timer, reset at every loop iteration (peer/loop.go): a
// deadline that moved later (a probe's ack arrived, so its indirect pings
// are not due) moves the wakeup later too, and the wakeup it supersedes
// does nothing when it fires. A paused node gets none: its resume ticks
// it.
func (nd *simNode) scheduleWake() {
	if !nd.up || nd.paused {
		return
	}
	dl := nd.n.NextDeadline()
	d := min(max(dl.Sub(nd.now()), 0), time.Hour)
	at := nd.s.now + nd.clk.virtual(d)
	if d > 0 {
		at += nd.timerLate(dl)
	}
	if nd.wakeSet && nd.wakeGen == nd.gen && nd.wakeAt == at {
		return
	}
	nd.wakeAt, nd.wakeGen, nd.wakeSet = at, nd.gen, true
	w := nd.s.freeWake
	if w == nil {
		w = &wake{}
		w.run = w.fire
	} else {
		nd.s.freeWake = w.next
	}
	w.nd, w.gen, w.at = nd, nd.gen, at
	nd.s.at(at, w.run)
}

// maxTimerLate bounds how late a node's timer fires after its deadline.
const maxTimerLate = time.Millisecond

// timerLate is how late the node's timer for deadline fires: a real
// process's timer fires a little after its deadline (the runtime's timer
// and the scheduler's wakeup), by a different amount each time, so that
// peers started together do not tick in step for ever. In the
// simulator's early versions every node woke exactly at its deadlines:
// nodes started at the same instant kept their Raft ticks on one grid,
// and two elections timing out on the same tick were far likelier than
// between processes. The delay is a hash of the deadline (and the
// node's seed), not a draw: the same deadline, read again after every
// drain, schedules the same wakeup. A deadline already due wakes the node
// at once, as the runtime's timer set to zero does.
func (nd *simNode) timerLate(deadline time.Time) time.Duration {
	h := (uint64(deadline.UnixNano()) ^ nd.lateSeed) * 0x9e3779b97f4a7c15
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return time.Duration(h % uint64(maxTimerLate))
}

// wake is a scheduled wakeup of a node (scheduleWake), reused once it
// fired (sim.freeWake) instead of a closure per wakeup.
type wake struct {
	nd   *simNode
	gen  int
	at   time.Duration
	run  func() // w.fire, bound once
	next *wake
}

func (w *wake) fire() {
	nd, gen, at := w.nd, w.gen, w.at
	w.nd, w.next, nd.s.freeWake = nil, nd.s.freeWake, w
	if nd.gen != gen || !nd.up || !nd.wakeSet || nd.wakeAt != at {
		return // stale or superseded
	}
	nd.wakeSet = false
	if nd.paused {
		return
	}
	nd.s.st.wakeups++
	nd.n.Tick(nd.now())
	nd.queueDrain()
}

// rescheduleWake drops the scheduled wakeup and schedules one from the
// node's clock as it reads now (a skew fault changed it).
func (nd *simNode) rescheduleWake() {
	nd.wakeSet = false
	nd.scheduleWake()
}

// input runs fn as one input of incarnation gen: dropped when the node is
// down or restarted since, held while it is paused. Like the runtime, the
// node reads its clock before each input.
func (nd *simNode) input(gen int, fn func()) {
	switch {
	case !nd.up || nd.gen != gen:
		return
	case nd.paused:
		nd.held = append(nd.held, fn)
		return
	}
	nd.n.Tick(nd.now())
	fn()
	nd.queueDrain()
}

// pause stops stepping the node (SIGSTOP): ticks are skipped, messages and
// handler outcomes wait. resume delivers them, late.
func (nd *simNode) pause() bool {
	if !nd.up || nd.paused {
		return false
	}
	nd.paused = true
	return true
}

func (nd *simNode) resume() {
	if !nd.up || !nd.paused {
		return
	}
	nd.paused = false
	nd.resumedAt = nd.s.now
	held := nd.held
	nd.held = nil
	nd.n.Tick(nd.now())
	for _, fn := range held {
		fn()
		if !nd.up {
			return
		}
	}
	nd.queueDrain()
}

// receive takes a message off the network.
func (nd *simNode) receive(from int, m message) {
	if !nd.up {
		nd.s.net.dropped++
		return
	}
	if nd.paused { // held as a closure until the resume
		held := m // only then on the heap, with its envelope: the delivery's is reused
		if m.env != nil {
			env := *m.env
			held.env = &env
		}
		nd.input(nd.gen, func() { nd.take(from, &held) })
		return
	}
	nd.n.Tick(nd.now()) // input's steps, without a closure per message
	nd.take(from, &m)
	nd.queueDrain()
}

// take steps the node with a message from the network.
func (nd *simNode) take(from int, m *message) {
	switch {
	case m.env != nil:
		nd.s.step(nd, from, &m.env.Msg)
	case m.req != nil:
		nd.handleRequest(m.req)
	}
}

func (nd *simNode) handleRequest(r *request) {
	req := nd.n.NextRequest()
	nd.reqs[req] = r
	switch o := r.op; o.kind {
	case opSubmit:
		if o.spec.Mode == shard.ModeBroadcast && !o.expanded {
			nd.expand(o)
		}
		if o.expandErr != nil {
			nd.replyTo(node.Reply{Req: req, Err: o.expandErr})
			return
		}
		nd.n.Submit(req, cloneSpec(o.spec))
	case opCancel:
		nd.n.Cancel(req, o.group, o.task, "simulate")
	case opRetry:
		nd.n.Retry(req, o.group, o.task, "simulate", o.key)
	case opSchedSet:
		sp := *o.sched.plan.spec
		sp.Group.Tasks = slices.Clone(sp.Group.Tasks)
		nd.n.SetSchedule(req, &sp, "sim")
	case opSchedPause, opSchedResume:
		nd.n.PauseSchedule(req, o.sched.id, o.kind == opSchedPause, "simulate")
	case opSchedDelete:
		nd.n.DeleteSchedule(req, o.sched.id, "simulate")
	case opSchedUpdate:
		sp := *o.sched.plan.update
		sp.Group.Tasks = slices.Clone(sp.Group.Tasks)
		nd.n.UpdateSchedule(req, &sp, 0, "simulate")
	}
}

// queueDrain schedules one drain at the current instant, after the inputs
// already queued for it (the runtime's drainInbox batching).
func (nd *simNode) queueDrain() {
	if nd.drainQueued {
		return
	}
	nd.drainQueued = true
	if nd.drainFn == nil { // made once: one closure per drain was a tenth of an idle run's allocations
		nd.drainFn = func() {
			nd.drainQueued = false
			if nd.up && !nd.paused {
				nd.drain()
				nd.s.starveIdle(nd)
				nd.scheduleWake()
			}
		}
	}
	nd.s.after(0, nd.drainFn)
}

// snapshotEvery is the nodes' SnapshotEvery: small, so every run installs,
// restores and compacts snapshots, but growing with the tasks per
// partition, so a partition takes a handful of snapshots over a run rather
// than one per 200 entries (each encodes the whole partition, and big runs
// spent a quarter of their time there).
func snapshotEvery(cfg Config) uint64 {
	return max(200, uint64(cfg.Tasks/max(cfg.Partitions, 1)))
}

// vtHandler adds the virtual time ("vt") to every record of a node's log
// (Config.Log).
type vtHandler struct {
	slog.Handler
	s *sim
}

func (h vtHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.Duration("vt", h.s.now))
	return h.Handler.Handle(ctx, r)
}
func (h vtHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return vtHandler{h.Handler.WithAttrs(as), h.s}
}
