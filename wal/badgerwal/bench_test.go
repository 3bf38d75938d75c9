package badgerwal_test

import (
	"os"
	"testing"

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
