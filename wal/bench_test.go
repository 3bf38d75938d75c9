package wal_test

import (
	"os"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// benchDir is where Badger benchmarks write: $WAL_BENCH_DIR if set (put it
// on the disk under test; a tmpfs makes fsync free), else b.TempDir().
func benchDir(b *testing.B) string {
	if d := os.Getenv("WAL_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "walbench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// runCommits appends and syncs b.N batches of perPart entries (200 bytes of
// data each) for each of parts partitions, and reports entries/s.
func runCommits(b *testing.B, l wal.Log, parts, perPart int) {
	data := make([]byte, 200)
	next := make([]uint64, parts)
	for p := range next {
		next[p] = 1
	}
	batch := &wal.Batch{Updates: make([]wal.Update, parts)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for p := range parts {
			es := make([]*raftpb.Entry, perPart)
			for j := range es {
				es[j] = &raftpb.Entry{Index: new(next[p]), Term: new(uint64(1)), Data: data}
				next[p]++
			}
			commit := next[p] - 1
			batch.Updates[p] = wal.Update{Partition: uint32(p), Entries: es,
				HardState: &raftpb.HardState{Term: new(uint64(1)), Commit: &commit}}
		}
		if err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*parts*perPart)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
}

func openBench(b *testing.B) *wal.Badger {
	l, err := wal.OpenBadger(benchDir(b), wal.BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkBadgerGroupCommit: one loop iteration of a busy peer, 100
// entries of 200 bytes over 10 partitions, one Append and one Sync.
func BenchmarkBadgerGroupCommit(b *testing.B) { runCommits(b, openBench(b), 10, 10) }

// BenchmarkBadgerSingleSync: one entry per Append and Sync (no batching).
func BenchmarkBadgerSingleSync(b *testing.B) { runCommits(b, openBench(b), 1, 1) }

// BenchmarkMemoryGroupCommit is BenchmarkBadgerGroupCommit on Memory.
func BenchmarkMemoryGroupCommit(b *testing.B) { runCommits(b, wal.NewMemory(), 10, 10) }

// BenchmarkMemorySingleSync is BenchmarkBadgerSingleSync on Memory.
func BenchmarkMemorySingleSync(b *testing.B) { runCommits(b, wal.NewMemory(), 1, 1) }
