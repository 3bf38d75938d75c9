package shard

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Config configures a Shard.
type Config struct {
	// Retention is how long a finished group is kept before the owner
	// proposes its removal. Default 7 days.
	Retention time.Duration
	// LeaseGrace is added to a task's timeout to get its lease expiry: the
	// holder cancels the handler at the timeout, so the outcome arrives well
	// before. Default 10 s.
	LeaseGrace time.Duration
	// DefaultTimeout is the per-attempt timeout of tasks that set none.
	// Default 10 min.
	DefaultTimeout time.Duration
	// Rand draws retry jitter. Required: seeded by the caller so that the
	// simulator is deterministic.
	Rand *rand.Rand
	// RemoveBatch bounds the groups removed by one Due call. Default 1,000.
	RemoveBatch int
	// Next computes a schedule's next fire time (cron parsing, time
	// zones). Called only by the owner when proposing; nil refuses
	// schedules (ErrNoNext).
	Next NextFunc
	// Expand turns a scheduled broadcast's template into one pinned copy
	// per matching live peer when it fires (the owner's membership view;
	// the copies travel in the firing's entry, so replicas agree), or per
	// live external worker of its handler for a template named
	// WorkersTemplate (the workers the owner's view lists). Called
	// only by the owner when proposing; nil, or an error (no peer
	// matches), skips the firing.
	Expand func(*GroupSpec) error
	// Admit reports whether the owner takes new work now: false (its
	// disk or memory short, as the runtime found) skips the firings of
	// schedules that come due, as a firing that creates nothing. Called
	// only by the owner when proposing; nil takes work.
	Admit func() bool
	// External reports whether a handler runs in external workers (processes
	// that poll a peer over HTTP) rather than in the peers themselves. Its
	// READY tasks wait for a placement that serves the handler
	// (Placement.Handlers): never the owner's own slots, never a thief's.
	// Only the owner's lease choice reads it (the ready queue is leader-local
	// state), so it may differ between peers. nil: no handler is external.
	External func(handler string) bool
	// OnReady, when set, is called when the READY queue becomes non-empty
	// (true) or empty (false), a snapshot's restore included: the Node
	// keeps the set of partitions with READY work from it, so that what
	// it does per input walks those, not every partition it holds.
	OnReady func(nonEmpty bool)
	// OnDue, when set, is called when the owner may have something to do
	// at a time where it had nothing: NextDue may have become due (a
	// timer armed, the finished groups or their removals changed, the
	// leadership switched on), or a webhook waits (NotifyPending; a group
	// finishing, a restore). The Node keeps the set of partitions whose
	// timers and webhooks it must read from it.
	OnDue func()
}

// DefaultConfig returns a Config with the defaults above and a fixed seed.
func DefaultConfig() Config {
	return Config{
		Retention:      7 * 24 * time.Hour,
		LeaseGrace:     10 * time.Second,
		DefaultTimeout: 10 * time.Minute,
		Rand:           rand.New(rand.NewPCG(1, 2)),
		RemoveBatch:    1000,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Retention < 0:
		return errors.New("shard: config Retention must be >= 0")
	case c.LeaseGrace <= 0:
		return errors.New("shard: config LeaseGrace must be > 0")
	case c.DefaultTimeout <= 0:
		return errors.New("shard: config DefaultTimeout must be > 0")
	case c.Rand == nil:
		return errors.New("shard: config Rand is required")
	case c.RemoveBatch <= 0:
		return errors.New("shard: config RemoveBatch must be > 0")
	}
	return nil
}

// task is the state of one task. Fields other than the heap index change
// only in apply. A peer under W1 holds millions of tasks, most of them
// finished: the pointers come first (the collector scans a task only up
// to its last pointer) and the small counters are 32 bits (a group holds
// at most MaxTasksPerGroup tasks; attempts count one by one).
type task struct {
	ref *taskRef // what its timers hold, made by refOf; nil: no timer yet
	g   *group
	// pol is its spec but for what is its own (Name, Payload, Deps, Stage
	// and Item: below, and its links), shared with the group's other
	// tasks of the same options (see specs.go).
	pol     *TaskSpec
	links   *taskLinks // its dependency edges (and Deps); nil: none (most tasks)
	cls     *class     // its placement class while queued; nil = unconstrained
	name    string
	payload []byte
	holder  string
	err     string
	result  []byte
	// Its times are stamps (8 bytes, no pointer, where a time.Time takes
	// 24 and holds one for the collector to scan). Its creation time is
	// its group's.
	history   []taskEvent
	round     Round
	expiry    stamp
	notBefore stamp
	started   stamp
	finished  stamp
	readyAt   stamp  // when it last became READY (a metric only: not in snapshots)
	seq       uint64 // FIFO order in the ready queue
	idx       int32
	attempt   int32
	depsLeft  int32 // dependencies not yet SUCCEEDED
	retried   int32 // attempt when last retried by hand: the retry budget counts from it
	heapIdx   int32 // position in the ready queue, -1 when not queued
	stage     int32 // TaskSpec.Stage (ValidateStored bounds it)
	item      int32 // TaskSpec.Item
	state     State
	plain     bool // its history is the plain one, not kept (see history.go)
	// crash is the Deaths.Mark of the external workers that died running
	// it since its last outcome (Event.Died).
	crash uint8
}

