package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// The invariants (docs/design.md "Guarantees"); a Violation names one of them.
const (
	invLost     = "1-lost"       // an acknowledged group is never lost
	invOutcome  = "2-outcome"    // one accepted outcome per task; terminal never changes (but by a retry)
	invDeps     = "3-deps"       // no start before every dependency succeeded
	invIdem     = "4-idempotent" // same key: same ids, nothing created
	invReplicas = "5-replicas"   // replicas of a partition at the same applied index agree (mesh.go)
	invLiveness = "liveness"     // after faults heal, everything acknowledged finishes
	invWAL      = "wal"          // the Node's batches apply to the WAL
	invPanic    = "panic"        // the core panicked (a broken internal invariant)
	invSlots    = "slots"        // at the end, a node's busy slots are its running handlers (mesh.go)
	invWorkers  = "6-workers"    // a worker's report counts only for its own current lease (workers.go)
	invHeld     = "held"         // at the end of a settled idle run, peers hold only their partitions (held.go)
	invPartSets = "part-sets"    // a node's sets of partitions with READY tasks, with timers, mark every one (mesh.go)
)

// taskRec is what the checker knows of one task.
type taskRec struct {
	id        shard.TaskID
	g         *groupRec
	more      *taskMore // its dependencies and earlier retries; nil: none (most tasks)
	result    []byte
	at        time.Duration // when first observed terminal
	runs      int
	retries   int         // the committed retries seen (shard.Change.Retries)
	state     shard.State // terminal state first observed; 0 before
	hasResult bool
}

// taskMore is what few tasks have, behind one pointer: a million tasks
// are the checker's largest item. state and result are of the runs since
// the last retry. A retry re-arms only a FAILED or CANCELED task, so
// invariant 2 holds per retry: past keeps what each earlier one ended
// in, for replicas that report late.
type taskMore struct {
	deps []*taskRec // must be SUCCEEDED before any run
	past []outcomeRec
}

func (t *taskRec) deps() []*taskRec {
	if t.more == nil {
		return nil
	}
	return t.more.deps
}

// addDeps adds ds to t's dependencies (none: nothing is allocated).
func (t *taskRec) addDeps(ds ...*taskRec) {
	if len(ds) > 0 {
		m := t.moreOf()
		m.deps = append(m.deps, ds...)
	}
}

func (t *taskRec) moreOf() *taskMore {
	if t.more == nil {
		t.more = &taskMore{}
	}
	return t.more
}

// outcomeRec is the terminal state (and result) of a task's runs between
// two retries; state 0 when none was observed.
type outcomeRec struct {
	state     shard.State
	result    []byte
	hasResult bool
}

// groupRec is what the checker knows of one submitted group.
type groupRec struct {
	id       shard.GroupID
	spec     *shard.GroupSpec
	tasks    []*taskRec
	submitAt time.Duration
	acked    bool
	ackAt    time.Duration
	created  *response // the reply that said Created (the network may deliver it twice)
	left     int       // tasks not yet observed terminal
}

