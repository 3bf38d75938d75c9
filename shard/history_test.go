package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// historyScript drives o through successes, failures, retries, cancels,
// expiries and webhook deliveries, and returns the events it applied.
func historyScript(t *testing.T, o *owner) []Event {
	t.Helper()
	runRandom(o, rand.New(rand.NewPCG(9, 9)), 40)
	// Failed and canceled tasks run again in place; those that fail
	// again stay so.
	for _, id := range sortedGroupIDs(o.s.groups) {
		if st, _ := o.s.GroupState(id); st == GroupFailed || st == GroupCanceled {
			evs, _ := o.s.Retry(o.now, id, "", "op", "k-"+string(id))
			o.commit(evs...)
		}
	}
	for range 5 {
		for _, id := range o.lease(1000, "w2") {
			_ = o.report(id, "w2", true, false)
		}
		o.advance(time.Minute)
	}
	// Single tasks with webhooks, one lease lost to its expiry.
	for i := range 4 {
		o.submit(GroupSpec{ID: GroupID(fmt.Sprint("n", i)), Mode: ModeSingle, Notify: "http://hook", Tasks: []TaskSpec{{Handler: "h"}}})
	}
	o.lease(1, "w3")
	o.advance(time.Hour) // its lease expires
	for _, id := range o.lease(1000, "w3") {
		_ = o.report(id, "w3", true, false)
	}
	for i, j := range o.s.NotifyDue(o.now, 10) {
		if i%2 == 0 {
			o.commit(o.s.Notified(o.now, j, ""))
		} else {
			o.commit(o.s.NotifyRefused(o.now, j, "refused"))
		}
	}
	return o.log
}

// Plain histories (history.go) change nothing one can read: the views,
// the histories and the snapshot are those of a state that keeps every
// event, after Apply and after Restore.
func TestPlainHistoriesSameState(t *testing.T) {
	o := newOwner(t)
	log := historyScript(t, o)
	plain := 0
	for _, g := range o.s.groups {
		for _, tk := range g.tasks {
			if tk.plain {
				plain++
			}
		}
	}
	if plain == 0 {
		t.Fatal("no task has a plain history")
	}
	plainHistories = false
	defer func() { plainHistories = true }()
	full, _ := New(DefaultConfig())
	full.Apply(log)
	for _, g := range full.groups {
		for _, tk := range g.tasks {
			if tk.plain {
				t.Fatalf("task %s has a plain history with plainHistories off", tk.id())
			}
		}
	}
	assertSameState(t, o.s, full)
	snap := full.Snapshot()
	if got := o.s.Snapshot(); !bytes.Equal(got, snap) {
		t.Fatalf("snapshots differ: %d vs %d bytes", len(got), len(snap))
	}
	plainHistories = true
	restored, _ := New(DefaultConfig())
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	assertSameState(t, restored, full)
	if got := restored.Snapshot(); !bytes.Equal(got, snap) {
		t.Fatal("snapshot after restore differs")
	}
	// Restored part way, plain histories take the later events (webhook
	// attempts, retries) like kept ones.
	for _, k := range []int{len(log) / 3, len(log) / 2, len(log) - 6, len(log) - 2} {
		plainHistories = false
		part, _ := New(DefaultConfig())
		part.Apply(log[:k])
		snap := part.Snapshot()
		plainHistories = true
		r, _ := New(DefaultConfig())
		if err := r.Restore(snap); err != nil {
			t.Fatal(err)
		}
		r.Apply(log[k:])
		assertSameState(t, r, o.s)
		if !bytes.Equal(r.Snapshot(), o.s.Snapshot()) {
			t.Fatalf("restored at event %d: snapshots differ", k)
		}
	}
}

// AppendSnapshot after a prefix appends exactly Snapshot's bytes, and
// AppendTaskEvents exactly TaskEvents' events, into buffers that are
// reused.
func TestAppendSnapshotAndEvents(t *testing.T) {
	o := newOwner(t)
	historyScript(t, o)
	snap := o.s.Snapshot()
	buf := []byte("prefix")
	for range 2 {
		buf = o.s.AppendSnapshot(buf[:6])
		if !bytes.Equal(buf[:6], []byte("prefix")) || !bytes.Equal(buf[6:], snap) {
			t.Fatalf("AppendSnapshot after a prefix: %d bytes; want the prefix and Snapshot's %d", len(buf), len(snap))
		}
	}
	// A fresh buffer is grown once, to the last snapshot's size, not
	// doubled up to it by the appends.
	big := make([]byte, 0, 2*len(snap))
	reused := testing.AllocsPerRun(10, func() { o.s.AppendSnapshot(big) })
	fresh := testing.AllocsPerRun(10, func() { o.s.AppendSnapshot(nil) })
	if fresh > reused+1 {
		t.Fatalf("AppendSnapshot of %d bytes: %.0f allocations into nil, %.0f into a buffer with room; want one more at most",
			len(snap), fresh, reused)
	}
	var evs []TaskEvent
	for _, g := range o.s.groups {
		for _, tk := range g.tasks {
			want, err := o.s.TaskEvents(tk.id())
			if err != nil {
				t.Fatal(err)
			}
			evs, err = o.s.AppendTaskEvents(evs[:0], tk.id())
			if err != nil || !reflect.DeepEqual(evs, want) {
				t.Fatalf("AppendTaskEvents(%s) = %v, %v; want %v", tk.id(), evs, err, want)
			}
		}
	}
	if _, err := o.s.AppendTaskEvents(nil, "nope.0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("AppendTaskEvents of an unknown task: %v; want ErrNotFound", err)
	}
}
