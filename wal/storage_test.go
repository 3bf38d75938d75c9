package wal_test

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

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

// TestCloneHardState checks the copy against proto.Clone's, field by
// field as protobuf sees them, and that it shares nothing with the
// original; a field added to raftpb.HardState fails it.
func TestCloneHardState(t *testing.T) {
	if n := (&raftpb.HardState{}).ProtoReflect().Descriptor().Fields().Len(); n != 3 {
		t.Fatalf("raftpb.HardState has %d fields; CloneHardState copies 3", n)
	}
	if wal.CloneHardState(nil) != nil {
		t.Fatal("CloneHardState(nil) is not nil")
	}
	for _, hs := range []*raftpb.HardState{
		{},
		{Term: new(uint64(3))},
		{Term: new(uint64(3)), Vote: new(uint64(2)), Commit: new(uint64(40))},
		{Commit: new(uint64(0))},
	} {
		c := wal.CloneHardState(hs)
		if !proto.Equal(c, proto.Clone(hs)) {
			t.Errorf("CloneHardState(%v) = %v", hs, c)
		}
		if hs.Term != nil && c.Term == hs.Term || hs.Commit != nil && c.Commit == hs.Commit || hs.Vote != nil && c.Vote == hs.Vote {
			t.Errorf("CloneHardState(%v) shares a field with it", hs)
		}
	}
}
