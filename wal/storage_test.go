package wal_test

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/waltest"
)

func TestNewStorageRejectsBadState(t *testing.T) {
	snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: uint64(5), Term: uint64(1)}}
	for _, ps := range []wal.PartitionState{
		{Entries: waltest.Ents(2, 3, 1)},
		{Snapshot: snap, Entries: waltest.Ents(7, 8, 1)},
		{Snapshot: snap, Entries: waltest.Ents(5, 8, 1)},
		{HardState: raftpb.HardState{Commit: uint64(9)}, Snapshot: snap, Entries: waltest.Ents(6, 8, 1)},
	} {
		if _, err := wal.NewStorage(ps); !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("NewStorage(%v) = %v; want ErrCorrupt", len(ps.Entries), err)
		}
	}
}

// TestCloneSnapshot checks that the copy encodes the same and shares no
// array with the original.
func TestCloneSnapshot(t *testing.T) {
	s := raftpb.Snapshot{Data: []byte("state"), Metadata: raftpb.SnapshotMetadata{Index: 7, Term: 2,
		ConfState: raftpb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{3},
			VotersOutgoing: []uint64{1, 4}, LearnersNext: []uint64{4}}}}
	c := wal.CloneSnapshot(s)
	if !waltest.Equal(&c, &s) {
		t.Fatalf("CloneSnapshot(%v) = %v", s, c)
	}
	c.Data[0] = 'X'
	cs := &c.Metadata.ConfState
	cs.Voters[0], cs.Learners[0], cs.VotersOutgoing[0], cs.LearnersNext[0] = 9, 9, 9, 9
	if string(s.Data) != "state" || s.Metadata.ConfState.Voters[0] != 1 || s.Metadata.ConfState.Learners[0] != 3 ||
		s.Metadata.ConfState.VotersOutgoing[0] != 1 || s.Metadata.ConfState.LearnersNext[0] != 4 {
		t.Errorf("CloneSnapshot's copy shares an array with the original: %v", s)
	}
}
