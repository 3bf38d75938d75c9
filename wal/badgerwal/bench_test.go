package badgerwal_test

import (
	"bytes"
	"os"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/badgerwal"
	"github.com/needle-mesh/needle/wal/waltest"
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

func openBench(b *testing.B) *badgerwal.Log {
	l, err := badgerwal.Open(benchDir(b), badgerwal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkGroupCommit: one loop iteration of a busy peer, 100
// entries of 200 bytes over 10 partitions, one Append and one Sync.
func BenchmarkGroupCommit(b *testing.B) { waltest.BenchCommits(b, openBench(b), 10, 10) }

// BenchmarkSingleSync: one entry per Append and Sync (no batching).
func BenchmarkSingleSync(b *testing.B) { waltest.BenchCommits(b, openBench(b), 1, 1) }

// BenchmarkSustainedWrites: a busy peer's log over many memtables, so
// that compactions run while it writes: each op appends 10 partitions x
// 10 entries of 1 KiB and syncs, and each partition is snapshotted every
// 500 entries (the log below is deleted). Reports MB/s of entries.
func BenchmarkSustainedWrites(b *testing.B) {
	l := openBench(b)
	const parts, per, size, snapEvery = 10, 10, 1 << 10, 500
	payload := bytes.Repeat([]byte("x"), size)
	last := make([]uint64, parts)
	b.SetBytes(parts * per * size)
	for b.Loop() {
		var batch wal.Batch
		for p := range uint32(parts) {
			u := wal.Update{Partition: p}
			for range per {
				last[p]++
				u.Entries = append(u.Entries, raftpb.Entry{Index: last[p], Term: uint64(1), Data: payload})
			}
			if last[p]%snapEvery == 0 {
				u.Snapshot = raftpb.Snapshot{Data: []byte("state"), Metadata: raftpb.SnapshotMetadata{
					Index: last[p], Term: uint64(1), ConfState: raftpb.ConfState{Voters: []uint64{1}}}}
			}
			batch.Updates = append(batch.Updates, u)
		}
		if err := l.Append(&batch); err != nil {
			b.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
