package wal_test

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/waltest"
)

func TestNewStorageRejectsBadState(t *testing.T) {
	snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(5)), Term: new(uint64(1))}}
	for _, ps := range []wal.PartitionState{
		{Entries: waltest.Ents(2, 3, 1)},
		{Snapshot: snap, Entries: waltest.Ents(7, 8, 1)},
		{Snapshot: snap, Entries: waltest.Ents(5, 8, 1)},
		{HardState: &raftpb.HardState{Commit: new(uint64(9))}, Snapshot: snap, Entries: waltest.Ents(6, 8, 1)},
	} {
		if _, err := wal.NewStorage(ps); !errors.Is(err, wal.ErrCorrupt) {
			t.Errorf("NewStorage(%v) = %v; want ErrCorrupt", len(ps.Entries), err)
		}
	}
}
