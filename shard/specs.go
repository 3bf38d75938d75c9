package shard

import "slices"

// A group's task specs are not kept as submitted. Most of a task's spec is
// options its group's other tasks share (handler, priority, timeout,
// retries, delay, labels, pin): they are kept once per group and kind,
// in a TaskSpec whose own fields are zero (a task's pol), and what is a
// task's own (Name, Payload, Deps, Stage, Item) is in the task. Under W1
// a peer holds millions of tasks of a few kinds: 184 bytes of TaskSpec a
// task, where its own fields take 48. Every reader sees the spec as
// submitted (spec, groupSpec), and snapshots keep their bytes.

// groupHead is a group's spec without its tasks: GroupSpec's other fields.
type groupHead struct {
	ID          GroupID
	Mode        Mode
	Key         string
	Trace       string
	Stages      []StageSpec
	Notify      string
	Concurrency int
}

func headOf(g *GroupSpec) groupHead {
	return groupHead{ID: g.ID, Mode: g.Mode, Key: g.Key, Trace: g.Trace, Stages: g.Stages, Notify: g.Notify, Concurrency: g.Concurrency}
}

// maxPolicies bounds the distinct options remembered while a group's
// tasks are made (the most recently used): a task whose options are none
// of them gets its own.
const maxPolicies = 8

// newPolicies makes the options of g's tasks from specs, shared between
// tasks whose options are the same (samePolicy), and their own fields.
// The options are allocated a few at a time, in chunks twice as long as
// the last (never longer than the tasks left): where each task has its
// own (a workload that varies them), a group makes a handful of
// allocations, not one a task. The group's tasks hold them, and are
// removed together.
func newPolicies(g *group, specs []TaskSpec) {
	var recent [maxPolicies]*TaskSpec
	pols := recent[:0]
	var chunk []TaskSpec // room for the next options
	for i, t := range g.tasks {
		ts := &specs[i]
		t.name, t.payload = ts.Name, ts.Payload
		t.stage, t.item = int32(ts.Stage), int32(ts.Item)
		if ts.Deps != nil {
			t.linked().names = ts.Deps
		}
		var p *TaskSpec
		for j := len(pols) - 1; j >= 0; j-- {
			if samePolicy(pols[j], ts) {
				p = pols[j]
				copy(pols[j:], pols[j+1:]) // the most recently used last
				pols[len(pols)-1] = p
				break
			}
		}
		if p == nil {
			if len(chunk) == cap(chunk) {
				chunk = make([]TaskSpec, 0, min(max(2*cap(chunk), 1), len(g.tasks)-i))
			}
			chunk = append(chunk, TaskSpec{Handler: ts.Handler, Priority: ts.Priority, Timeout: ts.Timeout, Retry: ts.Retry,
				Delay: ts.Delay, Require: ts.Require, Pin: ts.Pin})
			p = &chunk[len(chunk)-1]
			if len(pols) == maxPolicies {
				pols = append(pols[:0], pols[1:]...)
			}
			pols = append(pols, p)
		}
		t.pol = p
	}
}

// samePolicy reports whether ts has the options of p, down to a nil list
// of labels against an empty one (views show them apart).
func samePolicy(p, ts *TaskSpec) bool {
	return p.Handler == ts.Handler && p.Priority == ts.Priority && p.Timeout == ts.Timeout && p.Retry == ts.Retry &&
		p.Delay == ts.Delay && p.Pin == ts.Pin && (p.Require == nil) == (ts.Require == nil) && slices.Equal(p.Require, ts.Require)
}

// spec returns t's spec as submitted.
func (t *task) spec() TaskSpec {
	ts := *t.pol
	ts.Name, ts.Payload, ts.Deps = t.name, t.payload, t.depNames()
	ts.Stage, ts.Item = int(t.stage), int(t.item)
	return ts
}

// depNames returns the names of t's dependencies as submitted (Deps).
func (t *task) depNames() []string {
	if t.links == nil {
		return nil
	}
	return t.links.names
}

// groupSpec returns g's spec as submitted.
func (g *group) groupSpec() GroupSpec {
	h := &g.spec
	gs := GroupSpec{ID: h.ID, Mode: h.Mode, Key: h.Key, Trace: h.Trace, Stages: h.Stages, Notify: h.Notify, Concurrency: h.Concurrency}
	if len(g.tasks) > 0 {
		gs.Tasks = make([]TaskSpec, len(g.tasks))
		for i, t := range g.tasks {
			gs.Tasks[i] = t.spec()
		}
	}
	return gs
}
