package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkApplySubmitted1000 folds a submitted group of 1,000 tasks.
func BenchmarkApplySubmitted1000(b *testing.B) {
	tasks := make([]TaskSpec, 1000)
	for i := range tasks {
		tasks[i] = TaskSpec{Handler: "echo", Payload: []byte(`{"i":1}`)}
	}
	s, _ := New(DefaultConfig())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		spec := GroupSpec{ID: GroupID(fmt.Sprint("g", i)), Mode: ModeParallel, Tasks: tasks}
		s.Apply([]Event{{Type: EvSubmitted, At: t0, Group: spec.ID, Spec: &spec}})
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkLeaseAndSucceed is the per-task cost of the owner's hot path:
// lease (propose + apply) and outcome (report + apply), in batches of 100.
func BenchmarkLeaseAndSucceed(b *testing.B) {
	s, _ := New(DefaultConfig())
	s.SetLeader(true, t0)
	tasks := make([]TaskSpec, 100_000)
	for i := range tasks {
		tasks[i] = TaskSpec{Handler: "echo"}
	}
	spec := GroupSpec{ID: "g", Mode: ModeParallel, Tasks: tasks}
	s.Apply([]Event{{Type: EvSubmitted, At: t0, Group: "g", Spec: &spec}})
	b.ReportAllocs()
	done := 0
	for b.Loop() {
		if s.ReadyLen() == 0 {
			b.StopTimer()
			spec := GroupSpec{ID: GroupID(fmt.Sprint("g", done)), Mode: ModeParallel, Tasks: tasks}
			s.Apply([]Event{{Type: EvSubmitted, At: t0, Group: spec.ID, Spec: &spec}})
			b.StartTimer()
		}
		leases := s.Lease(t0, 100, "w", nil)
		s.Apply(leases)
		outs := make([]Event, 0, len(leases))
		for _, l := range leases {
			ev, err := s.Report(t0, Outcome{Task: l.Task, Round: l.Round, Holder: "w", OK: true})
			if err != nil {
				b.Fatal(err)
			}
			outs = append(outs, ev)
		}
		s.Apply(outs)
		done += len(leases)
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkReadyQueue pushes and pops tasks of random priority.
func BenchmarkReadyQueue(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	ts := make([]*task, 1024)
	for i := range ts {
		ts[i] = &task{pol: &TaskSpec{Priority: int32(r.IntN(10))}, seq: uint64(i), heapIdx: -1}
	}
	var q readyQueue
	for _, t := range ts[:512] {
		q.Push(t)
	}
	b.ReportAllocs()
	i := 512
	for b.Loop() {
		t := q.Pop()
		t.seq = uint64(i)
		i++
		q.Push(t)
	}
}

// BenchmarkWheel adds and fires timers.
func BenchmarkWheel(b *testing.B) {
	w := newWheel(t0)
	now := t0
	var fired []timer
	b.ReportAllocs()
	for b.Loop() {
		w.add(timer{at: now.Add(50 * time.Millisecond).UnixNano(), kind: timerReady})
		now = now.Add(time.Millisecond)
		fired = w.advance(now, fired[:0])
	}
}

// BenchmarkWheelPrune drops the one dead timer of a wheel holding 40 lease
// expiries 10-30 s ahead, as NextDue does when the earliest lease ended
// (one busy partition's wheel under the simulator's mixed workload).
func BenchmarkWheelPrune(b *testing.B) {
	w := newWheel(t0)
	for i := range 40 {
		w.add(timer{at: t0.Add(10*time.Second + time.Duration(i)*500*time.Millisecond).UnixNano(), kind: timerExpiry, round: 1})
	}
	dead := func(tm *timer) bool { return tm.round == 0 }
	b.ReportAllocs()
	for b.Loop() {
		w.add(timer{at: t0.Add(5 * time.Second).UnixNano(), kind: timerExpiry})
		w.prune(dead)
	}
}
