// Package waltest is the conformance suite every wal.Log implementation
// passes: Run for all of them, RunCrash for those that can simulate a crash
// that loses unsynced writes; BenchCommits is the group-commit benchmark.
package waltest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// Opener opens a fresh, empty Log for one subtest. reopen simulates a clean
// restart: it closes the Log and opens it again over the same data. The
// Opener registers any cleanup with t.
type Opener func(t *testing.T) (l wal.Log, reopen func() wal.Log)

// Run runs the conformance suite against the Logs open returns.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"RoundTrip", testRoundTrip},
		{"Truncate", testTruncate},
		{"SnapshotDropsCovered", testSnapshotDropsCovered},
		{"SnapshotReplacesLog", testSnapshotReplacesLog},
		{"SnapshotOlderIgnored", testSnapshotOlderIgnored},
		{"Compact", testCompact},
		{"LargeValues", testLargeValues},
		{"Outbox", testOutbox},
		{"Meta", testMeta},
		{"BatchAtomic", testBatchAtomic},
		{"InvalidUpdates", testInvalidUpdates},
		{"ManyPartitions", testManyPartitions},
		{"StorageParity", testStorageParity},
		{"Join", testJoin},
		{"Drop", testDrop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// Ent returns an entry with the given index, term and data.
func Ent(i, term uint64, data string) raftpb.Entry {
	return raftpb.Entry{Index: i, Term: term, Type: raftpb.EntryNormal, Data: []byte(data)}
}

// Ents returns entries lo..hi (inclusive) of one term, with data "t<term>/<i>".
func Ents(lo, hi, term uint64) []raftpb.Entry {
	var es []raftpb.Entry
	for i := lo; i <= hi; i++ {
		es = append(es, Ent(i, term, fmt.Sprintf("t%d/%d", term, i)))
	}
	return es
}

// HS returns a hard state.
func HS(term, vote, commit uint64) raftpb.HardState {
	return raftpb.HardState{Term: term, Vote: vote, Commit: commit}
}

// Snap returns a snapshot at (index, term) with voters 1, 2, 3.
func Snap(index, term uint64, data string) raftpb.Snapshot {
	return raftpb.Snapshot{Data: []byte(data), Metadata: raftpb.SnapshotMetadata{
		Index: index, Term: term, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}},
	}}
}

// MustAppend appends and syncs b, failing the test on error.
func MustAppend(tb testing.TB, l wal.Log, b *wal.Batch) {
	tb.Helper()
	if err := l.Append(b); err != nil {
		tb.Fatalf("Append: %v", err)
	}
	if err := l.Sync(); err != nil {
		tb.Fatalf("Sync: %v", err)
	}
}

// MustLoad loads partition p, failing the test on error.
func MustLoad(tb testing.TB, l wal.Log, p uint32) wal.PartitionState {
	tb.Helper()
	ps, err := l.Load(p)
	if err != nil {
		tb.Fatalf("Load(%d): %v", p, err)
	}
	return ps
}

// Indexes returns the (index, term) pairs of es, for readable failures.
func Indexes(es []raftpb.Entry) [][2]uint64 {
	out := make([][2]uint64, len(es))
	for i, e := range es {
		out[i] = [2]uint64{e.Index, e.Term}
	}
	return out
}

// Equal reports whether two raftpb messages encode the same (as
// proto.Equal, a nil and an empty byte slice differ).
func Equal(a, b interface{ Marshal() ([]byte, error) }) bool {
	x, errX := a.Marshal()
	y, errY := b.Marshal()
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// CheckState fails the test unless got equals want field by field.
func CheckState(tb testing.TB, what string, got, want wal.PartitionState) {
	tb.Helper()
	if !Equal(&got.HardState, &want.HardState) {
		tb.Errorf("%s: HardState = %v; want %v", what, got.HardState, want.HardState)
	}
	if !Equal(&got.Snapshot, &want.Snapshot) {
		tb.Errorf("%s: Snapshot = %v; want %v", what, got.Snapshot.Metadata, want.Snapshot.Metadata)
	}
	if !slices.EqualFunc(got.Entries, want.Entries, func(a, b raftpb.Entry) bool { return Equal(&a, &b) }) {
		tb.Errorf("%s: Entries = %v; want %v", what, Indexes(got.Entries), Indexes(want.Entries))
	}
}

// checkBoth checks the state of p before and after a reopen; it returns the
// reopened Log.
func checkBoth(t *testing.T, l wal.Log, reopen func() wal.Log, p uint32, want wal.PartitionState) wal.Log {
	t.Helper()
	CheckState(t, "before reopen", MustLoad(t, l, p), want)
	l = reopen()
	CheckState(t, "after reopen", MustLoad(t, l, p), want)
	return l
}

func testRoundTrip(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 7, HardState: HS(2, 1, 3), Entries: Ents(1, 5, 2)}}})
	l = checkBoth(t, l, reopen, 7, wal.PartitionState{HardState: HS(2, 1, 3), Entries: Ents(1, 5, 2)})
	// An empty hard state leaves the stored one unchanged.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 7, HardState: raftpb.HardState{}, Entries: Ents(6, 6, 2)}}})
	l = checkBoth(t, l, reopen, 7, wal.PartitionState{HardState: HS(2, 1, 3), Entries: Ents(1, 6, 2)})
	if ps := MustLoad(t, l, 8); !raft.IsEmptyHardState(ps.HardState) || !raft.IsEmptySnap(ps.Snapshot) || len(ps.Entries) != 0 {
		t.Errorf("Load(8) of an unknown partition = %+v; want empty", ps)
	}
}

