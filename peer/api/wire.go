package api

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// RetryPolicy is the "retry" object of a task. Zero fields take the
// defaults described in the package documentation.
type RetryPolicy struct {
	MaxAttempts int    `json:"max_attempts,omitempty"` // attempts in all, >= 1
	Backoff     string `json:"backoff,omitempty"`      // Go duration: delay before the first retry
	MaxBackoff  string `json:"max_backoff,omitempty"`  // Go duration: cap of the exponential delay
}

// TaskFields are the fields every submitted task has, in POST /v1/tasks and
// in each task of POST /v1/groups. Only Handler is required.
type TaskFields struct {
	Handler  string          `json:"handler"`            // registered handler name
	Payload  json.RawMessage `json:"payload,omitempty"`  // any JSON; absent = null
	Priority int32           `json:"priority,omitempty"` // higher runs first
	Timeout  string          `json:"timeout,omitempty"`  // Go duration per attempt; "" = peer default
	Retry    *RetryPolicy    `json:"retry,omitempty"`    // nil = no retry
	Delay    string          `json:"delay,omitempty"`    // Go duration: not before submission + delay
	Require  []string        `json:"require,omitempty"`  // "key=value" labels a peer must carry to run it
	Pin      string          `json:"pin,omitempty"`      // the only peer id that may run it
}

// SubmitTaskRequest is the body of POST /v1/tasks.
type SubmitTaskRequest struct {
	TaskFields
	Key   string `json:"key,omitempty"`   // idempotency key
	Trace string `json:"trace,omitempty"` // trace id, optional (extension)
	// Notify is a webhook URL called once the task is terminal (on the
	// peer's notify allow-list).
	Notify string `json:"notify,omitempty"`
}

// GroupTask is one task of a group body.
type GroupTask struct {
	Name string `json:"name,omitempty"` // unique within the group; required in dag mode
	TaskFields
	Deps []string `json:"deps,omitempty"` // names of tasks of the same group (dag mode only)
}

// SubmitGroupRequest is the body of POST /v1/groups. Modes dag and parallel
// use Tasks; mode pipeline uses Stages instead.
type SubmitGroupRequest struct {
	Mode   string        `json:"mode"`             // "dag", "parallel" or "pipeline"
	Key    string        `json:"key,omitempty"`    // idempotency key
	Trace  string        `json:"trace,omitempty"`  // trace id, optional (extension)
	Tasks  []GroupTask   `json:"tasks,omitempty"`  // dag, parallel
	Stages [][]GroupTask `json:"stages,omitempty"` // pipeline: stage i+1 starts when stage i succeeded
	Notify string        `json:"notify,omitempty"` // webhook URL called once the group is terminal
	// Concurrency bounds the group's tasks in flight (READY, RUNNING or
	// WAITING) at once; the others wait PENDING, lowest index first.
	// 0 = unbounded.
	Concurrency int `json:"concurrency,omitempty"`
}

// PipelineStage is one stage of a streaming pipeline body: a task template
// (its payload is the item, or the previous stage's result) plus the number
// of items it runs at once (0 = unbounded).
type PipelineStage struct {
	Name        string       `json:"name"`
	Handler     string       `json:"handler"`
	Priority    int32        `json:"priority,omitempty"`
	Timeout     string       `json:"timeout,omitempty"`
	Retry       *RetryPolicy `json:"retry,omitempty"`
	Concurrency int          `json:"concurrency,omitempty"`
}

// SubmitPipelineRequest is the body of POST /v1/groups for a streaming
// pipeline: item i enters stage s as soon as it left stage s-1.
type SubmitPipelineRequest struct {
	Mode   string            `json:"mode"` // "pipeline"
	Key    string            `json:"key,omitempty"`
	Trace  string            `json:"trace,omitempty"`
	Stages []PipelineStage   `json:"stages"`
	Items  []json.RawMessage `json:"items"`
	Notify string            `json:"notify,omitempty"` // webhook URL called once the group is terminal
}

// SubmitTaskResponse is the body of a successful POST /v1/tasks.
type SubmitTaskResponse struct {
	ID    string `json:"id"`    // the task id
	Group string `json:"group"` // its group of one
	// Task is, with ?wait=, the task once terminal (or when wait passed),
	// as GET /v1/tasks/{id} shows it.
	Task *Task `json:"task,omitempty"`
	// Created is false when the request repeated an earlier key (HTTP 200
	// instead of 201). It is not part of the body.
	Created bool `json:"-"`
}

// SubmitGroupResponse is the body of a successful POST /v1/groups.
type SubmitGroupResponse struct {
	Group string            `json:"group"` // the group id
	Tasks map[string]string `json:"tasks"` // task name -> task id
	// Created is false when the request repeated an earlier key (HTTP 200
	// instead of 201). It is not part of the body.
	Created bool `json:"-"`
}

