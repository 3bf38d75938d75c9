package shard

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// specsCases are groups whose tasks share their options, or some of them,
// or none.
func specsCases() []GroupSpec {
	opts := TaskSpec{Handler: "sleep", Timeout: 10 * time.Second, Retry: Retry{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Minute}}
	par := GroupSpec{ID: "par", Mode: ModeParallel, Key: "k", Trace: "tr", Notify: "http://hook"}
	for i := range 30 {
		ts := opts
		ts.Name, ts.Payload = fmt.Sprint("t", i), []byte(fmt.Sprint(i))
		switch i % 5 {
		case 1:
			ts.Priority = int32(i) // one of many: over maxPolicies in all
		case 2:
			ts.Require = []string{"gpu=1"}
		case 3:
			ts.Require = []string{} // not nil: views show it apart
		case 4:
			ts.Payload = []byte{}
		}
		par.Tasks = append(par.Tasks, ts)
	}
	dag := GroupSpec{ID: "dag", Mode: ModeDAG, Tasks: []TaskSpec{
		{Name: "a", Handler: "h", Pin: "n1"}, {Name: "b", Handler: "h", Deps: []string{"a"}, Delay: time.Second},
		{Name: "c", Handler: "h", Deps: []string{"a", "b"}}, {Name: "d", Handler: "h", Deps: []string{}},
	}}
	staged := GroupSpec{ID: "staged", Mode: ModePipeline, Tasks: []TaskSpec{
		{Name: "a", Handler: "h"}, {Name: "b", Handler: "h"}, {Name: "c", Handler: "h", Stage: 1}, {Name: "d", Handler: "g", Stage: 2},
	}}
	stream := GroupSpec{ID: "stream", Mode: ModeStream, Stages: []StageSpec{{Name: "s1", Concurrency: 2}, {Name: "s2"}}}
	for i := range 6 {
		stream.Tasks = append(stream.Tasks, TaskSpec{Handler: "h", Item: i / 2, Stage: i % 2, Payload: []byte{byte(i)}})
	}
	bc := GroupSpec{ID: "bc", Mode: ModeBroadcast, Tasks: []TaskSpec{{Name: "n1", Handler: "h", Pin: "n1"}, {Name: "n2", Handler: "h", Pin: "n2"}}}
	single := GroupSpec{ID: "one", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}}
	// Gated by a concurrency: a delayed task holds room (WAITING), a
	// task with dependencies takes none until they are done.
	capped := GroupSpec{ID: "capped", Mode: ModeParallel, Concurrency: 3}
	for i := range 7 {
		capped.Tasks = append(capped.Tasks, TaskSpec{Handler: "h", Payload: []byte{byte(i)}, Delay: time.Duration(i%5/4) * time.Second})
	}
	cappedDAG := GroupSpec{ID: "capdag", Mode: ModeDAG, Concurrency: 2, Tasks: []TaskSpec{
		{Name: "a", Handler: "h", Deps: []string{"c"}}, {Name: "b", Handler: "h"}, {Name: "c", Handler: "h"}, {Name: "d", Handler: "h"},
	}}
	cappedStages := GroupSpec{ID: "capstaged", Mode: ModePipeline, Concurrency: 1, Tasks: []TaskSpec{
		{Name: "a", Handler: "h"}, {Name: "b", Handler: "h"}, {Name: "c", Handler: "h", Stage: 1},
	}}
	return []GroupSpec{par, dag, staged, stream, bc, single, capped, cappedDAG, cappedStages}
}

// A group's task specs, kept apart (specs.go), read back as submitted: in
// full, in views, in the snapshot's bytes, after a restore.
func TestSpecsAsSubmitted(t *testing.T) {
	for _, spec := range specsCases() {
		t.Run(string(spec.ID), func(t *testing.T) {
			if err := spec.ValidateStored(); err != nil {
				t.Fatal(err)
			}
			s, _ := New(DefaultConfig())
			s.Apply([]Event{{Type: EvSubmitted, At: t0, Group: spec.ID, Spec: &spec}})
			if s.Len() != 1 {
				t.Fatal("not applied")
			}
			check := func(s *Shard, when string, spec GroupSpec) {
				t.Helper()
				g := s.groups[spec.ID]
				if gs := g.groupSpec(); !reflect.DeepEqual(gs, spec) {
					t.Fatalf("%s: group spec\n%+v\nwant\n%+v", when, gs, spec)
				}
				for i, tk := range g.tasks {
					ts := spec.Tasks[i]
					v, _ := s.Task(tk.id())
					if v.Name != ts.Name || !reflect.DeepEqual(v.Payload, ts.Payload) || v.Handler != ts.Handler || v.Priority != ts.Priority ||
						v.Stage != ts.Stage || v.Item != ts.Item || !reflect.DeepEqual(v.Require, ts.Require) || v.Pin != ts.Pin {
						t.Fatalf("%s: view of task %d %+v; spec %+v", when, i, v, ts)
					}
				}
				snap := s.Snapshot()
				if !bytes.Contains(snap, AppendGroupSpec(nil, &spec)) {
					t.Fatalf("%s: the snapshot does not hold the spec's bytes", when)
				}
				if gs := g.groupSpec(); s.CheckRepeat(&gs) != nil || s.CheckRepeat(&spec) != nil {
					t.Fatalf("%s: the spec is not a repeat of itself", when)
				}
			}
			check(s, "applied", spec)
			r, _ := New(DefaultConfig())
			if err := r.Restore(s.Snapshot()); err != nil {
				t.Fatal(err)
			}
			// Decoded, empty lists and payloads are nil.
			decoded, _, err := DecodeGroupSpec(AppendGroupSpec(nil, &spec))
			if err != nil {
				t.Fatal(err)
			}
			check(r, "restored", decoded)
			if !bytes.Equal(r.Snapshot(), s.Snapshot()) {
				t.Fatal("snapshots differ after restore")
			}
		})
	}
}

// The tasks of a group share their options when they are the same.
func TestSpecsShared(t *testing.T) {
	s, _ := New(DefaultConfig())
	spec := specsCases()[0]
	s.Apply([]Event{{Type: EvSubmitted, At: t0, Group: spec.ID, Spec: &spec}})
	pols := map[*TaskSpec]bool{}
	for _, tk := range s.groups[spec.ID].tasks {
		pols[tk.pol] = true
	}
	// Priorities 1, 6, ..., 26 each, {"gpu=1"}, {}, and the rest.
	if len(pols) != 6+3 {
		t.Fatalf("%d options kept for 30 tasks of 9 kinds", len(pols))
	}
}

// RunOf and LeasedSpec return the whole spec.
func TestRunOfWholeSpec(t *testing.T) {
	o := newOwner(t)
	spec := specsCases()[1]
	o.submit(spec)
	evs := o.s.Lease(o.now, 1, "w", nil)
	if len(evs) != 1 {
		t.Fatal("no lease")
	}
	_, i, _ := evs[0].Task.Split()
	if ts, ok := o.s.LeasedSpec(evs[0].Task); !ok || !reflect.DeepEqual(*ts, spec.Tasks[i]) {
		t.Fatalf("LeasedSpec = %+v, %v; want %+v", ts, ok, spec.Tasks[i])
	}
	o.commit(evs...)
	if ts, ok := o.s.RunOf(evs[0].Task, evs[0].Round, "w"); !ok || !reflect.DeepEqual(ts, spec.Tasks[i]) {
		t.Fatalf("RunOf = %+v, %v; want %+v", ts, ok, spec.Tasks[i])
	}
}