func testTruncate(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(1, 10, 1)}}})
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(4, 6, 2)}}})
	want := append(Ents(1, 3, 1), Ents(4, 6, 2)...)
	l = checkBoth(t, l, reopen, 1, wal.PartitionState{Entries: want})
	// Overwrite at the very first index.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(1, 2, 3)}}})
	checkBoth(t, l, reopen, 1, wal.PartitionState{Entries: Ents(1, 2, 3)})
}

func testSnapshotDropsCovered(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, HardState: HS(1, 1, 8), Entries: Ents(1, 10, 1)}}})
	// A snapshot whose last entry is in the log keeps the later entries.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Snapshot: Snap(5, 1, "s5")}}})
	checkBoth(t, l, reopen, 1, wal.PartitionState{HardState: HS(1, 1, 8), Snapshot: Snap(5, 1, "s5"), Entries: Ents(6, 10, 1)})
}

func testSnapshotReplacesLog(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(1, 10, 1)}}})
	// A snapshot that conflicts with the log (term 2 at index 8) replaces it,
	// and the same Update's entries follow it.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{
		Partition: 1, Snapshot: Snap(8, 2, "s8"), HardState: HS(2, 0, 9), Entries: Ents(9, 9, 2),
	}}})
	l = checkBoth(t, l, reopen, 1, wal.PartitionState{HardState: HS(2, 0, 9), Snapshot: Snap(8, 2, "s8"), Entries: Ents(9, 9, 2)})
	// A snapshot beyond the log replaces it too.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Snapshot: Snap(20, 3, "s20")}}})
	checkBoth(t, l, reopen, 1, wal.PartitionState{HardState: HS(2, 0, 9), Snapshot: Snap(20, 3, "s20")})
}

func testSnapshotOlderIgnored(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Snapshot: Snap(10, 2, "s10"), Entries: Ents(11, 12, 2)}}})
	// An older snapshot is ignored; entries at or below the snapshot are skipped.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Snapshot: Snap(4, 1, "s4"), Entries: Ents(9, 13, 2)}}})
	checkBoth(t, l, reopen, 1, wal.PartitionState{Snapshot: Snap(10, 2, "s10"), Entries: Ents(11, 13, 2)})
}

func testCompact(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(1, 10, 1), Compact: 5}}})
	// Without a snapshot nothing can be compacted: the log must stay loadable.
	l = checkBoth(t, l, reopen, 1, wal.PartitionState{Entries: Ents(1, 10, 1)})
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Snapshot: Snap(4, 1, "s4"), Compact: 8}}})
	// Compaction never passes the snapshot.
	checkBoth(t, l, reopen, 1, wal.PartitionState{Snapshot: Snap(4, 1, "s4"), Entries: Ents(5, 10, 1)})
}

func testLargeValues(t *testing.T, open Opener) {
	l, reopen := open(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 50_000) // 800 KB: several chunks
	e := Ent(1, 1, string(big))
	s := Snap(1, 1, string(big[:600_000]))
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 2, Entries: []raftpb.Entry{e}}}})
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 2, Snapshot: s, Entries: []raftpb.Entry{Ent(2, 1, "x")}}}})
	l = checkBoth(t, l, reopen, 2, wal.PartitionState{Snapshot: s, Entries: []raftpb.Entry{Ent(2, 1, "x")}})
	// A smaller snapshot replaces every chunk of the large one.
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 2, Snapshot: Snap(2, 1, "small")}}})
	checkBoth(t, l, reopen, 2, wal.PartitionState{Snapshot: Snap(2, 1, "small")})
}

func testOutbox(t *testing.T, open Opener) {
	l, reopen := open(t)
	big := bytes.Repeat([]byte{7}, 700_000)
	MustAppend(t, l, &wal.Batch{OutboxPut: []wal.Record{
		{Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("1")}, {Key: "ab", Value: big}, {Key: "c", Value: nil},
	}})
	MustAppend(t, l, &wal.Batch{
		OutboxPut: []wal.Record{{Key: "b", Value: []byte("22")}, {Key: "d", Value: []byte("4")}, {Key: "ab", Value: []byte("small")}},
		OutboxDel: []string{"a", "d", "missing"},
	})
	want := []wal.Record{{Key: "ab", Value: []byte("small")}, {Key: "b", Value: []byte("22")}, {Key: "c"}}
	checkOutbox(t, l, want)
	checkOutbox(t, reopen(), want)
}