// checker holds the observations the invariants are checked against. It is
// fed by the drivers' hooks (replies, Changes, Runs, outcomes) and reads the
// nodes' state directly (restarts, samples, the final sweep).
type checker struct {
	// evBuf is the history buffer the final sweep reuses.
	evBuf       []shard.TaskEvent
	s           *sim
	groups      map[shard.GroupID]*groupRec
	order       []*groupRec // registration order
	head        int         // order[:head] are all terminal
	ntasks      int         // tasks registered (task finds them through their groups)
	terminal    []*taskRec  // observed terminal, for sampled re-reads
	outstanding int         // tasks of registered groups not yet terminal
	latencies   []time.Duration
	firstSubmit time.Duration
	lastDone    time.Duration
	accepted    int // outcomes the owner proposed
	rearmed     int // task runs re-armed by a committed retry (retried)
	stale       int // outcomes refused by fencing (or unavailable)
	dupExec     int
	doubleAcc   int
	lost        int
	steals      int // runs on a node that does not serve the task's partition
	scheds      map[shard.ScheduleID]*schedRec
	schedOrder  []*schedRec // creation order
	firings     int         // firing groups seen
	skips       int         // overlap skips seen
	ticksOK     int         // ticks checked to have fired in a healthy window

	hooked         map[shard.GroupID]int // webhook deliveries the simulated receiver accepted, by group
	hooksDelivered int                   // groups whose webhook reads delivered at the end
	leftPinned     int                   // tasks failed because their pinned peer left (unplaceable)
	constrained    int                   // placement checks of constrained tasks (starts, accepted outcomes)
	broadcasts     int                   // broadcast expansions checked
	// unseen are runs of broadcast firings no running replica had applied
	// yet when the run started (a thief's copy, its owner stopped just
	// after the commit): checked once one has (recheckRuns).
	unseen []unseenRun

	// External workers (workers.go): leases handed out, faults, and the
	// verdicts on the workers' reports; lostLeases are the leases the hubs
	// lost (a later report on one must be refused).
	workerLeases, workerDeaths, workerStalls                 int
	workerAccepted, workerRepeats, workerRefused, workerLate int
	lostLeases                                               map[leaseKey]bool
	// Runs hubs handed back unwanted (node.QueuedUnwanted), by task;
	// workerBusy counts the busy faults, unwantedDone the tasks handed
	// back that ended in a later round, unwantedElsewhere those of them
	// that ended on another peer.
	handedBack                                                  map[shard.TaskID][]unwantedRun
	workerBusy, workerUnwanted, unwantedDone, unwantedElsewhere int
	workerExpired                                               int // runs handed back past their lease's expiry (they count in handedBack too)
	// The quarantine (workerquarantine.go): tasks the poison fault made
	// kill their workers, the workers they killed, suspects handed out
	// alone, and the rounds hubs failed tasks in at the crash limit
	// (crashLimit of them; crashLimitFailed tasks checked FAILED so).
	poisoned, poisonDeaths, suspectLeases, crashLimit, crashLimitFailed int
	crashRounds                                                         map[shard.TaskID][]shard.Round
	// Workers restarted as another instance (workerrestart.go), as hubs
	// noticed them, and the leases they buried at once.
	workerRestarts, restartBuried int
	// Graceful stops (WorkerRelease) and the releases hubs took (their
	// tasks count in handedBack).
	workerStops, workerReleased int
	workerHangs                 int // hang faults started

	// unsafe tells the losses lost disks allow (lostunsafe.go); nil
	// without --unsafe-recover and --kill-count 2 or --kill-select voters.
	unsafe *unsafeLoss
}

type unseenRun struct {
	nd *simNode
	r  node.Run
	at time.Duration
}

func newChecker(s *sim) *checker {
	return &checker{s: s, groups: map[shard.GroupID]*groupRec{}, firstSubmit: -1,
		hooked: map[shard.GroupID]int{}}
}

// register records a group when the client first submits it.
func (c *checker) register(spec *shard.GroupSpec) {
	if c.groups[spec.ID] != nil {
		return
	}
	if c.firstSubmit < 0 {
		c.firstSubmit = c.s.now
	}
	g := c.newGroupRec(spec)
	c.groups[g.id] = g
	c.order = append(c.order, g)
	c.outstanding += len(g.tasks)
}

