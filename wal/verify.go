package wal

import (
	"fmt"
	"strconv"
)

// Record kinds named in a CorruptError.
const (
	RecordEntry     = "entry"
	RecordHardState = "hard state"
	RecordSnapshot  = "snapshot"
	RecordOutbox    = "outbox"
	RecordMeta      = "meta"
)

// CorruptError is the typed form of ErrCorrupt: it says which stored record
// failed which check. errors.Is(err, ErrCorrupt) holds for it.
type CorruptError struct {
	// Record is what is corrupt: "entry", "hard state", "snapshot", "outbox"
	// or "meta".
	Record string
	// Partition is the ring partition of an entry, hard state or snapshot.
	Partition uint32
	// Index is the Raft index concerned (the entry, or the commit index), or
	// 0 when the record has none.
	Index uint64
	// Key is the outbox or meta key, or "" for a partition record.
	Key string
	// Reason says which check failed.
	Reason string
}

// Error implements error.
func (e *CorruptError) Error() string {
	where := "partition " + strconv.FormatUint(uint64(e.Partition), 10)
	if e.Record == RecordOutbox || e.Record == RecordMeta {
		where = "key " + strconv.Quote(e.Key)
	}
	if e.Index > 0 {
		where += " index " + strconv.FormatUint(e.Index, 10)
	}
	return fmt.Sprintf("%s: %s %s: %s", ErrCorrupt, e.Record, where, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// corruptPart builds the CorruptError of a partition record.
func corruptPart(rec string, p uint32, i uint64, format string, args ...any) *CorruptError {
	return &CorruptError{Record: rec, Partition: p, Index: i, Reason: fmt.Sprintf(format, args...)}
}

// VerifyState checks the invariants of a loaded partition:
//
//  1. every entry's index is above the snapshot index (the snapshot dropped
//     the older ones);
//  2. entries are contiguous and the first follows the snapshot (index
//     snapshot+1, or 1 without a snapshot);
//  3. the hard state's commit index is at most the last index, counting the
//     snapshot index when there are no entries.
//
// A violation is a *CorruptError for partition p. Every Log's Load ends
// with it, as NewStorage starts with it.
func VerifyState(p uint32, ps *PartitionState) error {
	snapIdx := ps.Snapshot.Metadata.Index
	want := snapIdx + 1
	for _, e := range ps.Entries {
		i := e.Index
		if i <= snapIdx {
			return corruptPart(RecordEntry, p, i, "entry at or below snapshot index %d was not dropped", snapIdx)
		}
		if i != want {
			return corruptPart(RecordEntry, p, i, "gap in log: want index %d", want)
		}
		want++
	}
	last := want - 1
	if c := ps.HardState.Commit; c > last {
		return corruptPart(RecordHardState, p, c, "commit index beyond last index %d", last)
	}
	return nil
}
