package badgerwal_test

import (
	"bytes"
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/badgerwal"
	"github.com/needle-mesh/needle/wal/waltest"
)

// TestBadgerSplitsBigBatches writes batches several times the size of one
// Badger transaction (a snapshot of 3 MiB, 40 entries of 100 KiB, with a
// 4 MiB memtable: 600 KiB per transaction): each is written, survives a
// reopen, and a later small snapshot replaces the staged data.
func TestSplitsBigBatches(t *testing.T) {
	dir := t.TempDir()
	opts := badgerwal.Options{MemTableSize: 4 << 20}
	b := mustOpen(t, dir, opts)
	if max := b.MaxRecord(); max < 400<<10 || max > 600<<10 {
		t.Fatalf("MaxRecord() = %d; want about 90%% of 600 KiB", max)
	}
	big := bytes.Repeat([]byte("snapshot"), 3<<20/8)
	conf := raftpb.ConfState{Voters: []uint64{1}}
	snap := raftpb.Snapshot{Data: big, Metadata: raftpb.SnapshotMetadata{Index: uint64(10), Term: uint64(2), ConfState: conf}}
	var ents []raftpb.Entry
	for i := range 40 {
		ents = append(ents, raftpb.Entry{Index: uint64(11 + i), Term: uint64(2), Data: bytes.Repeat([]byte{byte(i)}, 100<<10)})
	}
	hs := raftpb.HardState{Term: uint64(2), Vote: uint64(1), Commit: uint64(45)}
	batch := &wal.Batch{Updates: []wal.Update{{Partition: 3, Snapshot: snap, HardState: hs, Entries: ents}},
		OutboxPut: []wal.Record{{Key: "a", Value: []byte("x")}}}
	if err := b.Append(batch); err != nil {
		t.Fatalf("Append(%d MiB) = %v; want it written in several transactions", (len(big)+40*100<<10)>>20, err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	b = mustOpen(t, dir, opts)
	ps, err := b.Load(3)
	if err != nil {
		t.Fatalf("Load after a split append: %v", err)
	}
	if !bytes.Equal(ps.Snapshot.Data, big) || len(ps.Entries) != 40 || ps.HardState.Commit != 45 {
		t.Fatalf("Load = snapshot of %d bytes, %d entries, commit %d; want %d, 40, 45",
			len(ps.Snapshot.Data), len(ps.Entries), ps.HardState.Commit, len(big))
	}
	if ob, _ := b.Outbox(); len(ob) != 1 {
		t.Fatalf("Outbox = %v; want the one record", ob)
	}
	small := raftpb.Snapshot{Data: []byte("small"), Metadata: raftpb.SnapshotMetadata{Index: uint64(50), Term: uint64(2), ConfState: conf}}
	if err := b.Append(&wal.Batch{Updates: []wal.Update{{Partition: 3, Snapshot: small}}}); err != nil {
		t.Fatal(err)
	}
	if ps, err = b.Load(3); err != nil || string(ps.Snapshot.Data) != "small" {
		t.Fatalf("Load after a small snapshot = %q, %v", ps.Snapshot.Data, err)
	}
	one := []wal.Record{{Key: "big", Value: make([]byte, 1<<20)}}
	if err := b.Append(&wal.Batch{OutboxPut: one}); !errors.Is(err, wal.ErrBatchTooBig) {
		t.Fatalf("Append of one record over MaxRecord = %v; want ErrBatchTooBig", err)
	}
	_ = b.Close()
}

// TestSplitsBigDrop drops a partition whose records do not fit one
// transaction's deletes (10,000 entries with a 4 MiB memtable): the drop
// goes in several transactions and the partition ends empty and unlisted,
// after a reopen too, the other partition untouched.
func TestSplitsBigDrop(t *testing.T) {
	dir := t.TempDir()
	opts := badgerwal.Options{MemTableSize: 4 << 20}
	b := mustOpen(t, dir, opts)
	conf := raftpb.ConfState{Voters: []uint64{1}}
	snap := raftpb.Snapshot{Data: bytes.Repeat([]byte("s"), 1<<20), Metadata: raftpb.SnapshotMetadata{Index: uint64(10), Term: uint64(2), ConfState: conf}}
	if err := b.Append(&wal.Batch{Updates: []wal.Update{{Partition: 3, Snapshot: snap}, {Partition: 4, Entries: waltest.Ents(1, 2, 1)}}}); err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	for lo := uint64(11); lo < 11+n; lo += 1000 {
		hs := raftpb.HardState{Term: uint64(2), Vote: uint64(1), Commit: lo + 999}
		if err := b.Append(&wal.Batch{Updates: []wal.Update{{Partition: 3, HardState: hs, Entries: waltest.Ents(lo, lo+999, 2)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := b.Load(3); err != nil || len(ps.Entries) != n {
		t.Fatalf("Load(3) before the drop: %d entries, %v; want %d", len(ps.Entries), err, n)
	}
	if err := b.Append(&wal.Batch{Updates: []wal.Update{{Partition: 3, Drop: true}}}); err != nil {
		t.Fatalf("Append(drop of %d entries) = %v; want it written in several transactions", n, err)
	}
	for range 2 {
		waltest.CheckState(t, "dropped", waltest.MustLoad(t, b, 3), wal.PartitionState{})
		waltest.CheckState(t, "kept", waltest.MustLoad(t, b, 4), wal.PartitionState{Entries: waltest.Ents(1, 2, 1)})
		if ps, err := b.Partitions(); err != nil || len(ps) != 1 || ps[0] != 4 {
			t.Errorf("Partitions() = %v, %v; want [4]", ps, err)
		}
		_ = b.Close()
		b = mustOpen(t, dir, opts)
	}
	_ = b.Close()
}
