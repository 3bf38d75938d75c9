package waltest

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// testDrop checks Update.Drop: a dropped partition loads empty and is not
// listed, before and after a reopen, the others are untouched, and a later
// update starts it again from nothing, in a later Batch or the same one.
func testDrop(t *testing.T, open Opener) {
	l, reopen := open(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // several chunks
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{
		{Partition: 1, HardState: HS(2, 1, 8), Entries: Ents(1, 10, 2)},
		{Partition: 2, HardState: HS(1, 1, 3), Entries: Ents(1, 3, 1)},
		{Partition: 3, Entries: []raftpb.Entry{Ent(1, 1, string(big))}},
	}})
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Snapshot: Snap(5, 2, string(big)), Compact: 5}}})
	other := wal.PartitionState{HardState: HS(1, 1, 3), Entries: Ents(1, 3, 1)}
	checkParts := func(l wal.Log, want ...uint32) {
		t.Helper()
		if got, err := l.Partitions(); err != nil || !slices.Equal(got, want) {
			t.Errorf("Partitions() = %v, %v; want %v", got, err, want)
		}
	}
	// Dropping 1 and 3 (and 9, never stored) leaves only 2.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Drop: true}, {Partition: 3, Drop: true}, {Partition: 9, Drop: true}}})
	for range 2 {
		CheckState(t, "dropped", MustLoad(t, l, 1), wal.PartitionState{})
		CheckState(t, "dropped large", MustLoad(t, l, 3), wal.PartitionState{})
		CheckState(t, "kept", MustLoad(t, l, 2), other)
		checkParts(l, 2)
		l = reopen()
	}
	// Created again in a later batch, from index 1 and without the old
	// snapshot.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, HardState: HS(3, 0, 1), Entries: Ents(1, 2, 3)}}})
	l = checkBoth(t, l, reopen, 1, wal.PartitionState{HardState: HS(3, 0, 1), Entries: Ents(1, 2, 3)})
	// Dropped and created again in one batch, and in one update.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{
		{Partition: 1, Drop: true}, {Partition: 1, Entries: Ents(1, 1, 4)},
		{Partition: 2, Drop: true, Snapshot: Snap(7, 4, "s7"), HardState: HS(4, 0, 8), Entries: Ents(8, 8, 4)},
	}})
	CheckState(t, "re-created in one batch", MustLoad(t, l, 1), wal.PartitionState{Entries: Ents(1, 1, 4)})
	l = checkBoth(t, l, reopen, 2, wal.PartitionState{Snapshot: Snap(7, 4, "s7"), HardState: HS(4, 0, 8), Entries: Ents(8, 8, 4)})
	checkParts(l, 1, 2)
	// A batch with a drop is atomic: rejected whole, the partition stays.
	bad := &wal.Batch{Updates: []wal.Update{{Partition: 2, Drop: true}, {Partition: 4, Entries: Ents(3, 3, 1)}}}
	if err := l.Append(bad); !errors.Is(err, wal.ErrInvalidUpdate) {
		t.Fatalf("Append(drop, gap) = %v; want ErrInvalidUpdate", err)
	}
	CheckState(t, "after a rejected drop", MustLoad(t, l, 2), wal.PartitionState{Snapshot: Snap(7, 4, "s7"), HardState: HS(4, 0, 8), Entries: Ents(8, 8, 4)})
	checkParts(l, 1, 2)
}