// newGroupRec builds the record of spec's group and its tasks, registered
// nowhere yet.
func (c *checker) newGroupRec(spec *shard.GroupSpec) *groupRec {
	g := &groupRec{id: spec.ID, spec: spec, submitAt: c.s.now, left: len(spec.Tasks)}
	names := map[string]*taskRec{}
	recs := make([]taskRec, len(spec.Tasks)) // one allocation: a million tasks at 1,000 peers
	g.tasks = make([]*taskRec, len(spec.Tasks))
	for i := range spec.Tasks {
		t := &recs[i]
		*t = taskRec{id: shard.TaskIDOf(spec.ID, i), g: g}
		g.tasks[i] = t
		names[spec.Tasks[i].Name] = t
	}
	c.ntasks += len(recs)
	var byStage map[int][]*taskRec // barrier stages: every task of the stage before
	if spec.Mode == shard.ModePipeline {
		byStage = map[int][]*taskRec{}
		for i, ts := range spec.Tasks {
			byStage[ts.Stage] = append(byStage[ts.Stage], g.tasks[i])
		}
	}
	for i, ts := range spec.Tasks {
		for _, d := range ts.Deps {
			g.tasks[i].addDeps(names[d])
		}
		g.tasks[i].addDeps(byStage[ts.Stage-1]...)
		if spec.Mode == shard.ModeStream && ts.Stage > 0 {
			g.tasks[i].addDeps(g.tasks[i-1]) // the item's previous stage
		}
	}
	return g
}

// task returns the registered task of id, nil when none is.
func (c *checker) task(id shard.TaskID) *taskRec {
	g, i, ok := id.Split()
	gr := c.groups[g]
	if !ok || gr == nil || i < 0 || i >= len(gr.tasks) {
		return nil
	}
	if t := gr.tasks[i]; t.id == id { // not "g.01" for "g.1"
		return t
	}
	return nil
}

// submitted checks a successful submit reply (invariant 4) and records the
// acknowledgement (invariant 1 from now on). Replies to the copies of one
// request (a retry, a duplicated request) may arrive in any order once the
// network reorders, so "created" is judged by when a node sent the reply,
// not by when it arrived: exactly one reply may say Created, it must not be
// an answer to a deliberate repeat, and no node may send it after the
// client saw an acknowledgement (by then the group exists), but for a node
// answering as it resumes from a pause.
func (c *checker) submitted(o *op, r *response) {
	g, res := c.groups[o.group], r.reply.Submit
	want := make([]shard.TaskID, len(g.tasks))
	for i, t := range g.tasks {
		want[i] = t.id
	}
	switch {
	case res.Group != o.group:
		c.s.fail(invIdem, fmt.Sprintf("submit of %s (key %q) answered group %s", o.group, o.spec.Key, res.Group))
	case !slices.Equal(res.Tasks, want):
		c.s.fail(invIdem, fmt.Sprintf("submit of %s (key %q) answered tasks %v; want %v", o.group, o.spec.Key, res.Tasks, want))
	case !res.Created || r == g.created:
		// nothing created, or the same reply, duplicated by the network
	case (g.created != nil || o.repeat || g.acked && r.sent > g.ackAt) && c.createdAgain(g, r.sent):
		g.created = r // created again: the recovery lost it (lostunsafe.go)
	case g.created != nil:
		c.s.fail(invIdem, fmt.Sprintf("group %s (key %q) created twice: by n%d at %v and by n%d at %v",
			o.group, o.spec.Key, g.created.node, g.created.sent, r.node, r.sent))
	case o.repeat:
		c.s.fail(invIdem, fmt.Sprintf("repeat of key %q created group %s again at n%d", o.spec.Key, o.group, r.node))
	case g.acked && r.sent > g.ackAt && (r.node >= len(c.s.nodes) || c.s.nodes[r.node].resumedAt != r.sent):
		// (A node resumed from a pause at r.sent answers late what it
		// applied then: the entry that created the group, committed
		// meanwhile by the others and already acknowledged to a retry.
		// The case above still holds it to one Created.)
		c.s.fail(invIdem, fmt.Sprintf("group %s (key %q) created again at n%d at %v after its acknowledgement at %v", o.group, o.spec.Key, r.node, r.sent, g.ackAt))
	}
	if res.Created && g.created == nil {
		g.created = r
	}
	if !g.acked {
		g.acked, g.ackAt = true, c.s.now
	}
}

