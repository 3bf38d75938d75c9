package shard

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned for an unknown task or group id.
var ErrNotFound = errors.New("shard: not found")

// ErrStaleRound is returned for an outcome or renewal whose round or holder
// is not the task's current lease.
var ErrStaleRound = errors.New("shard: stale round")

// ErrNotLeased is the ErrStaleRound of an outcome for the round after a
// READY task's last: a lease of that round to its holder may still apply
// (a run started before its lease committed, whose leader lost the
// partition, and whose next owner leases the task to the same holder in
// the same round). Such an outcome is kept, not refused for good: when
// that lease applies, it is the outcome of that lease's run.
var ErrNotLeased = fmt.Errorf("%w: the round's lease has not applied", ErrStaleRound)

// FieldError says which part of a submitted group is invalid. Task is the
// index of the offending task in GroupSpec.Tasks, or -1 for the group
// itself; Field names the task or group field ("deps", "name", "handler",
// "mode", "tasks", ...).
type FieldError struct {
	Task    int
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Task < 0 {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return fmt.Sprintf("tasks[%d].%s: %s", e.Task, e.Field, e.Message)
}

// TaskView is a read-only copy of a task's state, for queries.
type TaskView struct {
	ID         TaskID
	Group      GroupID
	Name       string
	Handler    string
	Payload    []byte
	Priority   int32
	State      State
	Attempt    int    // handler attempts that finished (succeeded or failed)
	Retries    int    // committed retries (Retry): State and Result are of the runs since the last
	Round      Round  // current lease round (0 = never leased)
	Holder     string // holder of the current or last lease
	Result     []byte // SUCCEEDED: the handler's result
	Error      string // the last failed attempt's error (kept while retried), or why CANCELED
	Deps       []TaskID
	CreatedAt  time.Time
	StartedAt  time.Time // last lease
	FinishedAt time.Time // terminal
	NotBefore  time.Time // WAITING: when it becomes READY
	Mode       Mode      // the group's mode
	Stage      int       // pipelines: the stage
	Item       int       // streaming pipelines: the item
	Require    []string  // labels a peer must carry to run it
	Pin        string    // the only peer that may run it
	// Waiting says why a READY task no live peer may run waits (its pin
	// or labels); set by the peer from its membership view, "" in shard.
	Waiting string
	// Deaths are the external workers that died running it since its
	// last outcome (Shard.Deaths).
	Deaths Deaths `json:",omitzero"`
}

// TaskEvent is one entry of a task's history.
type TaskEvent struct {
	Seq    int // 1-based within the task
	Type   EventType
	At     time.Time
	Round  Round
	Holder string
	Error  string
	By     string
}

// GroupState is the summary state of a group.
type GroupState uint8

const (
	GroupRunning GroupState = iota + 1
	GroupSucceeded
	GroupFailed
	GroupCanceled
)

var groupStateNames = [...]string{"", "RUNNING", "SUCCEEDED", "FAILED", "CANCELED"}

func (s GroupState) String() string {
	if int(s) < len(groupStateNames) && s != 0 {
		return groupStateNames[s]
	}
	return fmt.Sprintf("GroupState(%d)", uint8(s))
}

// Terminal reports whether the group will not change again.
func (s GroupState) Terminal() bool { return s != GroupRunning }

// GroupView is a read-only copy of a group's state, for queries.
type GroupView struct {
	ID          GroupID
	Mode        Mode
	Key         string
	Trace       string
	State       GroupState
	Counts      map[State]int
	Total       int        // tasks in the group
	Tasks       []TaskView // in submission order; nil in a summary
	CreatedAt   time.Time
	FinishedAt  time.Time
	Stages      []StageSpec   // streaming pipelines
	StageDone   []int         // streaming pipelines: items that left each stage successfully
	Items       int           // streaming pipelines: items submitted
	Skipped     []SkippedItem // streaming pipelines: items that left the pipeline early
	Notify      *NotifyView   // nil when the group has no webhook
	Concurrency int           // tasks in flight at once; 0 = unbounded (GroupSpec.Concurrency)
}

// SkippedItem is an item of a streaming pipeline that failed a stage after
// its retries: its later stages are canceled, the other items flow on.
type SkippedItem struct {
	Item   int
	Stage  string // the stage it failed
	Task   TaskID
	Reason string
}

// NotifyView is the delivery state of a group's webhook.
type NotifyView struct {
	URL       string
	State     string // "waiting" (group running), "pending", "delivered", "failed"
	Attempts  int
	LastError string
	Next      time.Time // pending: earliest next attempt
}

// Inputs returns the results of task id's dependencies, keyed by each
// dependency's name (its task id when it has none): in a dag the tasks
// named in its deps, in a pipeline every task of the previous stage. Only
// dependencies that SUCCEEDED are included, so for a task that is READY or
// RUNNING (all its dependencies succeeded) every one is there. It returns
// nil for an unknown task or one without dependencies. The results are
// shared with the state: callers must not modify them.
func (s *Shard) Inputs(id TaskID) map[string][]byte {
	t, err := s.lookup(id)
	if err != nil || len(t.deps()) == 0 || t.g.spec.Mode == ModeStream {
		return nil // a streaming stage gets its input as its payload
	}
	deps := t.deps()
	out := make(map[string][]byte, len(deps))
	for _, d := range deps {
		dt := t.g.tasks[d]
		if dt.state != Succeeded {
			continue
		}
		name := dt.name
		if name == "" {
			name = string(dt.id())
		}
		out[name] = dt.result
	}
	return out
}

// Attempts returns how many handler attempts of task id finished
// (succeeded or failed); 0 for an unknown task. A lease lost before its
// handler reported does not count: its task runs again with the same
// attempt number in a later round.
func (s *Shard) Attempts(id TaskID) int {
	t, err := s.lookup(id)
	if err != nil {
		return 0
	}
	return int(t.attempt)
}

// Payload returns what task id's handler receives as its payload: its own,
// or, for a later stage of a streaming pipeline, the result of the item's
// previous stage (the output of stage s is the input of stage s+1). The
// bytes are shared with the state: callers must not modify them.
func (s *Shard) Payload(id TaskID) []byte {
	t, err := s.lookup(id)
	if err != nil {
		return nil
	}
	if t.g.spec.Mode == ModeStream && int(t.stage) > 0 {
		return t.g.tasks[t.idx-1].result
	}
	return t.payload
}

// Created returns when task id's group was created (the task's
// CreatedAt); the zero time for an unknown task.
func (s *Shard) Created(id TaskID) time.Time {
	t, err := s.lookup(id)
	if err != nil {
		return time.Time{}
	}
	return t.g.created
}

// Trace returns the trace of task id's group (GroupSpec.Trace), "" when
// the task is unknown.
func (s *Shard) Trace(id TaskID) string {
	t, err := s.lookup(id)
	if err != nil {
		return ""
	}
	return t.g.spec.Trace
}

// BroadcastShard returns, for a copy of a broadcast group, its index among
// the copies (0-based) and their number; 0, 0 for any other task.
func (s *Shard) BroadcastShard(id TaskID) (i, n int) {
	gid, i, ok := id.Split()
	if !ok {
		return 0, 0
	}
	g := s.groups[gid]
	if g == nil || g.spec.Mode != ModeBroadcast || i >= len(g.tasks) {
		return 0, 0
	}
	return i, len(g.tasks)
}

// BroadcastWorker returns, for a copy of a broadcast to external workers,
// the id of the worker it is pinned to (at the peer of its Pin); "" for
// any other task. A broadcast's copy is named by what runs it: its peer
// (the name is the pin) or one worker polling that peer (the name is the
// worker's id). The worker is thus carried by the name the group already
// stores, and the log and snapshot layouts do not change.
func (s *Shard) BroadcastWorker(id TaskID) string {
	gid, i, ok := id.Split()
	if !ok {
		return ""
	}
	g := s.groups[gid]
	if g == nil || g.spec.Mode != ModeBroadcast || i >= len(g.tasks) {
		return ""
	}
	ts := g.tasks[i].spec()
	return BroadcastWorker(&ts)
}

// BroadcastWorker returns the worker a broadcast's copy ts is pinned to, ""
// for a peer's copy (see Shard.BroadcastWorker). ts must be a broadcast's:
// another group's tasks have names of their own.
func BroadcastWorker(ts *TaskSpec) string {
	if ts.Pin == "" || ts.Name == "" || ts.Name == ts.Pin {
		return ""
	}
	return ts.Name
}

// Deaths returns the external workers that died running task id since
// its last outcome (Event.Died): the runtime hands a task they keep dying
// with to a worker alone, and fails it at a limit of lone deaths.
func (s *Shard) Deaths(id TaskID) Deaths {
	t, err := s.lookup(id)
	if err != nil {
		return Deaths{}
	}
	return DeathsOf(t.crash)
}

// RunInfo is what an external worker is told of a task beside its spec
// and payload (the node's Run and Grant carry it): the fields of GET
// /v1/tasks/{id} a poll's answer would otherwise show wrong.
type RunInfo struct {
	Priority int32
	// MaxAttempts is the attempts in all its retry policy allows (at
	// least 1), counted from the first attempt: after a retry by hand,
	// the attempts before it plus the policy's fresh budget.
	MaxAttempts int
	// Error is the task's error as GET /v1/tasks/{id} shows it: the last
	// failed attempt's, kept while it runs again; "" before any.
	Error string
	// Stage and Item are 1-based: the pipeline stage (0 outside a
	// pipeline) and the streaming pipeline's item (0 outside one).
	Stage, Item int
}

// RunInfo returns task id's RunInfo; the zero RunInfo for an unknown task.
func (s *Shard) RunInfo(id TaskID) RunInfo {
	t, err := s.lookup(id)
	if err != nil {
		return RunInfo{}
	}
	ri := RunInfoOf(t.g.spec.Mode, t.pol, t.err)
	// A retry by hand gives a fresh budget counted from it (Fail): the
	// attempts in all are those before the retry and the policy's.
	ri.MaxAttempts += int(t.retried)
	// Its stage and item are its own, not its shared policy's.
	if ri.Stage > 0 {
		ri.Stage = int(t.stage) + 1
	}
	if ri.Item > 0 {
		ri.Item = int(t.item) + 1
	}
	return ri
}

// RunInfoOf is the RunInfo of a task of a group in mode, of spec ts (its
// Stage and Item are ts's), whose error is err.
func RunInfoOf(mode Mode, ts *TaskSpec, err string) RunInfo {
	ri := RunInfo{Priority: ts.Priority, MaxAttempts: max(ts.Retry.MaxAttempts, 1), Error: err}
	switch mode {
	case ModePipeline:
		ri.Stage = ts.Stage + 1
	case ModeStream:
		ri.Stage, ri.Item = ts.Stage+1, ts.Item+1
	}
	return ri
}
