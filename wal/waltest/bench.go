package waltest

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// BenchCommits appends and syncs b.N batches of perPart entries (200 bytes of
// data each) for each of parts partitions, and reports entries/s.
func BenchCommits(b *testing.B, l wal.Log, parts, perPart int) {
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
			es := make([]raftpb.Entry, perPart)
			for j := range es {
				es[j] = raftpb.Entry{Index: next[p], Term: uint64(1), Data: data}
				next[p]++
			}
			commit := next[p] - 1
			batch.Updates[p] = wal.Update{Partition: uint32(p), Entries: es,
				HardState: raftpb.HardState{Term: uint64(1), Commit: commit}}
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