// taskLinks are a task's dependency edges within its group: the indexes
// of its dependencies and of the tasks that depend on it. Behind a
// pointer, as few tasks have any: 8 bytes a task where two slices took 48.
type taskLinks struct {
	deps, dependents []int
	names            []string // TaskSpec.Deps
}

func (t *task) deps() []int {
	if t.links == nil {
		return nil
	}
	return t.links.deps
}

func (t *task) dependents() []int {
	if t.links == nil {
		return nil
	}
	return t.links.dependents
}

// linked returns t's links, made on first use.
func (t *task) linked() *taskLinks {
	if t.links == nil {
		t.links = &taskLinks{}
	}
	return t.links
}

// group is the state of one group.
type group struct {
	id       GroupID
	spec     groupHead
	tasks    []*task
	counts   [numStates]int
	state    GroupState
	created  time.Time
	finished time.Time

	// Gates (gate.go): per gate, the tasks in flight (READY, RUNNING or
	// WAITING) and the tasks whose dependencies are done but that wait for
	// room (a min-heap of task indexes: the lowest goes first, so the
	// order is a function of the state). Nil in a group without gates.
	gateLive []int
	held     []intHeap

	notify notifyState
	// retryKeys are the idempotency keys of the retries applied to the
	// group or its tasks, oldest first (at most maxRetryKeys).
	retryKeys []string
}

// notifyState is the delivery state of a group's webhook.
type notifyState struct {
	attempts  int
	delivered bool
	gaveUp    bool
	err       string
	next      time.Time // earliest next attempt
}

// Change reports a task that reached a terminal state during Apply, that
// must stop running (canceled while RUNNING: Abort), or that a retry made
// runnable again (Retried: State is then PENDING or READY).
type Change struct {
	Task      TaskID
	Group     GroupID
	State     State
	Abort     bool   // the task was RUNNING under Holder and is now canceled
	Holder    string // the holder of the aborted lease
	GroupDone bool   // the group reached a terminal state with this change
	Retried   bool   // a committed retry re-armed the task (not terminal)
	// Retries is how many committed retries the task had when it changed:
	// a terminal state holds until the next retry, so an observer tells
	// the outcomes of one task's runs apart by it.
	Retries int
}

