package shard

import (
	"fmt"
	"testing"
)

// BenchmarkSnapshotOfBigGroup measures a snapshot of one 10,000-task
// parallel group (W3's shape) taken, decoded and installed: a replica that
// receives it decodes it once (DecodeSnapshot at the edge, Install when
// Raft hands it over), where Restore after a check decoded it twice.
func BenchmarkSnapshotOfBigGroup(b *testing.B) {
	o := newOwner(b)
	tasks := make([]TaskSpec, 10000)
	for i := range tasks {
		tasks[i] = TaskSpec{Name: fmt.Sprint("t", i), Handler: "echo", Payload: []byte(fmt.Sprint(i))}
	}
	o.submit(GroupSpec{ID: "big", Mode: ModeParallel, Tasks: tasks})
	snap := o.s.Snapshot()
	b.Run("take", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o.s.Snapshot()
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeSnapshot(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		s, _ := New(DefaultConfig())
		for b.Loop() {
			if err := s.Restore(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same group run to the end on peers' leases (a W1 partition's
	// usual state): histories with holders, most of them plain.
	for range 10 {
		for _, id := range o.lease(1000, "peer-1#boot") {
			if err := o.report(id, "peer-1#boot", true, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	done := o.s.Snapshot()
	b.Run("decode-done", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeSnapshot(done); err != nil {
				b.Fatal(err)
			}
		}
	})
}
