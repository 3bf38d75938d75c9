package wal

import (
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// memStorage is raft.MemoryStorage without its mutex: the same log, the
// same answers and errors, method for method (etcd raft v3.6.0's
// storage.go, whose rules it copies). A partition's storage is read and
// written by the one goroutine that owns its Node (the runtime's loop, or
// the simulator's), and Raft asks it for its last index, first index and
// terms several times per message: the lock and unlock around each
// answer were 2.3% of the simulator's CPU (5 peers x 10,000 tasks).
// TestMemStorageMatchesRaft drives both with the same calls.
type memStorage struct {
	hardState pb.HardState
	snapshot  pb.Snapshot
	// ents[i] has raft log position i+snapshot.Metadata.Index; ents[0]
	// is a dummy entry holding the snapshot's index and term.
	ents []pb.Entry
}

func newMemStorage() *memStorage {
	return &memStorage{ents: make([]pb.Entry, 1)}
}

// InitialState implements raft.Storage.
func (ms *memStorage) InitialState() (pb.HardState, pb.ConfState, error) {
	return ms.hardState, ms.snapshot.Metadata.ConfState, nil
}

// SetHardState saves the current HardState.
func (ms *memStorage) SetHardState(st pb.HardState) error {
	ms.hardState = st
	return nil
}

// Entries implements raft.Storage.
func (ms *memStorage) Entries(lo, hi, maxSize uint64) ([]pb.Entry, error) {
	offset := ms.ents[0].Index
	if lo <= offset {
		return nil, raft.ErrCompacted
	}
	if hi > ms.lastIndex()+1 {
		panic(fmt.Sprintf("entries' hi(%d) is out of bound lastindex(%d)", hi, ms.lastIndex()))
	}
	// only contains dummy entries.
	if len(ms.ents) == 1 {
		return nil, raft.ErrUnavailable
	}
	ents := limitSize(ms.ents[lo-offset:hi-offset], maxSize)
	// The caller may append to the slice it gets: capped, so that it
	// never writes into ms.ents.
	return ents[:len(ents):len(ents)], nil
}

// limitSize is raft's: the longest prefix of ents whose encoded size does
// not pass maxSize, and never less than the first entry.
func limitSize(ents []pb.Entry, maxSize uint64) []pb.Entry {
	if len(ents) == 0 {
		return ents
	}
	size := uint64(ents[0].Size())
	for limit := 1; limit < len(ents); limit++ {
		size += uint64(ents[limit].Size())
		if size > maxSize {
			return ents[:limit]
		}
	}
	return ents
}

// Term implements raft.Storage.
func (ms *memStorage) Term(i uint64) (uint64, error) {
	offset := ms.ents[0].Index
	if i < offset {
		return 0, raft.ErrCompacted
	}
	if int(i-offset) >= len(ms.ents) {
		return 0, raft.ErrUnavailable
	}
	return ms.ents[i-offset].Term, nil
}

// LastIndex implements raft.Storage.
func (ms *memStorage) LastIndex() (uint64, error) { return ms.lastIndex(), nil }

func (ms *memStorage) lastIndex() uint64 {
	return ms.ents[0].Index + uint64(len(ms.ents)) - 1
}

// FirstIndex implements raft.Storage.
func (ms *memStorage) FirstIndex() (uint64, error) { return ms.firstIndex(), nil }

func (ms *memStorage) firstIndex() uint64 { return ms.ents[0].Index + 1 }

// Snapshot implements raft.Storage. The snapshot returned shares its data
// and configuration: nobody modifies them once made or received.
func (ms *memStorage) Snapshot() (pb.Snapshot, error) {
	return ms.snapshot, nil
}

// ApplySnapshot overwrites the contents of this storage with those of the
// given snapshot, kept as it is.
func (ms *memStorage) ApplySnapshot(snap pb.Snapshot) error {
	// handle check for old snapshot being applied
	msIndex := ms.snapshot.Metadata.Index
	snapIndex := snap.Metadata.Index
	if msIndex >= snapIndex {
		return raft.ErrSnapOutOfDate
	}
	ms.snapshot = snap
	ms.ents = []pb.Entry{{Term: snap.Metadata.Term, Index: snap.Metadata.Index}}
	return nil
}

// CreateSnapshot makes a snapshot at index i with configuration cs (nil:
// the last one's) and data, both kept as they are, and returns it.
func (ms *memStorage) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (pb.Snapshot, error) {
	if i <= ms.snapshot.Metadata.Index {
		return pb.Snapshot{}, raft.ErrSnapOutOfDate
	}
	offset := ms.ents[0].Index
	if i > ms.lastIndex() {
		panic(fmt.Sprintf("snapshot %d is out of bound lastindex(%d)", i, ms.lastIndex()))
	}
	ms.snapshot.Metadata.Index = i
	ms.snapshot.Metadata.Term = ms.ents[i-offset].Term
	if cs != nil {
		ms.snapshot.Metadata.ConfState = *cs
	}
	ms.snapshot.Data = data
	return ms.snapshot, nil
}

// Compact discards the entries before compactIndex.
func (ms *memStorage) Compact(compactIndex uint64) error {
	offset := ms.ents[0].Index
	if compactIndex <= offset {
		return raft.ErrCompacted
	}
	if compactIndex > ms.lastIndex() {
		panic(fmt.Sprintf("compact %d is out of bound lastindex(%d)", compactIndex, ms.lastIndex()))
	}
	i := compactIndex - offset
	// NB: allocate a new slice instead of reusing the old ms.ents. Entries in
	// ms.ents are immutable, and can be referenced from outside memStorage
	// through slices returned by ms.Entries().
	ents := make([]pb.Entry, 1, uint64(len(ms.ents))-i)
	ents[0] = pb.Entry{Index: ms.ents[i].Index, Term: ms.ents[i].Term}
	ents = append(ents, ms.ents[i+1:]...)
	ms.ents = ents
	return nil
}

// Append appends entries, which must be contiguous, truncating the log
// they overwrite.
func (ms *memStorage) Append(entries []pb.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	first := ms.firstIndex()
	last := entries[0].Index + uint64(len(entries)) - 1
	// shortcut if there is no new entry.
	if last < first {
		return nil
	}
	// truncate compacted entries
	if first > entries[0].Index {
		entries = entries[first-entries[0].Index:]
	}
	offset := entries[0].Index - ms.ents[0].Index
	switch {
	case uint64(len(ms.ents)) > offset:
		// NB: full slice expression protects ms.ents at index >= offset from
		// rewrites, as they may still be referenced from outside memStorage.
		ms.ents = append(ms.ents[:offset:offset], entries...)
	case uint64(len(ms.ents)) == offset:
		ms.ents = append(ms.ents, entries...)
	default:
		panic(fmt.Sprintf("missing log entry [last: %d, append at: %d]", ms.lastIndex(), entries[0].Index))
	}
	return nil
}