// Shard is the state of the groups of one partition: a deterministic fold of
// committed events (Apply), plus the owner's leader-local view (ready
// leases in flight, timers) used to propose new events. It does no IO,
// starts no goroutines and reads no clock: time comes in as an argument.
type Shard struct {
	cfg    Config
	groups map[GroupID]*group
	// lastID and lastTask are the task lookup last found: half the
	// lookups of a simulated run ask for the task just asked for (an
	// event applied, then read back), and each parses the id and looks up
	// its group. Cleared wherever groups gains, loses or replaces a
	// group (a group's tasks are made with it and never replaced).
	lastID   TaskID
	lastTask *task
	ready    readySet
	seq      uint64
	done     []GroupID // finished groups in finish order, for retention
	doneHead int
	// removeAt caches when the next retention removal can be due (the
	// first waiting group's finish plus Retention); zero: look again.
	// Reset whenever done changes. Due runs every timer slot on every
	// partition a peer leads, and an idle one need not look at a group.
	removeAt time.Time
	// remNext and remOK cache nextRemoval's answer while remKnown
	// (NextDue asks once per loop iteration on every partition a peer
	// leads); it is forgotten with removeAt, and when a group is added
	// or its removal goes in flight.
	remNext  time.Time
	remOK    bool
	remKnown bool
	changes  []Change
	evTask   TaskID // the task the event being applied names (setState's changes share it)
	// counts is the tasks of every group by state: the sum of the groups'
	// counts, kept with them (setState, addGroup, removal, install) so
	// that Counts, asked every second for metrics, walks no group.
	counts   [numStates]int
	applied  uint64       // events applied (for stats)
	rejected uint64       // events refused as malformed by Apply (for stats; see Rejected)
	audit    []AuditEntry // operator actions, oldest first (bounded)
	index    index        // the groups by creation, for listing (derived)

	schedules map[ScheduleID]*schedule
	firedOK   GroupID // the firing group the previous applied event allowed

	// Leader-local state, valid while leader is true.
	leader   bool
	wheel    *wheel
	inflight map[TaskID]struct{} // leases proposed, not yet applied
	fired    []timer             // scratch
	// schedInflight holds, per schedule, the tick whose firing was
	// proposed and has not applied yet.
	schedInflight map[ScheduleID]time.Time

	// notifyPending lists terminal groups whose webhook is not delivered
	// and not given up, in the order they finished (replicated state, so
	// that a new owner picks them up). notifyInflight is leader-local:
	// deliveries handed out by NotifyDue whose outcome has not applied.
	notifyPending  []GroupID
	notifyInflight map[GroupID]struct{}
	// removing holds the groups whose retention removal was proposed and
	// has not applied (leader-local).
	removing map[GroupID]struct{}

	// holders interns the holders of its tasks' leases (holderOf; not
	// state).
	holders holderSet
	// expiryNote is recordExpired's last note, shared by the tasks of one
	// holder's expiry (not state).
	expiryNote *expiryNote
	// snapSize is the length of the last Snapshot, the next one's first
	// guess at its buffer (not state).
	snapSize int
}

// New returns an empty Shard.
func New(cfg Config) (*Shard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Shard{cfg: cfg, groups: make(map[GroupID]*group), schedules: make(map[ScheduleID]*schedule)}
	s.ready.external, s.ready.onReady = cfg.External, cfg.OnReady
	return s, nil
}

// Len returns the number of groups held.
func (s *Shard) Len() int { return len(s.groups) }

// ReadyLen returns the number of READY tasks.
func (s *Shard) ReadyLen() int { return s.ready.Len() }

// HasGroup reports whether group id exists.
func (s *Shard) HasGroup(id GroupID) bool { _, ok := s.groups[id]; return ok }

// TakeChanges returns the changes recorded by Apply since the last call.
func (s *Shard) TakeChanges() []Change { return s.AppendChanges(nil) }

// AppendChanges is TakeChanges appending the changes to dst; the shard
// keeps its buffer for the next ones.
func (s *Shard) AppendChanges(dst []Change) []Change {
	dst = append(dst, s.changes...)
	clear(s.changes)
	s.changes = s.changes[:0]
	return dst
}

func (s *Shard) lookup(id TaskID) (*task, error) {
	if s.lastTask != nil && id == s.lastID {
		return s.lastTask, nil
	}
	gid, i, ok := id.Split()
	if !ok {
		return nil, ErrNotFound
	}
	g := s.groups[gid]
	if g == nil || i >= len(g.tasks) {
		return nil, ErrNotFound
	}
	s.lastID, s.lastTask = id, g.tasks[i]
	return g.tasks[i], nil
}

// forgetLookup clears lookup's last answer: groups changed.
func (s *Shard) forgetLookup() { s.lastID, s.lastTask = "", nil }

// Task returns a view of task id.
func (s *Shard) Task(id TaskID) (TaskView, error) {
	t, err := s.lookup(id)
	if err != nil {
		return TaskView{}, err
	}
	return t.viewAs(t.idOr(id), nil), nil
}

// TaskEvents returns the history of task id.
func (s *Shard) TaskEvents(id TaskID) ([]TaskEvent, error) {
	t, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	return appendEvents(make([]TaskEvent, 0, t.histLen()), t), nil
}

// AppendTaskEvents appends the history of task id to dst (TaskEvents into
// a buffer the caller reuses).
func (s *Shard) AppendTaskEvents(dst []TaskEvent, id TaskID) ([]TaskEvent, error) {
	t, err := s.lookup(id)
	if err != nil {
		return dst, err
	}
	return appendEvents(dst, t), nil
}

func appendEvents(dst []TaskEvent, t *task) []TaskEvent {
	for i := range t.histLen() {
		h := t.event(i)
		dst = append(dst, h.view(i+1))
	}
	return dst
}

// Group returns a view of group id with every task.
func (s *Shard) Group(id GroupID) (GroupView, error) { return s.groupView(id, true) }

