package wal

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// partStore is one partition's stored log as applyUpdate edits it. Badger
// implements it over a read-write transaction, Memory over a copy of its
// in-memory partition, so both Logs share one set of rules.
type partStore interface {
	// snapIndex returns the stored snapshot's index, 0 if none.
	snapIndex() (uint64, error)
	// term returns the term of stored entry i and whether it is stored.
	term(i uint64) (uint64, bool, error)
	// lastIndex returns the last stored entry's index, or the snapshot
	// index when no entry is stored.
	lastIndex() (uint64, error)
	// dropEntries drops the stored entries with from <= Index < to; to == 0
	// means no upper bound.
	dropEntries(from, to uint64) error
	// putSnapshot stores s in place of the stored snapshot.
	putSnapshot(s *raftpb.Snapshot) error
	// putHardState stores hs in place of the stored hard state.
	putHardState(hs *raftpb.HardState) error
	// putEntries stores es, which are contiguous and follow the last index.
	putEntries(es []*raftpb.Entry) error
}

// applyUpdate applies u to s in the order Raft expects: snapshot, hard
// state, entries, compaction. See Update for the rules.
func applyUpdate(s partStore, u *Update) error {
	if !raft.IsEmptySnap(u.Snapshot) {
		if err := applySnapshot(s, u.Snapshot); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(u.HardState) {
		if err := s.putHardState(u.HardState); err != nil {
			return err
		}
	}
	if err := applyEntries(s, u.Partition, u.Entries); err != nil {
		return err
	}
	if u.Compact > 0 {
		si, err := s.snapIndex()
		if err != nil {
			return err
		}
		// Never past the snapshot: keep the first entry after it.
		if to := min(u.Compact, si+1); to > 0 {
			return s.dropEntries(0, to)
		}
	}
	return nil
}

// applySnapshot stores snap if it is newer than the stored snapshot, and
// drops the entries it covers, or the whole log if the log does not hold
// the snapshot's last entry.
func applySnapshot(s partStore, snap *raftpb.Snapshot) error {
	idx, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	si, err := s.snapIndex()
	if err != nil || idx <= si {
		return err
	}
	t, ok, err := s.term(idx)
	if err != nil {
		return err
	}
	to := uint64(0) // whole log
	if ok && t == term {
		to = idx + 1
	}
	if err := s.dropEntries(0, to); err != nil {
		return err
	}
	return s.putSnapshot(snap)
}

// applyEntries appends es, truncating the stored suffix they overwrite.
func applyEntries(s partStore, p uint32, es []*raftpb.Entry) error {
	if err := checkContiguous(p, es); err != nil || len(es) == 0 {
		return err
	}
	si, err := s.snapIndex()
	if err != nil {
		return err
	}
	es = skipCompacted(es, si)
	if len(es) == 0 {
		return nil
	}
	last, err := s.lastIndex()
	if err != nil {
		return err
	}
	first := es[0].GetIndex()
	if first > last+1 {
		return fmt.Errorf("%w: partition %d: entry %d leaves a gap after last index %d",
			ErrInvalidUpdate, p, first, last)
	}
	if first <= last {
		if err := s.dropEntries(first, 0); err != nil {
			return err
		}
	}
	return s.putEntries(es)
}

// checkContiguous rejects entries whose indexes do not increase by one, or
// that start at index 0.
func checkContiguous(p uint32, es []*raftpb.Entry) error {
	for i, e := range es {
		switch {
		case e == nil:
			return fmt.Errorf("%w: partition %d: nil entry", ErrInvalidUpdate, p)
		case i == 0 && e.GetIndex() == 0:
			return fmt.Errorf("%w: partition %d: entry index 0", ErrInvalidUpdate, p)
		case i > 0 && e.GetIndex() != es[i-1].GetIndex()+1:
			return fmt.Errorf("%w: partition %d: entry %d follows entry %d",
				ErrInvalidUpdate, p, e.GetIndex(), es[i-1].GetIndex())
		}
	}
	return nil
}

// skipCompacted drops the contiguous entries at or below index si, as
// raft.MemoryStorage.Append does.
func skipCompacted(es []*raftpb.Entry, si uint64) []*raftpb.Entry {
	if len(es) == 0 || es[0].GetIndex() > si {
		return es
	}
	n := si - es[0].GetIndex() + 1
	if n >= uint64(len(es)) {
		return nil
	}
	return es[n:]
}