// changes records terminal states (invariant 2: they never change).
func (c *checker) changes(nd *simNode, cs []shard.Change) {
	for _, ch := range cs {
		t := c.task(ch.Task)
		if t == nil && c.firingGroup(nd, ch.Group) || t != nil && c.refired(nd, t.g) {
			t = c.task(ch.Task)
		}
		if t == nil {
			c.s.fail(invOutcome, fmt.Sprintf("n%d reports %s %v, a task nobody submitted", nd.idx, ch.Task, ch.State))
			return
		}
		if ch.Retries > t.retries {
			if c.retried(nd, t, ch.Retries); c.s.viol != nil {
				return
			}
		}
		switch {
		case ch.Retried || !ch.State.Terminal():
		case ch.Retries < t.retries:
			c.observePast(nd, t, ch.Retries, ch.State)
		default:
			c.observe(nd, t, ch.State)
		}
		if c.s.viol != nil {
			return
		}
	}
	c.checkGates(nd, cs)
}

// retried moves t past its committed retry r: the runs before it ended
// FAILED or CANCELED (a SUCCEEDED task is never retried), or were not
// observed to end, and t is unfinished again.
func (c *checker) retried(nd *simNode, t *taskRec, r int) {
	if t.state == shard.Succeeded {
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d retries %s (retry %d), observed SUCCEEDED at %v", nd.idx, t.id, r, t.at))
		return
	}
	m := t.moreOf()
	for len(m.past) < r {
		m.past = append(m.past, outcomeRec{})
	}
	m.past[t.retries] = outcomeRec{state: t.state, result: t.result, hasResult: t.hasResult}
	if t.state != 0 {
		c.outstanding++
		if t.g.left++; t.g.left == 1 {
			c.head = 0 // liveness looks for the oldest unfinished group again
		}
	}
	t.retries, t.state, t.result, t.hasResult, t.at = r, 0, nil, false, 0
	c.rearmed++
}

// observePast checks a late report (a replica behind) of how t's runs
// before retry r ended against what was observed then.
func (c *checker) observePast(nd *simNode, t *taskRec, r int, st shard.State) {
	p := &t.more.past[r]
	switch {
	case st == shard.Succeeded:
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d: %s is SUCCEEDED before its retry %d", nd.idx, t.id, r+1))
	case p.state == 0:
		p.state = st
	case p.state != st:
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d: %s is %v before its retry %d, observed %v", nd.idx, t.id, st, r+1, p.state))
	}
}

// readServed returns task id's view on nd, ok false when nd cannot read
// it. Only a node that serves the task's group answers a read (Task's
// error otherwise): two observations in three are a follower's, and the
// error a read there built (why it does not serve, a string) was 2% of a
// mixed run's CPU.
func readServed(nd *simNode, id shard.TaskID) (v shard.TaskView, ok bool) {
	if !nd.n.Serving(id.Group()) {
		return v, false
	}
	v, err := nd.n.Task(id)
	return v, err == nil
}

// observe checks one observation of t's terminal state (and result, when
// the node can be read) against the first one.
func (c *checker) observe(nd *simNode, t *taskRec, st shard.State) {
	var res []byte
	has := false
	if v, ok := readServed(nd, t.id); ok && v.Retries == t.retries {
		// (A read after a later retry, applied in the same Ready, tells
		// nothing about this one.)
		if !v.State.Terminal() {
			c.s.fail(invOutcome, fmt.Sprintf("n%d: %s reported %v but reads %v", nd.idx, t.id, st, v.State))
			return
		}
		res, has = v.Result, true
		if t.state == 0 && (st == shard.Succeeded || st == shard.Failed) {
			if i, ok := c.holderNode(v.Holder); ok {
				c.placed(t, i, func() string { return "outcome accepted from holder " + v.Holder })
			}
		}
		if t.state == 0 && st == shard.Failed && v.Holder == "" {
			c.unplaceable(t, nd, v.Error)
		}
	}
	if t.state == 0 {
		gone := c.reobserved(t, st)
		t.state, t.result, t.hasResult, t.at = st, res, has, c.s.now
		c.terminal = append(c.terminal, t)
		if gone {
			return // of a group counted lost (lostunsafe.go): not waited for
		}
		c.outstanding--
		c.latencies = append(c.latencies, c.s.now-t.g.submitAt)
		c.lastDone = c.s.now
		if t.g.left--; t.g.left == 0 {
			c.s.cl.groupDone(t.g)
		}
		return
	}
	if t.state != st {
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d: %s is %v, observed %v at %v", nd.idx, t.id, st, t.state, t.at))
		return
	}
	c.sameResult(nd, t, res, has)
}

