package badgerwal

import (
	"context"

	"github.com/dgraph-io/badger/v4"

	"github.com/needle-mesh/needle/wal"
)

// Compaction without Badger's compactors.
//
// Badger's compactors (Options.NumCompactors) each poll the LSM tree every
// 50 ms whether anything was written or not: two of them were four fifths
// of an idle peer's CPU. The Log opens Badger with none and compacts in
// one goroutine of its own, woken by Append (the only writer): when a
// level is over Badger's own threshold (a score of 1: L0 holding
// NumLevelZeroTables tables, a level above its target size), it runs
// DB.Flatten, Badger's public way to run compactions, which compacts L0
// into the base level and each level into the next until one level holds
// everything. Compacting into the last level drops the deleted keys and
// their tombstones, so the space of a truncated Raft log is reclaimed as
// with the compactors, which also waited for a score of 1.
//
// Memtables are flushed to L0 in the background after the Append that
// filled them, so L0 can only grow while Appends come; they wake the
// goroutine every sixteenth of a memtable (a look at the levels costs a
// few microseconds: not after every Append of a busy loop). L0 reaches
// Badger's stall (NumLevelZeroTablesStall, 15 tables, where writes wait
// for a compaction) only if a compaction is slower than ten memtables of
// writes, as with the compactors. Without writes nothing changes and
// nothing runs: an idle peer's database costs no wakeups.

// kickCompaction wakes compactLoop; a wakeup already pending absorbs it.
func (b *Log) kickCompaction() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// compactLoop compacts the database when a write asks and the LSM tree
// needs it, until ctx is done.
func (b *Log) compactLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		if !needsCompaction(b.db.Levels()) {
			continue
		}
		if err := b.db.Flatten(1); err != nil {
			b.log.Warn("compaction failed", "err", err)
			continue
		}
		b.compactions.Add(1)
	}
}

// needsCompaction reports whether a level is over Badger's compaction
// threshold in a way Flatten acts on: a score above 1, or an L0 at its
// threshold over a deeper non-empty level (Flatten leaves a lone level
// alone at a score of exactly 1: L0 then waits for one more table).
func needsCompaction(levels []badger.LevelInfo) bool {
	deeper := false
	for _, l := range levels[1:] {
		if l.NumTables > 0 {
			deeper = true
		}
	}
	for _, l := range levels {
		if l.Score > 1 || l.Level == 0 && l.Score >= 1 && deeper {
			return true
		}
	}
	return false
}

// batchBytes is about what batch writes: its entries, snapshots and
// records (keys and hard states are small next to them).
func batchBytes(batch *wal.Batch) int64 {
	n := 0
	for i := range batch.Updates {
		u := &batch.Updates[i]
		n += 64 + len(u.Snapshot.Data)
		for _, e := range u.Entries {
			n += 32 + len(e.Data)
		}
	}
	for _, r := range batch.OutboxPut {
		n += len(r.Key) + len(r.Value)
	}
	for _, r := range batch.MetaPut {
		n += len(r.Key) + len(r.Value)
	}
	return int64(n + 32*len(batch.OutboxDel))
}
