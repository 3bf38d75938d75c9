package node

import (
	"log/slog"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkRaftCommitFloor measures etcd raft alone: three in-memory
// replicas (MemoryStorage, no needle code, no encoding, no network), one
// 100-byte entry proposed at the leader per op and pumped until every
// replica applied it. It is the floor under the simulator's cost per Raft
// round; a task takes at least two rounds (its submission with its first
// lease, then its outcome). See docs/simulator.md for what that
// floor means for the x-real-time figure.
func BenchmarkRaftCommitFloor(b *testing.B) {
	const n = 3
	nodes := make([]*raft.RawNode, n)
	stores := make([]*raft.MemoryStorage, n)
	for i := range n {
		stores[i] = raft.NewMemoryStorage()
		// Bootstrapped from the same snapshot, as bootstrap does.
		if err := stores[i].ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{
			ConfState: pb.ConfState{Voters: []uint64{1, 2, 3}}, Index: uint64(1), Term: uint64(1)}}); err != nil {
			b.Fatal(err)
		}
		rn, err := raft.NewRawNode(&raft.Config{ID: uint64(i + 1), ElectionTick: 10, HeartbeatTick: 1,
			Storage: stores[i], MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: raftLogger{slog.New(slog.DiscardHandler)}})
		if err != nil {
			b.Fatal(err)
		}
		nodes[i] = rn
	}
	applied := make([]uint64, n)
	var inbox [n][]pb.Message
	pump := func() bool {
		busy := false
		for i, rn := range nodes {
			for _, m := range inbox[i] {
				_ = rn.Step(m)
			}
			inbox[i] = inbox[i][:0]
			for rn.HasReady() {
				busy = true
				rd := rn.Ready()
				if !raft.IsEmptyHardState(rd.HardState) {
					_ = stores[i].SetHardState(rd.HardState)
				}
				_ = stores[i].Append(rd.Entries)
				for _, m := range rd.Messages {
					inbox[m.To-1] = append(inbox[m.To-1], m)
				}
				for _, e := range rd.CommittedEntries {
					applied[i] = e.Index
				}
				rn.Advance(rd)
			}
		}
		return busy
	}
	_ = nodes[0].Campaign()
	for pump() {
	}
	if nodes[0].Status().RaftState != raft.StateLeader {
		b.Fatal("node 1 did not become leader")
	}
	data := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = nodes[0].Propose(data)
		want := nodes[0].Status().Commit + 1
		for pump() {
		}
		for i := range n {
			if applied[i] < want {
				b.Fatalf("replica %d applied %d < %d", i+1, applied[i], want)
			}
		}
	}
}
