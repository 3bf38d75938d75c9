package wal

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// PartStore is one partition's stored log as ApplyUpdate edits it. It is
// what a Log implementation provides so that every Log shares one set of
// rules: Memory implements it over a copy of its in-memory partition,
// wal/badgerwal over a read-write transaction.
type PartStore interface {
	// SnapIndex returns the stored snapshot's index, 0 if none.
	SnapIndex() (uint64, error)
	// Term returns the term of stored entry i and whether it is stored.
	Term(i uint64) (uint64, bool, error)
	// LastIndex returns the last stored entry's index, or the snapshot
	// index when no entry is stored.
	LastIndex() (uint64, error)
	// DropEntries drops the stored entries with from <= Index < to; to == 0
	// means no upper bound.
	DropEntries(from, to uint64) error
	// PutSnapshot stores s in place of the stored snapshot.
	PutSnapshot(s raftpb.Snapshot) error
	// PutHardState stores hs in place of the stored hard state.
	PutHardState(hs raftpb.HardState) error
	// PutEntries stores es, which are contiguous and follow the last index.
	PutEntries(es []raftpb.Entry) error
	// Clear deletes the hard state, the snapshot and every entry.
	Clear() error
}

// ApplyUpdate applies u to s in the order Raft expects, after a drop:
// drop, snapshot, hard state, entries, compaction. See Update for the rules. An invalid u
// returns an error wrapping ErrInvalidUpdate; s may then be partly edited,
// so a Log applies it to a copy or inside a transaction it can discard.
func ApplyUpdate(s PartStore, u *Update) error {
	if u.Drop {
		if err := s.Clear(); err != nil {
			return err
		}
	}
	if !raft.IsEmptySnap(u.Snapshot) {
		if err := applySnapshot(s, u.Snapshot); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(u.HardState) {
		if err := s.PutHardState(u.HardState); err != nil {
			return err
		}
	}
	if err := applyEntries(s, u.Partition, u.Entries); err != nil {
		return err
	}
	if u.Compact > 0 {
		si, err := s.SnapIndex()
		if err != nil {
			return err
		}
		// Never past the snapshot: keep the first entry after it.
		if to := min(u.Compact, si+1); to > 0 {
			return s.DropEntries(0, to)
		}
	}
	return nil
}

// applySnapshot stores snap if it is newer than the stored snapshot, and
// drops the entries it covers, or the whole log if the log does not hold
// the snapshot's last entry.
func applySnapshot(s PartStore, snap raftpb.Snapshot) error {
	idx, term := snap.Metadata.Index, snap.Metadata.Term
	si, err := s.SnapIndex()
	if err != nil || idx <= si {
		return err
	}
	t, ok, err := s.Term(idx)
	if err != nil {
		return err
	}
	to := uint64(0) // whole log
	if ok && t == term {
		to = idx + 1
	}
	if err := s.DropEntries(0, to); err != nil {
		return err
	}
	return s.PutSnapshot(snap)
}

// applyEntries appends es, truncating the stored suffix they overwrite.
func applyEntries(s PartStore, p uint32, es []raftpb.Entry) error {
	if err := CheckEntries(p, es); err != nil || len(es) == 0 {
		return err
	}
	si, err := s.SnapIndex()
	if err != nil {
		return err
	}
	es = skipCompacted(es, si)
	if len(es) == 0 {
		return nil
	}
	last, err := s.LastIndex()
	if err != nil {
		return err
	}
	first := es[0].Index
	if first > last+1 {
		return fmt.Errorf("%w: partition %d: entry %d leaves a gap after last index %d",
			ErrInvalidUpdate, p, first, last)
	}
	if first <= last {
		if err := s.DropEntries(first, 0); err != nil {
			return err
		}
	}
	return s.PutEntries(es)
}

// CheckEntries rejects entries whose indexes do not increase by one, or
// that start at index 0, with an error wrapping ErrInvalidUpdate. A Log
// that writes one Update in several steps checks it first.
func CheckEntries(p uint32, es []raftpb.Entry) error {
	for i, e := range es {
		switch {
		case i == 0 && e.Index == 0:
			return fmt.Errorf("%w: partition %d: entry index 0", ErrInvalidUpdate, p)
		case i > 0 && e.Index != es[i-1].Index+1:
			return fmt.Errorf("%w: partition %d: entry %d follows entry %d",
				ErrInvalidUpdate, p, e.Index, es[i-1].Index)
		}
	}
	return nil
}

// skipCompacted drops the contiguous entries at or below index si, as
// raft.MemoryStorage.Append does.
func skipCompacted(es []raftpb.Entry, si uint64) []raftpb.Entry {
	if len(es) == 0 || es[0].Index > si {
		return es
	}
	n := si - es[0].Index + 1
	if n >= uint64(len(es)) {
		return nil
	}
	return es[n:]
}