func (c *checker) sameResult(nd *simNode, t *taskRec, res []byte, has bool) {
	if !has {
		return
	}
	if !t.hasResult {
		t.result, t.hasResult = res, true
		return
	}
	if !bytes.Equal(t.result, res) {
		c.doubleAcc++
		c.s.fail(invOutcome, fmt.Sprintf("n%d: result of %s changed from %q to %q", nd.idx, t.id, t.result, res))
	}
}

// run checks a handler start: the task is not terminal (2) and every
// dependency SUCCEEDED (3).
func (c *checker) run(nd *simNode, r node.Run) {
	t := c.task(r.Task)
	if g, _, ok := r.Task.Split(); t == nil && ok {
		if c.firingUnseen(nd, g) {
			c.unseen = append(c.unseen, unseenRun{nd: nd, r: r, at: c.s.now})
			return
		}
		if c.firingGroup(nd, g) {
			t = c.task(r.Task)
		}
	} else if t != nil && c.refired(nd, t.g) {
		t = c.task(r.Task)
	}
	if t == nil {
		c.s.fail(invOutcome, fmt.Sprintf("n%d runs %s, a task nobody submitted", nd.idx, r.Task))
		return
	}
	t.runs++
	c.placed(t, nd.idx, func() string { return "start of round " + fmt.Sprint(r.Round) })
	// Leading, not Serving: a leader between two read leases still starts
	// only what its own partition committed, and must be held to it.
	stolen := !nd.n.Leads(nd.n.PartitionOf(t.g.id))
	c.s.starveStart(nd, stolen)
	if stolen {
		// A thief's grant can arrive after the task finished elsewhere:
		// a duplicate execution (at-least-once), refused at the owner.
		c.steals++
		if t.state != 0 {
			return
		}
	}
	if t.state != 0 {
		c.s.fail(invOutcome, fmt.Sprintf("n%d starts %s round %d, observed %v at %v", nd.idx, r.Task, r.Round, t.state, t.at))
		return
	}
	for _, d := range t.deps() {
		if d.state != shard.Succeeded {
			c.s.fail(invDeps, fmt.Sprintf("n%d starts %s round %d before its dependency %s succeeded (%v)", nd.idx, r.Task, r.Round, d.id, d.state))
			return
		}
	}
}

// reported counts what became of a handler outcome.
func (c *checker) reported(_ *simNode, _ *job, err error) {
	if err == nil {
		c.accepted++
		return
	}
	c.stale++
}

// durable checks invariant 1 after restarts: every acknowledged group is
// there on the node that serves it. It returns false while some group's
// partition has no serving node yet (checked again later).
func (c *checker) durable() bool {
	all := true
	for _, g := range c.order {
		if !g.acked {
			continue
		}
		nd := c.s.serving(g.id)
		if nd == nil {
			all = all && c.totalLost(g.id) // (nobody serves a total loss again)
			continue
		}
		if _, err := nd.n.GroupState(g.id); errors.Is(err, shard.ErrNotFound) {
			if c.lostUnsafe(g) {
				continue
			}
			c.lost += len(g.tasks)
			c.s.fail(invLost, fmt.Sprintf("group %s (%d tasks, acknowledged at %v) is gone: n%d serves its partition %d and does not know it",
				g.id, len(g.tasks), g.ackAt, nd.idx, c.s.partitionOf(g.id)))
			return true
		}
	}
	return all
}

// unserved returns the partition of the first acknowledged group that no
// node serves (and that is no total loss), for a report of why a run
// never settled.
func (c *checker) unserved() (int, bool) {
	for _, g := range c.order {
		if g.acked && c.s.serving(g.id) == nil && !c.totalLost(g.id) {
			return c.s.partitionOf(g.id), true
		}
	}
	return 0, false
}
