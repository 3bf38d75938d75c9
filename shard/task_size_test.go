package shard

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// retainedPerTask is the heap a follower keeps per finished task of W1's
// shape (groups of 100 echo tasks that each succeeded at their first
// lease), events decoded from their encoding as a replica's are: spec,
// task, history, id, result. A peer under W1 holds millions of them.
func retainedPerTask(tb testing.TB, groups, size int) float64 {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	own, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	own.SetLeader(true, t0)
	fol, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	const holder = "n00017#0123456789abcdef0123456789abcdef"
	// commit applies evs on the owner and, through the codec, on the
	// follower.
	commit := func(evs ...Event) {
		own.Apply(evs)
		b, err := DecodeBatch(AppendBatch(nil, &Batch{Origin: "n1", Events: evs}))
		if err != nil {
			tb.Fatal(err)
		}
		fol.Apply(b.Events)
		fol.TakeChanges()
		own.TakeChanges()
	}
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	now := t0
	for g := range groups {
		tasks := make([]TaskSpec, size)
		for i := range tasks {
			tasks[i] = TaskSpec{Name: "t" + strconv.Itoa(i), Handler: "sleep", Payload: []byte(fmt.Sprintf("\x01\x02\x03\x04\x05\x06\x07\x08%d", i)),
				Timeout: 10 * time.Second, Retry: Retry{MaxAttempts: 3, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
		}
		spec := GroupSpec{ID: GroupID(fmt.Sprintf("g%016x", uint64(g)*0x9e3779b97f4a7c15)), Mode: ModeParallel, Tasks: tasks}
		ev, _, err := own.Submit(now, &spec)
		if err != nil {
			tb.Fatal(err)
		}
		commit(ev)
		now = now.Add(time.Millisecond)
		leases := own.Lease(now, size, holder, nil)
		commit(leases...)
		now = now.Add(time.Millisecond)
		outs := make([]Event, 0, len(leases))
		for _, l := range leases {
			_, i, _ := l.Task.Split()
			// The simulator's handler echoes its payload.
			ev, err := own.Report(now, Outcome{Task: l.Task, Round: l.Round, Holder: holder, OK: true, Result: tasks[i].Payload})
			if err != nil {
				tb.Fatal(err)
			}
			outs = append(outs, ev)
		}
		commit(outs...)
	}
	own = nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := fol.Len(); n != groups {
		tb.Fatalf("follower holds %d groups; want %d", n, groups)
	}
	var c [numStates]int
	fol.Counts(c[:])
	if c[Succeeded] != groups*size {
		tb.Fatalf("follower holds %d SUCCEEDED tasks; want %d", c[Succeeded], groups*size)
	}
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(groups*size)
	runtime.KeepAlive(fol)
	return per
}

// A finished task of W1's shape must stay small on every replica: it
// took 670 bytes with its own TaskSpec, id string and the group's room for
// histories; about 330 with its options shared (specs.go), its id made
// when asked and no history when it is the plain one (history.go).
func TestRetainedPerTask(t *testing.T) {
	const max = 380
	if per := retainedPerTask(t, 200, 100); per > max {
		t.Errorf("a finished task holds %.0f bytes of heap; want at most %d", per, max)
	} else {
		t.Logf("%.0f bytes per finished task", per)
	}
}