// Task is a task as GET /v1/tasks/{id} returns it. Times are RFC 3339 with
// nanoseconds, null when not (yet) reached.
type Task struct {
	ID         string          `json:"id"`
	Group      string          `json:"group"`
	Name       string          `json:"name,omitempty"`
	Handler    string          `json:"handler"`
	State      string          `json:"state"` // PENDING READY RUNNING WAITING SUCCEEDED FAILED CANCELED
	Priority   int32           `json:"priority"`
	Attempt    int             `json:"attempt"`           // handler attempts that finished
	Round      uint64          `json:"round"`             // current lease round, 0 = never leased
	Retries    int             `json:"retries,omitempty"` // committed retries (POST .../retry); state and result are of the runs since the last
	Peer       string          `json:"peer"`              // holder of the current or last lease
	Result     json.RawMessage `json:"result"`            // SUCCEEDED: the handler's result, else null
	Error      *string         `json:"error"`             // the last failed attempt's error (kept while retried) or why CANCELED, else null
	Deps       []string        `json:"deps,omitempty"`
	CreatedAt  *time.Time      `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	NotBefore  *time.Time      `json:"not_before,omitempty"` // WAITING: when it becomes READY
	Stage      *int            `json:"stage,omitempty"`      // pipelines: the stage
	Item       *int            `json:"item,omitempty"`       // streaming pipelines: the item
	Require    []string        `json:"require,omitempty"`    // labels a peer must carry to run it
	Pin        string          `json:"pin,omitempty"`        // the only peer that may run it
	Waiting    string          `json:"waiting,omitempty"`    // READY and no live peer may run it: why
	// WorkerDeaths counts the external workers that died running it since
	// its last outcome, beside other tasks and alone; absent when none.
	WorkerDeaths *shard.Deaths `json:"worker_deaths,omitempty"`
}

// Group is a group as GET /v1/groups/{id} returns it.
type Group struct {
	ID         string         `json:"id"`
	Mode       string         `json:"mode"`
	State      string         `json:"state"` // RUNNING SUCCEEDED FAILED CANCELED
	Key        string         `json:"key,omitempty"`
	Trace      string         `json:"trace,omitempty"`
	Total      int            `json:"total"`  // number of tasks (extension)
	Counts     map[string]int `json:"counts"` // state name -> tasks in it; zero counts omitted
	Tasks      []Task         `json:"tasks"`  // submission order; empty with ?tasks=false
	CreatedAt  *time.Time     `json:"created_at"`
	FinishedAt *time.Time     `json:"finished_at"`

	// TasksOmitted says Tasks was left empty on purpose (?tasks=false, or
	// a webhook body of a group over NotifyMaxTasks tasks): read them
	// with GET /v1/groups/{id}.
	TasksOmitted bool `json:"tasks_omitted,omitempty"`
	// Streaming pipelines: the stages, the number of items, and the items
	// that failed a stage after their retries (the others flowed on).
	Stages  []PipelineStageInfo `json:"stages,omitempty"`
	Items   int                 `json:"items,omitempty"`
	Skipped []SkippedItem       `json:"skipped,omitempty"`
	Notify  *NotifyStatus       `json:"notify,omitempty"` // the webhook, when set
	// Concurrency is the bound on the group's tasks in flight at once, as
	// submitted; 0 (omitted) = unbounded.
	Concurrency int `json:"concurrency,omitempty"`
}

// PipelineStageInfo is a stage of a streaming pipeline with its progress.
type PipelineStageInfo struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"` // 0 = unbounded
	Done        int    `json:"done"`        // items that left it successfully
	// Skipped counts the items that failed this stage after their retries
	// and left the pipeline (listed in the group's skipped): done plus the
	// skipped of this stage and the ones before is the items it is through
	// with.
	Skipped int `json:"skipped"`
}

// SkippedItem is an item that left a streaming pipeline early.
type SkippedItem struct {
	Item   int    `json:"item"`
	Stage  string `json:"stage"` // the stage it failed
	Task   string `json:"task"`
	Reason string `json:"reason"`
}

// NotifyStatus is the delivery state of a group's webhook.
type NotifyStatus struct {
	URL       string     `json:"url"`
	State     string     `json:"state"` // waiting (group running), pending, delivered, failed
	Attempts  int        `json:"attempts"`
	LastError string     `json:"last_error,omitempty"`
	Next      *time.Time `json:"next_attempt,omitempty"`
}

// Event is one entry of a task's history.
type Event struct {
	Seq   int        `json:"seq"`  // 1-based within the task
	Type  string     `json:"type"` // submitted, leased, renewed, succeeded, ...
	At    *time.Time `json:"at"`
	Round uint64     `json:"round"`
	Peer  string     `json:"peer"`
	Error string     `json:"error,omitempty"`
	By    string     `json:"by,omitempty"` // canceled: who asked
}

// Events is the body of GET /v1/tasks/{id}/events.
type Events struct {
	Events []Event `json:"events"`
}

// ErrorBody is the body of every 4xx and 5xx response.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Health is the body of GET /healthz.
type Health struct {
	Status string `json:"status"` // "ok"
}

