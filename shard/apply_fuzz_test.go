package shard

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"weak"
)

// fuzzShard returns a shard for FuzzApply, leading or following.
func fuzzShard(tb testing.TB, leader bool) *Shard {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(1, 1))
	cfg.Next = func(sp *ScheduleSpec, after time.Time) (time.Time, error) {
		return after.Add(time.Minute), nil
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.SetLeader(leader, t0)
	return s
}

// applySeeds returns batches a leader could commit: a submission of every
// mode followed by leases and outcomes, and the codec's seeds.
func applySeeds() []Batch {
	spec := codecFullSpec()
	spec.ID = "g1"
	stream := &GroupSpec{ID: "g2", Mode: ModeStream, Stages: []StageSpec{{Name: "a", Concurrency: 1}, {Name: "b"}},
		Tasks: []TaskSpec{{Handler: "h"}, {Handler: "h", Stage: 1}, {Handler: "h", Item: 1}, {Handler: "h", Item: 1, Stage: 1}}}
	seeds := []Batch{{Events: []Event{
		{Type: EvSubmitted, At: t0, Group: "g2", Spec: stream},
		{Type: EvLeased, At: t0, Group: "g2", Task: "g2.0", Round: 1, Holder: "h", Expiry: t0.Add(time.Minute)},
		{Type: EvSucceeded, At: t0, Group: "g2", Task: "g2.0", Round: 1, Holder: "h"},
		{Type: EvCanceled, At: t0, Group: "g2", By: "me"},
	}}}
	if spec.Validate() == nil {
		seeds = append(seeds, Batch{Events: []Event{{Type: EvSubmitted, At: t0, Group: spec.ID, Spec: spec}}})
	}
	return append(seeds, codecFuzzSeeds()...)
}

// FuzzApply drives Apply with whatever decodes as a batch (a buggy or
// hostile leader's entry): applying never panics, a leader and a follower
// reach the same state, and that state snapshots and restores to the same
// bytes (a replica that restarts from it comes back).
func FuzzApply(f *testing.F) {
	for _, b := range applySeeds() {
		f.Add(AppendBatch(nil, &b), int64(time.Minute))
	}
	f.Fuzz(func(t *testing.T, p []byte, later int64) {
		b, err := DecodeBatch(p)
		if err != nil {
			return
		}
		lead, follow := fuzzShard(t, true), fuzzShard(t, false)
		lead.Apply(b.Events)
		follow.Apply(b.Events)
		if later = max(later, 0) % int64(math.MaxInt32); later > 0 {
			due := lead.Due(t0.Add(time.Duration(later)))
			lead.Apply(due)
			follow.Apply(due)
		}
		snap := lead.Snapshot()
		if fs := follow.Snapshot(); !bytes.Equal(snap, fs) {
			t.Fatalf("leader and follower differ after the same events")
		}
		back := fuzzShard(t, false)
		if err := back.Restore(snap); err != nil {
			t.Fatalf("Restore(Snapshot()) after applying %d events: %v", len(b.Events), err)
		}
		if rs := back.Snapshot(); !bytes.Equal(snap, rs) {
			t.Fatalf("Snapshot(Restore(Snapshot())) differs")
		}
		back.SetLeader(true, t0)
		back.Due(t0.Add(time.Hour))
	})
}

// TestApplyRejectsUnstorable checks that a committed submission that could
// not be restored from a snapshot (here a stage concurrency the codec
// cannot hold, and a dag with a cycle) changes nothing and is counted.
func TestApplyRejectsUnstorable(t *testing.T) {
	cyc := &GroupSpec{ID: "c", Mode: ModeDAG, Tasks: []TaskSpec{
		{Name: "a", Handler: "h", Deps: []string{"b"}}, {Name: "b", Handler: "h", Deps: []string{"a"}}}}
	big := &GroupSpec{ID: "s", Mode: ModeStream, Stages: []StageSpec{{Name: "a", Concurrency: math.MaxInt32 + 1}},
		Tasks: []TaskSpec{{Handler: "h"}}}
	for _, spec := range []*GroupSpec{cyc, big} {
		s := fuzzShard(t, true)
		s.Apply([]Event{{Type: EvSubmitted, At: t0, Group: spec.ID, Spec: spec}})
		if s.HasGroup(spec.ID) || s.Rejected() != 1 {
			t.Errorf("Apply(%s): HasGroup = %v, Rejected = %d; want false, 1", spec.ID, s.HasGroup(spec.ID), s.Rejected())
		}
		if err := s.Restore(s.Snapshot()); err != nil {
			t.Errorf("Restore after rejecting %s: %v", spec.ID, err)
		}
		if err := spec.Validate(); err == nil {
			t.Errorf("Validate(%s) = nil; want an error", spec.ID)
		}
	}
}

// TestValidateBounds checks the duration maxima and the codec's limits.
func TestValidateBounds(t *testing.T) {
	huge := 2562047 * time.Hour
	for _, tt := range []struct {
		name  string
		edit  func(*TaskSpec)
		field string
	}{
		{"delay", func(ts *TaskSpec) { ts.Delay = huge }, "delay"},
		{"timeout", func(ts *TaskSpec) { ts.Timeout = MaxTimeout + 1 }, "timeout"},
		{"backoff", func(ts *TaskSpec) { ts.Retry.Backoff = MaxBackoff + 1 }, "retry.backoff"},
		{"max_backoff", func(ts *TaskSpec) { ts.Retry.MaxBackoff = huge }, "retry.max_backoff"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := &GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}}
			tt.edit(&g.Tasks[0])
			err := g.Validate()
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != tt.field {
				t.Fatalf("Validate() = %v; want a FieldError on %s", err, tt.field)
			}
			if err := g.ValidateStored(); err != nil {
				t.Fatalf("ValidateStored() = %v; want nil (bounds are not checked on committed entries)", err)
			}
		})
	}
	sp := &ScheduleSpec{ID: "s", Every: huge, Overlap: OverlapSkip, Misfire: MisfireOnce,
		Group: GroupSpec{Mode: ModeParallel, Tasks: []TaskSpec{{Name: "t", Handler: "h"}}}}
	if err, ok := sp.Validate().(*FieldError); !ok || err.Field != "every" {
		t.Fatalf("ScheduleSpec.Validate() with every %v = %v; want a FieldError on every", huge, sp.Validate())
	}
}

// TestRemovalFreesTasks: a removed group's tasks are freed at removal,
// not when their timers fire (a lease that expires in a year held every
// task of its group in memory until then).
func TestRemovalFreesTasks(t *testing.T) {
	o := newOwner(t)
	o.s.cfg.Retention = time.Minute
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{{Name: "a", Handler: "h", Timeout: MaxTimeout, Payload: make([]byte, 1<<20)}}})
	ids := o.lease(1, "w")
	if err := o.report(ids[0], "w", true, false); err != nil {
		t.Fatal(err)
	}
	wp := weak.Make(o.s.groups["g"])
	o.advance(2 * time.Minute) // past retention: removed
	if o.s.HasGroup("g") {
		t.Fatal("group not removed after retention")
	}
	runtime.GC()
	runtime.GC()
	if wp.Value() != nil {
		t.Fatal("a removed group is still in memory (held by its lease's expiry timer)")
	}
	runtime.KeepAlive(o.s) // the shard, its wheel and its timers live on
}
