package api

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// fakeBackend is a Backend whose methods are function fields; a nil field
// answers from a tiny in-memory default.
type fakeBackend struct {
	SubmitFn      func(ctx context.Context, spec *shard.GroupSpec) (SubmitResult, error)
	TaskFn        func(ctx context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error)
	GroupFn       func(ctx context.Context, id shard.GroupID, wait time.Duration) (shard.GroupView, error)
	TaskEventsFn  func(ctx context.Context, id shard.TaskID) ([]shard.TaskEvent, error)
	CancelTaskFn  func(ctx context.Context, id shard.TaskID, by string) (shard.TaskView, error)
	CancelGroupFn func(ctx context.Context, id shard.GroupID, by string) (shard.GroupView, error)

	submits atomic.Int32 // calls of Submit
	mu      sync.Mutex
	keys    map[string]SubmitResult // default Submit: idempotency
	specs   []*shard.GroupSpec      // default Submit: what was submitted
}

var _ Backend = (*fakeBackend)(nil)

func (f *fakeBackend) Submit(ctx context.Context, spec *shard.GroupSpec) (SubmitResult, error) {
	f.submits.Add(1)
	if f.SubmitFn != nil {
		return f.SubmitFn(ctx, spec)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if res, ok := f.keys[spec.Key]; ok && spec.Key != "" {
		res.Created = false
		return res, nil
	}
	f.specs = append(f.specs, spec)
	g := shard.GroupID("g" + strconv.Itoa(len(f.specs)))
	res := SubmitResult{Group: g, Created: true}
	for i := range spec.Tasks {
		res.Tasks = append(res.Tasks, shard.TaskIDOf(g, i))
	}
	if f.keys == nil {
		f.keys = map[string]SubmitResult{}
	}
	f.keys[spec.Key] = res
	return res, nil
}

func (f *fakeBackend) Task(ctx context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
	if f.TaskFn != nil {
		return f.TaskFn(ctx, id, wait)
	}
	return shard.TaskView{}, shard.ErrNotFound
}

func (f *fakeBackend) Group(ctx context.Context, id shard.GroupID, wait time.Duration, _ bool) (shard.GroupView, error) {
	if f.GroupFn != nil {
		return f.GroupFn(ctx, id, wait)
	}
	return shard.GroupView{}, shard.ErrNotFound
}

func (f *fakeBackend) TaskEvents(ctx context.Context, id shard.TaskID) ([]shard.TaskEvent, error) {
	if f.TaskEventsFn != nil {
		return f.TaskEventsFn(ctx, id)
	}
	return nil, shard.ErrNotFound
}

func (f *fakeBackend) CancelTask(ctx context.Context, id shard.TaskID, by string) (shard.TaskView, error) {
	if f.CancelTaskFn != nil {
		return f.CancelTaskFn(ctx, id, by)
	}
	return shard.TaskView{}, shard.ErrNotFound
}

func (f *fakeBackend) CancelGroup(ctx context.Context, id shard.GroupID, by string) (shard.GroupView, error) {
	if f.CancelGroupFn != nil {
		return f.CancelGroupFn(ctx, id, by)
	}
	return shard.GroupView{}, shard.ErrNotFound
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

// doneTask is a SUCCEEDED task view.
func doneTask(id shard.TaskID) shard.TaskView {
	return shard.TaskView{
		ID: id, Group: id.Group(), Name: "a", Handler: "echo", State: shard.Succeeded,
		Attempt: 1, Round: 1, Holder: "peerA", Result: []byte(`{"any":"json"}`),
		CreatedAt: t0, StartedAt: t0.Add(time.Millisecond), FinishedAt: t0.Add(2 * time.Millisecond),
	}
}

// runningGroup is a group of two tasks, one done, one running.
func runningGroup(id shard.GroupID) shard.GroupView {
	a := doneTask(shard.TaskIDOf(id, 0))
	b := shard.TaskView{ID: shard.TaskIDOf(id, 1), Group: id, Name: "b", Handler: "echo", State: shard.Running,
		Deps: []shard.TaskID{a.ID}, CreatedAt: t0}
	return shard.GroupView{
		ID: id, Mode: shard.ModeDAG, State: shard.GroupRunning, CreatedAt: t0,
		Counts: map[shard.State]int{shard.Succeeded: 1, shard.Running: 1, shard.Failed: 0},
		Tasks:  []shard.TaskView{a, b},
	}
}
