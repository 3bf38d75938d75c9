package wal

import (
	"errors"

	"go.etcd.io/raft/v3/raftpb"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrCorrupt reports stored data that fails a check on Load: a checksum
	// mismatch, an undecodable or truncated value, a gap in the log, an entry
	// that a snapshot should have dropped, or a commit index beyond the log.
	// The error that wraps it is a *CorruptError naming the partition and index.
	ErrCorrupt = errors.New("wal: corrupt log")
	// ErrInvalidUpdate reports an Update that cannot be applied: entries that
	// are not contiguous, or that leave a gap after the stored last index.
	// The whole Batch is rejected and nothing is written.
	ErrInvalidUpdate = errors.New("wal: invalid update")
	// ErrBatchTooBig reports a Batch, or one record in it, larger than the
	// Log can write (for wal/badgerwal: a record over its MaxRecord).
	// Nothing is written.
	ErrBatchTooBig = errors.New("wal: batch too big")
	// ErrClosed reports a call on a closed Log.
	ErrClosed = errors.New("wal: closed")
)

// Update is what one partition's Raft Ready asks to persist. Its parts are
// applied in this order: Drop, Snapshot, HardState, Entries, Compact.
//
// The types are those of go.etcd.io/raft/v3 v3.6's Ready (values, as
// raftpb's are). Nobody modifies an entry's or a snapshot's bytes once
// they are made, so a Log may keep them as they are.
type Update struct {
	// Partition is the ring partition whose Raft group produced the Ready.
	Partition uint32
	// Drop, when true, deletes everything stored for the partition (hard
	// state, snapshot, entries) before the rest of the Update applies: the
	// peer left the partition's replicas. After a drop alone the partition
	// loads empty and Partitions omits it; a later Update (in the same
	// Batch or another) starts it again from nothing.
	Drop bool
	// HardState replaces the stored hard state unless
	// raft.IsEmptyHardState.
	HardState raftpb.HardState
	// Snapshot, unless raft.IsEmptySnap, replaces the stored snapshot
	// when its index is above the stored one (an older one is ignored, as
	// raft.MemoryStorage.ApplySnapshot does). If the log holds the entry at
	// the snapshot's index with the snapshot's term, entries up to that index
	// are dropped and later ones kept; otherwise the snapshot replaces the
	// whole log (Raft paper §7) and every stored entry is dropped.
	Snapshot raftpb.Snapshot
	// Entries are appended. They must be contiguous; entries at or below the
	// snapshot index are skipped; an entry whose index is at or below the
	// stored last index replaces the stored suffix from that index on (Raft
	// log truncation). The first kept entry must not leave a gap.
	Entries []raftpb.Entry
	// Compact, when > 0, drops entries with Index < Compact, but never past
	// the stored snapshot (at most entries with Index <= snapshot index), so
	// the log stays loadable: the first kept entry always follows the
	// snapshot. Since a stored snapshot already drops those entries, Compact
	// only repairs logs written by older code; it mirrors
	// raft.MemoryStorage.Compact for Storage.Apply.
	Compact uint64
}

// Record is one key/value pair of the outbox or the meta space.
type Record struct {
	// Key is the record's key; any bytes.
	Key string
	// Value is the record's value; the Log copies it.
	Value []byte
}

// Batch is everything one iteration of a peer's loop persists: all
// partitions' updates, outbox changes and meta changes, written atomically.
// Within a Batch, Updates apply in order, then OutboxPut, then OutboxDel
// (so a key both put and deleted ends deleted), then MetaPut.
type Batch struct {
	// Updates are the partitions' Raft updates, applied in order.
	Updates []Update
	// OutboxPut adds or replaces outbox records.
	OutboxPut []Record
	// OutboxDel deletes outbox records by key; a missing key is not an error.
	OutboxDel []string
	// MetaPut adds or replaces meta records (identity, cluster settings).
	MetaPut []Record
}

// PartitionState is what Load returns for one partition.
type PartitionState struct {
	// HardState is the stored hard state, empty if none was stored.
	HardState raftpb.HardState
	// Snapshot is the stored snapshot, empty if none was stored.
	Snapshot raftpb.Snapshot
	// Entries are contiguous and start right after the snapshot index (at 1
	// without a snapshot).
	Entries []raftpb.Entry
}

// Log is the durable log storage of one peer. Implementations: *Memory here
// and *badgerwal.Log in wal/badgerwal. Methods are safe for concurrent use, but a peer calls them from
// its one loop goroutine.
type Log interface {
	// Append writes b atomically (all or nothing). It is not necessarily
	// durable until the next Sync returns.
	Append(b *Batch) error
	// Sync makes everything appended so far durable (one fsync).
	Sync() error
	// Partitions lists the partitions with any stored state, sorted.
	Partitions() ([]uint32, error)
	// Load reads and verifies one partition. A partition with no state
	// loads as an empty PartitionState.
	Load(p uint32) (PartitionState, error)
	// Outbox returns every outbox record, sorted by key.
	Outbox() ([]Record, error)
	// Meta returns a meta record's value and whether it exists.
	Meta(key string) ([]byte, bool, error)
	// Close releases the Log. Unsynced appends may be lost.
	Close() error
}

// Compile-time check that Memory satisfies Log.
var _ Log = (*Memory)(nil)
