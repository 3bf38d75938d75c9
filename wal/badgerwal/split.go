package badgerwal

import (
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// A wal.Batch that does not fit in one Badger transaction (15% of the
// memtable) is written in several, in an order that leaves a valid log
// after a crash between any two of them: every state in between is a
// prefix of the batch's writes, as if the crash had lost its unsynced
// tail, and nothing of the batch was acknowledged before Append returned.
//
//  1. Snapshot data is staged under its own key (p <part> D <index>, see
//     stagedKey) in as many transactions as it takes; the stored snapshot
//     still names the old data.
//  2. One transaction installs the snapshot's metadata (pointing at the
//     staged data, the old data record deleted) with a hard state that
//     commits the snapshot's index: Raft refuses a commit below its
//     snapshot at restart.
//  3. Entries follow in transactions of whole entries, in index order.
//  4. The hard state and compaction come last, then the outbox and meta
//     records, whole records per transaction.
//
// A drop too large for one transaction (splitDrop) goes first, in steps
// that each leave a loadable log: the hard state's commit comes down to
// the snapshot index, entries are deleted from the last one down, and one
// last transaction deletes the hard state and the snapshot. A crash in
// between leaves a shorter log of a partition the peer had left; it is
// left again as any partition held but not placed here.
//
// Each transaction is synced before the next (Badger does not fsync a
// memtable it rotates away from, so a later one could survive an earlier
// one). One record larger than a transaction (an entry, an outbox or meta
// record) is still wal.ErrBatchTooBig: MaxRecord says how large one may be.

// kindSnapStaged is the key kind of snapshot data staged by index.
const kindSnapStaged = 'D'

// stagedKey returns the base key of partition p's snapshot data staged for
// the snapshot at index i.
func stagedKey(p uint32, i uint64) []byte {
	return binary.BigEndian.AppendUint64(partKey(p, kindSnapStaged), i)
}

// recordCost estimates what a record of n payload bytes under a key of
// keyLen bytes counts against a transaction's size.
func recordCost(keyLen, n int) int64 {
	chunks := int64(chunkCount(n))
	return int64(n) + chunks*int64(keyLen+chunkNumLen+headerLen+32)
}

// MaxRecord is the largest record (one Raft entry, outbox or meta record)
// an Append can write: 90% of one transaction.
func (b *Log) MaxRecord() int {
	return int(b.txnMax*9/10) - 64<<10
}

// txnDo runs fn in one read-write transaction and commits it, publishing
// the partition metadata fn changed.
//
// With a journal the transaction is framed as its next record and Badger
// commits it without waiting: Sync makes the record durable, and the next
// transaction (NewTransaction) waits for the commit before it reads.
func (b *Log) txnDo(fn func(w *txnWriter, part func(uint32) *txnPart) error) error {
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	staged := map[uint32]*txnPart{}
	w := &txnWriter{txn: txn, arena: b.takeArena(), j: b.j}
	if b.j != nil {
		b.j.begin()
	}
	if err := fn(w, b.partFor(w, staged)); err != nil {
		return err
	}
	if b.j == nil {
		if err := txn.Commit(); err != nil {
			return badgerErr(err)
		}
		b.giveArena(w.arena)
	} else {
		arena := w.arena
		b.commits.Add(1)
		txn.CommitWith(func(err error) {
			if err != nil {
				b.cbMu.Lock()
				if b.asyncErr == nil {
					b.asyncErr = badgerErr(err)
				}
				b.cbMu.Unlock()
			}
			b.giveArena(arena)
			b.commits.Done()
		})
		b.j.commit()
	}
	for p, tp := range staged {
		if tp.meta == nil {
			delete(b.parts, p)
		} else {
			b.parts[p] = *tp.meta
		}
	}
	return nil
}

// txnSync is txnDo followed by a sync (see the ordering note above).
func (b *Log) txnSync(fn func(w *txnWriter, part func(uint32) *txnPart) error) error {
	if err := b.txnDo(fn); err != nil {
		return err
	}
	return b.durable()
}

// takeArena returns the room lent back by the last commit (nil if it has
// not finished: alloc makes new room).
func (b *Log) takeArena() []byte {
	b.cbMu.Lock()
	defer b.cbMu.Unlock()
	a := b.arena
	b.arena = nil
	return a[:0]
}

// giveArena lends a committed transaction's room to the next: Badger
// copied every value into its memtable and its log file, and reads none
// of them again. Room grown past maxArena is left to the collector.
func (b *Log) giveArena(a []byte) {
	if cap(a) > maxArena {
		return
	}
	b.cbMu.Lock()
	b.arena = a[:0]
	b.cbMu.Unlock()
}

// appendSplit writes batch in several transactions (see above).
func (b *Log) appendSplit(batch *wal.Batch) error {
	for i := range batch.Updates {
		if err := b.splitUpdate(&batch.Updates[i]); err != nil {
			return err
		}
	}
	var items []func(w *txnWriter) error
	var costs []int64
	for _, r := range batch.OutboxPut {
		items = append(items, func(w *txnWriter) error { return w.putRecord(namedKey(prefixOutbox, r.Key), r.Value) })
		costs = append(costs, recordCost(5+len(r.Key), len(r.Value)))
	}
	for _, k := range batch.OutboxDel {
		items = append(items, func(w *txnWriter) error { return w.deleteRecord(namedKey(prefixOutbox, k)) })
		costs = append(costs, recordCost(5+len(k), 0))
	}
	for _, r := range batch.MetaPut {
		items = append(items, func(w *txnWriter) error { return w.putRecord(namedKey(prefixMeta, r.Key), r.Value) })
		costs = append(costs, recordCost(5+len(r.Key), len(r.Value)))
	}
	return b.packed(costs, func(lo, hi int, w *txnWriter, _ func(uint32) *txnPart) error {
		for _, it := range items[lo:hi] {
			if err := it(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// packed calls write for consecutive runs [lo, hi) of items whose costs
// fit in half a transaction (an item costing more goes alone), each in a
// transaction of its own, synced.
func (b *Log) packed(costs []int64, write func(lo, hi int, w *txnWriter, part func(uint32) *txnPart) error) error {
	budget := b.txnMax / 2
	for lo := 0; lo < len(costs); {
		hi, sum := lo+1, costs[lo]
		for hi < len(costs) && sum+costs[hi] <= budget {
			sum += costs[hi]
			hi++
		}
		err := b.txnSync(func(w *txnWriter, part func(uint32) *txnPart) error { return write(lo, hi, w, part) })
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// splitUpdate writes one partition's update in several transactions.
func (b *Log) splitUpdate(u *wal.Update) error {
	p := u.Partition
	if err := wal.CheckEntries(p, u.Entries); err != nil {
		return err
	}
	if u.Drop {
		if err := b.splitDrop(p); err != nil {
			return err
		}
	}
	if !raft.IsEmptySnap(u.Snapshot) {
		if err := b.splitSnapshot(p, u.Snapshot, u.HardState); err != nil {
			return err
		}
	}
	costs := make([]int64, len(u.Entries))
	for i, e := range u.Entries {
		costs[i] = recordCost(entryKeyLen, e.Size())
	}
	err := b.packed(costs, func(lo, hi int, _ *txnWriter, part func(uint32) *txnPart) error {
		return wal.ApplyUpdate(part(p), &wal.Update{Partition: p, Entries: u.Entries[lo:hi]})
	})
	if err != nil {
		return err
	}
	rest := wal.Update{Partition: p, HardState: u.HardState, Compact: u.Compact}
	return b.txnSync(func(_ *txnWriter, part func(uint32) *txnPart) error { return wal.ApplyUpdate(part(p), &rest) })
}

// splitDrop deletes partition p's records in several transactions (see
// the note at the top).
func (b *Log) splitDrop(p uint32) error {
	err := b.txnSync(func(w *txnWriter, part func(uint32) *txnPart) error {
		tp := part(p)
		si, err := tp.SnapIndex()
		if err != nil {
			return err
		}
		raw, ok, why := w.record(partKey(p, kindHardState))
		if why != "" {
			return corruptPart(wal.RecordHardState, p, 0, "%s", why)
		}
		var hs raftpb.HardState
		if !ok || hs.Unmarshal(raw) != nil || hs.Commit <= si {
			return nil // an undecodable hard state goes with the rest
		}
		hs.Commit = si
		return tp.PutHardState(hs)
	})
	if err != nil {
		return err
	}
	for n, done := uint64(1024), false; !done; {
		err := b.txnSync(func(_ *txnWriter, part func(uint32) *txnPart) error {
			tp := part(p)
			m, err := tp.load()
			if err != nil || m.first == 0 {
				done = err == nil
				return err
			}
			from := m.first
			if m.last-m.first >= n {
				from = m.last - n + 1
			}
			return tp.DropEntries(from, 0)
		})
		if errors.Is(err, wal.ErrBatchTooBig) && n > 1 {
			n /= 2
			continue
		}
		if err != nil {
			return err
		}
	}
	return b.txnSync(func(_ *txnWriter, part func(uint32) *txnPart) error { return part(p).Clear() })
}

// splitSnapshot stages a snapshot's data, then installs it with a hard
// state that commits its index (steps 1 and 2).
func (b *Log) splitSnapshot(p uint32, snap raftpb.Snapshot, hs raftpb.HardState) error {
	idx := snap.Metadata.Index
	var stored uint64
	err := b.txnDo(func(_ *txnWriter, part func(uint32) *txnPart) error {
		var err error
		stored, err = part(p).SnapIndex()
		return err
	})
	if err != nil || idx <= stored {
		return err // an older snapshot changes nothing (applySnapshot)
	}
	if err := b.stage(stagedKey(p, idx), snap.Data); err != nil {
		return err
	}
	var first raftpb.HardState
	if !raft.IsEmptyHardState(hs) {
		first = hs
		first.Commit = idx // the entries after idx are not written yet
	}
	return b.txnSync(func(_ *txnWriter, part func(uint32) *txnPart) error {
		tp := part(p)
		tp.stagedIdx = idx
		return wal.ApplyUpdate(tp, &wal.Update{Partition: p, Snapshot: snap, HardState: first})
	})
}

// stage writes payload's chunks under base in as many transactions as it
// takes, after deleting whatever a crashed attempt left there.
func (b *Log) stage(base, payload []byte) error {
	if err := b.txnDo(func(w *txnWriter, _ func(uint32) *txnPart) error { return w.deleteRecord(base) }); err != nil {
		return err
	}
	chunks := encodeChunks(base, payload)
	costs := make([]int64, len(chunks))
	for i, c := range chunks {
		costs[i] = int64(len(c) + len(base) + chunkNumLen + 32)
	}
	return b.packed(costs, func(lo, hi int, w *txnWriter, _ func(uint32) *txnPart) error {
		for c := lo; c < hi; c++ {
			if err := w.set(chunkKey(base, uint32(c)), chunks[c]); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropStaged deletes partition p's staged snapshot data but that of index
// keep (0: all of it).
func (w *txnWriter) dropStaged(p uint32, keep uint64) error {
	prefix := partKey(p, kindSnapStaged)
	var keepKey []byte
	if keep > 0 {
		keepKey = stagedKey(p, keep)
	}
	keys := w.keys(prefix, nil, func([]byte) bool { return true })
	for _, k := range keys {
		if keepKey != nil && len(k) == len(keepKey)+chunkNumLen && string(k[:len(keepKey)]) == string(keepKey) {
			continue
		}
		if err := w.del(k); err != nil {
			return err
		}
	}
	return nil
}

// loadStaged reads the staged data of partition p's snapshot at index i.
func loadStaged(txn *badger.Txn, p uint32, i uint64) ([]byte, error) {
	data, ok, why := readRecord(txn, stagedKey(p, i))
	switch {
	case why != "":
		return nil, corruptPart(wal.RecordSnapshot, p, i, "staged data: %s", why)
	case !ok:
		return nil, corruptPart(wal.RecordSnapshot, p, i, "metadata stored, data not")
	}
	return data, nil
}
