package shard

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// finishedShard returns a shard holding groups x size finished tasks, as an
// owner leaves them: every failEvery-th task FAILED (a permanent error),
// the others SUCCEEDED with a small result, each group created a
// millisecond after the previous one.
func finishedShard(tb testing.TB, groups, size, failEvery int) *Shard {
	tb.Helper()
	s, err := New(DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	s.SetLeader(true, t0)
	tasks := make([]TaskSpec, size)
	for i := range tasks {
		tasks[i] = TaskSpec{Handler: "echo", Payload: []byte(`{"i":1}`)}
	}
	n := 0
	for g := range groups {
		at := t0.Add(time.Duration(g) * time.Millisecond)
		spec := GroupSpec{ID: GroupID(fmt.Sprintf("g%07d", g)), Mode: ModeParallel, Tasks: tasks}
		if size == 1 {
			spec.Mode = ModeSingle
		}
		ev, _, err := s.Submit(at, &spec)
		if err != nil {
			tb.Fatal(err)
		}
		s.Apply([]Event{ev})
		leases := s.Lease(at, size, "w", nil)
		s.Apply(leases)
		outs := make([]Event, 0, len(leases))
		for _, l := range leases {
			n++
			ok := n%failEvery != 0
			ev, err := s.Report(at, Outcome{Task: l.Task, Round: l.Round, Holder: "w", OK: ok,
				Result: []byte(`"r"`), Error: "boom", Permanent: true})
			if err != nil {
				tb.Fatal(err)
			}
			outs = append(outs, ev)
		}
		s.Apply(outs)
	}
	return s
}

// BenchmarkIndexBytesPerTask reports what the list index costs per
// retained task (index-B/task: the heap with the index minus without it),
// and, for scale, what a finished task costs in all (retained-B/task: the
// whole shard's heap over its tasks). Both over 200,000 finished tasks,
// in single-task groups (the index's worst case: a slot per task) and in
// groups of 1,000. Run with -benchtime=1x.
func BenchmarkIndexBytesPerTask(b *testing.B) {
	for _, size := range []int{1, 1000} {
		b.Run(fmt.Sprintf("group=%d", size), func(b *testing.B) {
			const n = 200_000
			for b.Loop() {
				base := heapInUse()
				s := finishedShard(b, n/size, size, 100)
				all := heapInUse()
				s.index = index{}
				without := heapInUse()
				s.indexRebuild()
				with := heapInUse()
				runtime.KeepAlive(s)
				b.ReportMetric(float64(with-without)/n, "index-B/task")
				b.ReportMetric(float64(all-base)/n, "retained-B/task")
			}
		})
	}
}

// BenchmarkListFailed times one partition's share of a page of 100 FAILED
// tasks among 200,000 finished ones (1% FAILED), first page and the next
// one through the cursor, in groups of 1,000 and of one task.
func BenchmarkListFailed(b *testing.B) {
	for _, size := range []int{1000, 1} {
		s := finishedShard(b, 200_000/size, size, 100)
		b.Run(fmt.Sprintf("group=%d/first", size), func(b *testing.B) {
			for b.Loop() {
				if ts, _ := s.ListTasks(&Filter{States: []State{Failed}, Limit: 100}); len(ts) != 100 {
					b.Fatalf("%d tasks", len(ts))
				}
			}
		})
		_, keys := s.ListTasks(&Filter{States: []State{Failed}, Limit: 100})
		after := keys[len(keys)-1]
		b.Run(fmt.Sprintf("group=%d/next", size), func(b *testing.B) {
			for b.Loop() {
				if ts, _ := s.ListTasks(&Filter{States: []State{Failed}, Limit: 100, After: &after}); len(ts) != 100 {
					b.Fatalf("%d tasks", len(ts))
				}
			}
		})
	}
}
