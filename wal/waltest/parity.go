package waltest

import (
	"errors"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"

	"github.com/needle-mesh/needle/wal"
)

// testStorageParity applies a seeded random sequence of Raft-like updates
// to a wal.Storage and to the Log, and checks after each step that
// NewStorage(Load) holds what the Storage holds.
func testStorageParity(t *testing.T, open Opener) {
	l, reopen := open(t)
	r := rand.New(rand.NewPCG(1, 2))
	st, err := wal.NewStorage(wal.PartitionState{})
	if err != nil {
		t.Fatal(err)
	}
	term := uint64(1)
	for step := range 200 {
		u := randomUpdate(r, st, &term)
		if err := st.Apply(u); err != nil {
			t.Fatalf("step %d: Storage.Apply: %v", step, err)
		}
		MustAppend(t, l, &wal.Batch{Updates: []wal.Update{u}})
		if step%50 == 49 {
			l = reopen()
		}
		got, err := wal.NewStorage(MustLoad(t, l, u.Partition))
		if err != nil {
			t.Fatalf("step %d: NewStorage: %v", step, err)
		}
		CheckState(t, "step", StorageState(t, got), StorageState(t, st))
		if t.Failed() {
			t.Fatalf("step %d: update %v", step, u)
		}
	}
}

// randomUpdate builds an update that Raft could produce for st: appends,
// truncations, local snapshots, received snapshots and hard states.
func randomUpdate(r *rand.Rand, st *wal.Storage, term *uint64) wal.Update {
	first, _ := st.FirstIndex()
	last, _ := st.LastIndex()
	u := wal.Update{Partition: 9}
	hs, _, _ := st.InitialState()
	switch k := r.IntN(10); {
	case k < 6: // append, possibly truncating above the commit index
		from := last + 1
		if lo := max(first, hs.Commit+1); k == 0 && last >= lo {
			*term++
			from = lo + uint64(r.IntN(int(last-lo+1)))
		}
		u.Entries = Ents(from, from+uint64(r.IntN(4)), *term)
	case k < 8 && last >= first: // local snapshot + compaction
		i := first + uint64(r.IntN(int(last-first+1)))
		t, _ := st.Term(i)
		u.Snapshot = Snap(i, t, "local")
		u.Compact = i
	case k < 9: // received snapshot that conflicts or lies beyond the log
		*term++
		i := last + uint64(r.IntN(3))
		if i > 0 {
			u.Snapshot = Snap(i, *term, "remote")
		}
		u.Entries = Ents(i+1, i+1+uint64(r.IntN(2)), *term)
		u.HardState = HS(*term, 2, max(hs.Commit, i))
	default:
		u.HardState = HS(*term, 1, max(hs.Commit, min(hs.Commit+1, last)))
	}
	return u
}

// StorageState reads everything a raft.Storage holds as a PartitionState:
// its hard state (nil if empty), snapshot (nil if empty) and entries.
func StorageState(tb testing.TB, s raft.Storage) wal.PartitionState {
	tb.Helper()
	var ps wal.PartitionState
	hs, _, err := s.InitialState()
	if err != nil {
		tb.Fatalf("InitialState: %v", err)
	}
	if !raft.IsEmptyHardState(hs) {
		ps.HardState = hs
	}
	snap, err := s.Snapshot()
	if err != nil {
		tb.Fatalf("Snapshot: %v", err)
	}
	if !raft.IsEmptySnap(snap) {
		ps.Snapshot = snap
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last >= first {
		es, err := s.Entries(first, last+1, 1<<62)
		if err != nil && !errors.Is(err, raft.ErrUnavailable) {
			tb.Fatalf("Entries(%d, %d): %v", first, last+1, err)
		}
		ps.Entries = es
	}
	return ps
}