func checkOutbox(t *testing.T, l wal.Log, want []wal.Record) {
	t.Helper()
	got, err := l.Outbox()
	if err != nil {
		t.Fatalf("Outbox: %v", err)
	}
	eq := func(a, b wal.Record) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }
	if !slices.EqualFunc(got, want, eq) {
		t.Errorf("Outbox() = %q; want %q", got, want)
	}
}

func testMeta(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{MetaPut: []wal.Record{{Key: "id", Value: []byte("peer-1")}, {Key: "parts", Value: []byte("256")}}})
	MustAppend(t, l, &wal.Batch{MetaPut: []wal.Record{{Key: "parts", Value: []byte("4096")}}})
	check := func(l wal.Log) {
		for _, tt := range []struct {
			key  string
			want string
			ok   bool
		}{{"id", "peer-1", true}, {"parts", "4096", true}, {"nope", "", false}} {
			v, ok, err := l.Meta(tt.key)
			if err != nil || ok != tt.ok || string(v) != tt.want {
				t.Errorf("Meta(%q) = %q, %v, %v; want %q, %v, nil", tt.key, v, ok, err, tt.want, tt.ok)
			}
		}
	}
	check(l)
	check(reopen())
}

func testBatchAtomic(t *testing.T, open Opener) {
	l, reopen := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(1, 3, 1)}}})
	bad := &wal.Batch{
		Updates: []wal.Update{
			{Partition: 1, HardState: HS(1, 1, 3), Entries: Ents(4, 5, 1)},
			{Partition: 2, Entries: Ents(1, 2, 1)},
			{Partition: 3, Entries: Ents(5, 6, 1)}, // gap: partition 3 is empty
		},
		OutboxPut: []wal.Record{{Key: "k", Value: []byte("v")}},
		MetaPut:   []wal.Record{{Key: "m", Value: []byte("v")}},
	}
	if err := l.Append(bad); !errors.Is(err, wal.ErrInvalidUpdate) {
		t.Fatalf("Append(gap) = %v; want ErrInvalidUpdate", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	check := func(l wal.Log) {
		CheckState(t, "partition 1", MustLoad(t, l, 1), wal.PartitionState{Entries: Ents(1, 3, 1)})
		ps, err := l.Partitions()
		if err != nil || !slices.Equal(ps, []uint32{1}) {
			t.Errorf("Partitions() = %v, %v; want [1]", ps, err)
		}
		checkOutbox(t, l, nil)
		if _, ok, _ := l.Meta("m"); ok {
			t.Errorf("Meta(m) exists after a failed Append")
		}
	}
	check(l)
	check(reopen())
}

func testInvalidUpdates(t *testing.T, open Opener) {
	l, _ := open(t)
	MustAppend(t, l, &wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: Ents(1, 3, 1)}}})
	for _, tt := range []struct {
		name string
		es   []raftpb.Entry
	}{
		{"gap", Ents(5, 6, 1)},
		{"not contiguous", []raftpb.Entry{Ent(4, 1, ""), Ent(6, 1, "")}},
		{"index 0", []raftpb.Entry{Ent(0, 1, "")}},
	} {
		err := l.Append(&wal.Batch{Updates: []wal.Update{{Partition: 1, Entries: tt.es}}})
		if !errors.Is(err, wal.ErrInvalidUpdate) {
			t.Errorf("Append(%s) = %v; want ErrInvalidUpdate", tt.name, err)
		}
	}
	CheckState(t, "after invalid updates", MustLoad(t, l, 1), wal.PartitionState{Entries: Ents(1, 3, 1)})
}

func testManyPartitions(t *testing.T, open Opener) {
	l, reopen := open(t)
	var b wal.Batch
	var want []uint32
	for p := uint32(0); p < 300; p++ {
		q := p * 7919 % 4096 // not in order
		b.Updates = append(b.Updates, wal.Update{Partition: q, HardState: HS(1, 0, 2), Entries: Ents(1, 2, 1)})
		want = append(want, q)
	}
	b.Updates = append(b.Updates, wal.Update{Partition: 1<<32 - 1, Entries: Ents(1, 1, 1)})
	want = append(want, 1<<32-1)
	slices.Sort(want)
	MustAppend(t, l, &b)
	check := func(l wal.Log) {
		got, err := l.Partitions()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Partitions() = %v (%d), %v; want %d partitions", got, len(got), err, len(want))
		}
		CheckState(t, "partition 7919", MustLoad(t, l, 7919%4096), wal.PartitionState{HardState: HS(1, 0, 2), Entries: Ents(1, 2, 1)})
	}
	check(l)
	check(reopen())
}