// GroupSummary returns a view of group id without its tasks (Tasks and
// Names nil): what a progress poll needs, without a copy of every task.
func (s *Shard) GroupSummary(id GroupID) (GroupView, error) { return s.groupView(id, false) }

func (s *Shard) groupView(id GroupID, withTasks bool) (GroupView, error) {
	g := s.groups[id]
	if g == nil {
		return GroupView{}, ErrNotFound
	}
	v := GroupView{
		ID: g.id, Mode: g.spec.Mode, Key: g.spec.Key, Trace: g.spec.Trace, State: g.state,
		Counts: make(map[State]int), Total: len(g.tasks),
		CreatedAt: g.created, FinishedAt: g.finished,
		Stages: g.spec.Stages, Notify: g.notifyView(), Concurrency: g.spec.Concurrency,
	}
	for st, n := range g.counts {
		if n > 0 {
			v.Counts[State(st)] = n
		}
	}
	var ids []TaskID
	if withTasks {
		v.Tasks = make([]TaskView, len(g.tasks))
		ids = g.taskIDs()
	}
	if g.spec.Mode == ModeStream {
		v.Items = len(g.tasks) / len(g.spec.Stages)
		v.StageDone = make([]int, len(g.spec.Stages))
	}
	for i, t := range g.tasks {
		if withTasks {
			v.Tasks[i] = t.viewAs(ids[i], ids)
		}
		if g.spec.Mode != ModeStream {
			continue
		}
		switch t.state {
		case Succeeded:
			v.StageDone[int(t.stage)]++
		case Failed:
			v.Skipped = append(v.Skipped, SkippedItem{Item: int(t.item), Stage: g.spec.Stages[int(t.stage)].Name, Task: t.id(), Reason: t.err})
		}
	}
	return v, nil
}

// GroupTasks returns the task ids of group id in submission order.
func (s *Shard) GroupTasks(id GroupID) ([]TaskID, error) {
	g := s.groups[id]
	if g == nil {
		return nil, ErrNotFound
	}
	return g.taskIDs(), nil
}

// taskIDs returns the ids of g's tasks, in one string: a group's ids are
// asked for together, and one allocation holds them where n did (a kept
// id keeps its group's others, a few bytes each).
func (g *group) taskIDs() []TaskID {
	return g.idsOf(len(g.tasks), func(i int) int { return i })
}

// idsOf returns the ids of n of g's tasks, the i-th of index(i), in one
// string as taskIDs does.
func (g *group) idsOf(n int, index func(i int) int) []TaskID {
	ids := make([]TaskID, n)
	idLen := func(i int) int {
		var num [20]byte
		return len(g.id) + 1 + len(strconv.AppendInt(num[:0], int64(index(i)), 10))
	}
	size := 0
	for i := range ids {
		size += idLen(i)
	}
	var b strings.Builder
	b.Grow(size)
	for i := range ids {
		var num [20]byte
		b.WriteString(string(g.id))
		b.WriteByte('.')
		b.Write(strconv.AppendInt(num[:0], int64(index(i)), 10))
	}
	all, at := b.String(), 0
	for i := range ids {
		n := idLen(i)
		ids[i] = TaskID(all[at : at+n])
		at += n
	}
	return ids
}

// GroupState returns the summary state of group id.
func (s *Shard) GroupState(id GroupID) (GroupState, error) {
	g := s.groups[id]
	if g == nil {
		return 0, ErrNotFound
	}
	return g.state, nil
}

// Counts adds the number of tasks in each state to into (indexed by State).
func (s *Shard) Counts(into []int) {
	for st, n := range s.counts {
		if st < len(into) {
			into[st] += n
		}
	}
}

func (t *task) view() TaskView { return t.viewAs(t.id(), nil) }

// viewAs is view for a caller that has t's id at hand, and its group's
// (taskIDs) or nil.
func (t *task) viewAs(id TaskID, ids []TaskID) TaskView {
	v := TaskView{
		ID: id, Group: t.g.id, Name: t.name, Handler: t.pol.Handler,
		Payload: t.payload, Priority: t.pol.Priority, State: t.state,
		Mode: t.g.spec.Mode, Stage: int(t.stage), Item: int(t.item), Require: t.pol.Require, Pin: t.pol.Pin,
		Attempt: int(t.attempt), Round: t.round, Holder: t.holder, Result: t.result,
		Error: t.err, CreatedAt: t.g.created, StartedAt: t.started.time(),
		FinishedAt: t.finished.time(), NotBefore: t.notBefore.time(), Retries: t.retries(),
		Deaths: DeathsOf(t.crash),
	}
	if deps := t.deps(); len(deps) > 0 && ids == nil {
		v.Deps = t.g.idsOf(len(deps), func(i int) int { return deps[i] })
	} else if len(deps) > 0 {
		v.Deps = make([]TaskID, len(deps))
		for i, d := range deps {
			v.Deps[i] = ids[d]
		}
	}
	return v
}

