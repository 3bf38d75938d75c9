package wal

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Storage is the raft.Storage of one partition, held in memory. The pure
// peer core hands it to raft.RawNode and applies each Ready's Update to it
// with Apply; the runtime persists the same Updates to a Log, so that
// NewStorage(Load(p)) rebuilds it after a restart.
type Storage struct {
	*memStorage // raft.MemoryStorage's rules, without its lock (memstorage.go)
}

var _ raft.Storage = (*Storage)(nil)

// NewStorage returns a Storage holding ps, as loaded from a Log. It checks
// ps like Load does and returns an error wrapping ErrCorrupt (never panics)
// when the entries do not follow the snapshot.
func NewStorage(ps PartitionState) (*Storage, error) {
	if err := VerifyState(0, &ps); err != nil {
		return nil, fmt.Errorf("wal: new storage: %w", err)
	}
	ms := newMemStorage()
	s := &Storage{memStorage: ms}
	if !raft.IsEmptySnap(ps.Snapshot) {
		if err := s.ApplySnapshot(ps.Snapshot); err != nil {
			return nil, fmt.Errorf("wal: new storage: %w", err)
		}
	}
	if !raft.IsEmptyHardState(ps.HardState) {
		if err := ms.SetHardState(ps.HardState); err != nil {
			return nil, fmt.Errorf("wal: new storage: %w", err)
		}
	}
	if err := ms.Append(ps.Entries); err != nil {
		return nil, fmt.Errorf("wal: new storage: %w", err)
	}
	return s, nil
}

// snapIndex is the index of the snapshot.
func (s *Storage) snapIndex() uint64 { return s.snapshot.Metadata.Index }

// Apply applies u in the order Raft expects (snapshot, hard state, entries,
// compaction) with the rules of Update, so that the Storage matches what a
// Log holds after Append(u). An invalid u returns an error wrapping
// ErrInvalidUpdate and leaves the Storage unchanged. A Storage is
// discarded with its partition, so it takes no Drop. It keeps u's hard
// state and entries, which nobody may modify afterwards (Raft makes a new
// hard state for every Ready).
func (s *Storage) Apply(u Update) error {
	if u.Drop {
		return fmt.Errorf("wal: apply: %w: partition %d: a Storage is not dropped, it is discarded", ErrInvalidUpdate, u.Partition)
	}
	if err := CheckEntries(u.Partition, u.Entries); err != nil {
		return fmt.Errorf("wal: apply: %w", err)
	}
	if err := s.checkGap(u); err != nil {
		return fmt.Errorf("wal: apply: %w", err)
	}
	if !raft.IsEmptySnap(u.Snapshot) {
		if err := s.applySnapshot(u.Snapshot); err != nil {
			return fmt.Errorf("wal: apply: %w", err)
		}
	}
	if !raft.IsEmptyHardState(u.HardState) {
		if err := s.SetHardState(u.HardState); err != nil {
			return fmt.Errorf("wal: apply: %w", err)
		}
	}
	if err := s.Append(u.Entries); err != nil {
		return fmt.Errorf("wal: apply: %w", err)
	}
	if u.Compact > 0 {
		if ci := min(u.Compact, s.snapIndex()); ci > 0 {
			if err := s.Compact(ci); err != nil && !errors.Is(err, raft.ErrCompacted) {
				return fmt.Errorf("wal: apply: %w", err)
			}
		}
	}
	return nil
}

// applySnapshot stores snap if newer: as a local snapshot plus compaction
// when the log holds its last entry, else replacing the whole log.
func (s *Storage) applySnapshot(snap raftpb.Snapshot) error {
	idx, term := snap.Metadata.Index, snap.Metadata.Term
	if idx <= s.snapIndex() {
		return nil
	}
	if t, err := s.Term(idx); err == nil && t == term {
		if _, err := s.CreateSnapshot(idx, &snap.Metadata.ConfState, snap.Data); err != nil {
			return err
		}
		return s.Compact(idx)
	}
	return s.ApplySnapshot(snap)
}

// checkGap rejects entries that would leave a gap after the last index
// (raft.MemoryStorage.Append panics on them), taking u's own snapshot into
// account.
func (s *Storage) checkGap(u Update) error {
	if len(u.Entries) == 0 {
		return nil
	}
	last, _ := s.LastIndex()
	if !raft.IsEmptySnap(u.Snapshot) {
		idx, term := u.Snapshot.Metadata.Index, u.Snapshot.Metadata.Term
		if t, err := s.Term(idx); idx > s.snapIndex() && (err != nil || t != term) {
			last = idx // the snapshot replaces the log
		} else {
			last = max(last, idx)
		}
	}
	if first := u.Entries[0].Index; first > last+1 {
		return fmt.Errorf("%w: partition %d: entry %d leaves a gap after last index %d",
			ErrInvalidUpdate, u.Partition, first, last)
	}
	return nil
}

// CloneSnapshot returns a deep copy of s: its data and its
// configuration's slices are copied too.
func CloneSnapshot(s raftpb.Snapshot) raftpb.Snapshot {
	s.Data = slices.Clone(s.Data)
	cs := &s.Metadata.ConfState
	cs.Voters = slices.Clone(cs.Voters)
	cs.Learners = slices.Clone(cs.Learners)
	cs.VotersOutgoing = slices.Clone(cs.VotersOutgoing)
	cs.LearnersNext = slices.Clone(cs.LearnersNext)
	return s
}