// Error codes of the error body.
const (
	CodeInvalidArgument = "invalid_argument"   // 400
	CodeUnauthenticated = "unauthenticated"    // 401
	CodeForbidden       = "forbidden"          // 403: a cross-site request, or a Host this peer is not
	CodeNotFound        = "not_found"          // 404
	CodeMethodNotAllow  = "method_not_allowed" // 405 (extension)
	CodeConflict        = "conflict"           // 409
	// CodePreconditionFailed: PATCH /v1/schedules/{id} named a revision
	// (If-Match) the schedule is no longer at.
	CodePreconditionFailed = "precondition_failed"    // 412
	CodePayloadTooLarge    = "payload_too_large"      // 413
	CodeUnsupportedType    = "unsupported_media_type" // 415: a body that is not application/json
	CodeRateLimited        = "rate_limited"           // 429: too many requests from one client
	CodeInternal           = "internal"               // 500
	CodeUnavailable        = "unavailable"            // 503
	// CodeInsufficientStorage (507): the owner of the group is short of
	// disk space (--min-free-disk) and takes no new work.
	CodeInsufficientStorage = "insufficient_storage"
)

// timePtr returns nil for the zero time, else t in UTC.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// NewTask converts a task view to its wire form.
func NewTask(v shard.TaskView) Task {
	t := Task{
		ID:         string(v.ID),
		Group:      string(v.Group),
		Name:       v.Name,
		Handler:    v.Handler,
		State:      v.State.String(),
		Priority:   v.Priority,
		Attempt:    v.Attempt,
		Round:      uint64(v.Round),
		Retries:    v.Retries,
		Peer:       shard.HolderPeer(v.Holder),
		CreatedAt:  timePtr(v.CreatedAt),
		StartedAt:  timePtr(v.StartedAt),
		FinishedAt: timePtr(v.FinishedAt),
		NotBefore:  timePtr(v.NotBefore),
	}
	if len(v.Result) > 0 && json.Valid(v.Result) {
		t.Result = json.RawMessage(v.Result)
	}
	if v.Error != "" {
		e := v.Error
		t.Error = &e
	}
	for _, d := range v.Deps {
		t.Deps = append(t.Deps, string(d))
	}
	t.Require, t.Pin, t.Waiting = v.Require, v.Pin, v.Waiting
	if v.Deaths.Total() > 0 {
		d := v.Deaths
		t.WorkerDeaths = &d
	}
	if v.Stage > 0 || v.Item > 0 || v.Mode == shard.ModePipeline || v.Mode == shard.ModeStream {
		st, it := v.Stage, v.Item
		t.Stage = &st
		if v.Mode == shard.ModeStream {
			t.Item = &it
		}
	}
	return t
}

// NewGroup converts a group view to its wire form; withTasks=false leaves
// the task list empty (for cheap progress polling).
func NewGroup(v shard.GroupView, withTasks bool) Group {
	g := Group{
		ID:         string(v.ID),
		Mode:       v.Mode.String(),
		State:      v.State.String(),
		Key:        v.Key,
		Trace:      v.Trace,
		Total:      max(v.Total, len(v.Tasks)),
		Counts:     make(map[string]int, len(v.Counts)),
		Tasks:      []Task{},
		CreatedAt:  timePtr(v.CreatedAt),
		FinishedAt: timePtr(v.FinishedAt),
	}
	counted := 0
	for _, s := range slices.Sorted(maps.Keys(v.Counts)) {
		if n := v.Counts[s]; n > 0 {
			g.Counts[s.String()] = n
			counted += n
		}
	}
	g.Total = max(g.Total, counted)
	g.TasksOmitted = !withTasks
	if withTasks {
		g.Tasks = make([]Task, 0, len(v.Tasks))
		for _, tv := range v.Tasks {
			g.Tasks = append(g.Tasks, NewTask(tv))
		}
	}
	if v.Mode == shard.ModeStream {
		g.Items = v.Items
		g.Stages = make([]PipelineStageInfo, len(v.Stages))
		for i, st := range v.Stages {
			g.Stages[i] = PipelineStageInfo{Name: st.Name, Concurrency: st.Concurrency}
			if i < len(v.StageDone) {
				g.Stages[i].Done = v.StageDone[i]
			}
		}
		for _, sk := range v.Skipped {
			g.Skipped = append(g.Skipped, SkippedItem{Item: sk.Item, Stage: sk.Stage, Task: string(sk.Task), Reason: sk.Reason})
			if i := slices.IndexFunc(g.Stages, func(st PipelineStageInfo) bool { return st.Name == sk.Stage }); i >= 0 {
				g.Stages[i].Skipped++
			}
		}
	}
	if n := v.Notify; n != nil {
		g.Notify = &NotifyStatus{URL: n.URL, State: n.State, Attempts: n.Attempts, LastError: n.LastError, Next: timePtr(n.Next)}
	}
	g.Concurrency = v.Concurrency
	return g
}

// NewEvents converts a task's history to its wire form.
func NewEvents(evs []shard.TaskEvent) Events {
	out := Events{Events: make([]Event, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, Event{
			Seq:   e.Seq,
			Type:  e.Type.String(),
			At:    timePtr(e.At),
			Round: uint64(e.Round),
			Peer:  shard.HolderPeer(e.Holder),
			Error: e.Error,
			By:    e.By,
		})
	}
	return out
}