// Head returns the priority and queue order of the first READY task.
func (s *Shard) Head() (prio int32, seq uint64, ok bool) {
	t := s.ready.Peek()
	if t == nil {
		return 0, 0, false
	}
	return t.pol.Priority, t.seq, true
}

// StateOf returns task id's state as applied, and whether the task exists.
func (s *Shard) StateOf(id TaskID) (State, bool) {
	t, err := s.lookup(id)
	if err != nil {
		return 0, false
	}
	return t.state, true
}

// Finished reports whether task id is in a terminal state (SUCCEEDED,
// FAILED, CANCELED) as applied, and the round it reached it in.
func (s *Shard) Finished(id TaskID) (Round, bool) {
	t, err := s.lookup(id)
	if err != nil || !t.state.Terminal() {
		return 0, false
	}
	return t.round, true
}

// RunOf returns the spec of a task (a copy) when it is RUNNING under
// exactly this round and holder.
func (s *Shard) RunOf(id TaskID, r Round, holder string) (TaskSpec, bool) {
	t := s.running(id, r, holder)
	if t == nil {
		return TaskSpec{}, false
	}
	return t.spec(), true
}

// Runs reports whether a task is RUNNING under exactly this round and
// holder (RunOf without the spec).
func (s *Shard) Runs(id TaskID, r Round, holder string) bool {
	return s.running(id, r, holder) != nil
}

// running returns the task when it is RUNNING under exactly this round
// and holder, else nil.
func (s *Shard) running(id TaskID, r Round, holder string) *task {
	t, err := s.lookup(id)
	if err != nil || t.state != Running || t.round != r || t.holder != holder {
		return nil
	}
	return t
}

// LeasedSpec returns the spec of a task (a copy) the leader leased and whose lease
// has not applied: one LeaseFor returned, still held back from the ready
// queue (the node defers its own leases; see node's defer.go).
func (s *Shard) LeasedSpec(id TaskID) (*TaskSpec, bool) {
	t, err := s.lookup(id)
	if err != nil || t.state != Ready {
		return nil, false
	}
	if _, ok := s.inflight[id]; !ok {
		return nil, false
	}
	ts := t.spec()
	return &ts, true
}

// Waited returns how long a RUNNING task waited READY before its current
// lease, when known (not across a snapshot restore).
func (s *Shard) Waited(id TaskID) (time.Duration, bool) {
	t, err := s.lookup(id)
	if err != nil || t.state != Running || t.readyAt == 0 || t.started.time().Before(t.readyAt.time()) {
		return 0, false
	}
	return t.started.time().Sub(t.readyAt.time()), true
}

// Rejected returns how many applied events were refused because their spec
// could not be held (see GroupSpec.ValidateStored): a leader proposed what
// it should not have. They changed nothing, on every replica alike.
func (s *Shard) Rejected() uint64 { return s.rejected }

// refOf returns t's taskRef, making it on first use: its group's tasks
// get theirs together, in one allocation, as nearly every task is leased
// and its lease arms a timer.
func (t *task) refOf() *taskRef {
	if t.ref == nil {
		refs := make([]taskRef, len(t.g.tasks))
		for i, u := range t.g.tasks {
			if u.ref == nil {
				refs[i].t, u.ref = u, &refs[i]
			}
		}
	}
	return t.ref
}

// id returns t's id. It is not kept: made from the group's id and the
// task's index when asked, it costs a task no string of its own (a peer
// under W1 holds millions of tasks, most of them finished and never asked).
func (t *task) id() TaskID { return TaskIDOf(t.g.id, int(t.idx)) }

// idOr returns id when it is t's id, and t's id made anew otherwise: the
// id an event or a request names, shared rather than made again.
func (t *task) idOr(id TaskID) TaskID {
	g, s := string(t.g.id), string(id)
	if len(s) > len(g)+1 && s[:len(g)] == g && s[len(g)] == '.' {
		var buf [20]byte
		if s[len(g)+1:] == string(strconv.AppendInt(buf[:0], int64(t.idx), 10)) {
			return id
		}
	}
	return t.id()
}
