package badgerwal

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// txnWriter stages chunked records in a Badger transaction. Reads through
// it see the transaction's own earlier writes.
type txnWriter struct {
	txn *badger.Txn
	// arena is room for the values of this transaction (alloc): Badger
	// holds them until the commit, which copies them.
	arena []byte
	// j, when set, journals every operation (journal.go).
	j *journal
}

// Arena sizes: the first block, and the largest a Log keeps between
// transactions (a transaction that wrote more, a snapshot's, leaves its
// room to the collector).
const (
	minArena = 64 << 10
	maxArena = 4 << 20
)

// alloc returns n bytes of the transaction's arena. A full block is left
// to the values already in it and a new one, twice as large, begun.
func (w *txnWriter) alloc(n int) []byte {
	if cap(w.arena)-len(w.arena) < n {
		w.arena = make([]byte, 0, max(n, 2*cap(w.arena), minArena))
	}
	at := len(w.arena)
	w.arena = w.arena[:at+n]
	return w.arena[at : at+n : at+n]
}

func (w *txnWriter) set(k, v []byte) error {
	if err := w.txn.Set(k, v); err != nil {
		return badgerErr(err)
	}
	if w.j != nil {
		w.j.set(k, v)
	}
	return nil
}

func (w *txnWriter) del(k []byte) error {
	if err := w.txn.Delete(k); err != nil {
		return badgerErr(err)
	}
	if w.j != nil {
		w.j.del(k)
	}
	return nil
}

// putChunks writes payload under base, assuming no chunk is stored there.
func (w *txnWriter) putChunks(base, payload []byte) error {
	return w.putValues(base, encodeChunks(base, payload))
}

// putValues writes the chunk values vs (encodeChunks) under base.
func (w *txnWriter) putValues(base []byte, vs [][]byte) error {
	for c, v := range vs {
		if err := w.set(chunkKey(base, uint32(c)), v); err != nil {
			return err
		}
	}
	return nil
}

// putRecord replaces the record at base, deleting any stale chunk.
func (w *txnWriter) putRecord(base, payload []byte) error {
	if err := w.deleteRecord(base); err != nil {
		return err
	}
	return w.putChunks(base, payload)
}

// deleteRecord deletes every chunk of the record at base. It reads the
// chunk count from chunk 0 (a point lookup) and scans only when chunk 0 is
// unreadable.
func (w *txnWriter) deleteRecord(base []byte) error {
	item, err := w.txn.Get(chunkKey(base, 0))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	n := uint32(0)
	if err == nil {
		_ = item.Value(func(v []byte) error {
			if len(v) >= headerLen {
				n = binary.BigEndian.Uint32(v[5:9])
			}
			return nil
		})
	}
	if n == 0 || n > maxChunks {
		keys := w.keys(base, nil, func(k []byte) bool { return len(k) == len(base)+chunkNumLen })
		for _, k := range keys {
			if err := w.del(k); err != nil {
				return err
			}
		}
		return nil
	}
	for c := range n {
		if err := w.del(chunkKey(base, c)); err != nil {
			return err
		}
	}
	return nil
}

// keys collects the keys with the given prefix, from seek on, while keep
// returns true.
func (w *txnWriter) keys(prefix, seek []byte, keep func(k []byte) bool) [][]byte {
	it := w.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	if seek == nil {
		seek = prefix
	}
	var out [][]byte
	for it.Seek(seek); it.ValidForPrefix(prefix); it.Next() {
		k := it.Item().KeyCopy(nil)
		if !keep(k) {
			break
		}
		out = append(out, k)
	}
	return out
}

// record reads the record at base by point lookups; ok is false if chunk 0
// is not stored.
func (w *txnWriter) record(base []byte) (payload []byte, ok bool, reason string) {
	a := assembler{base: base}
	for c := uint32(0); c == 0 || a.next < a.count; c++ {
		item, err := w.txn.Get(chunkKey(base, c))
		if errors.Is(err, badger.ErrKeyNotFound) && c == 0 {
			return nil, false, ""
		}
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil, true, a.done()
		}
		var why string
		if err == nil {
			err = item.Value(func(v []byte) error { why = a.add(c, v); return nil })
		}
		if err != nil {
			return nil, true, "unreadable value: " + err.Error()
		}
		if why != "" {
			return nil, true, why
		}
	}
	return a.payload, true, ""
}

// readRecord reads and checks every chunk of the record at base.
func readRecord(txn *badger.Txn, base []byte) (payload []byte, ok bool, reason string) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: base, PrefetchValues: false})
	defer it.Close()
	a := assembler{base: base}
	for it.Seek(base); it.ValidForPrefix(base); it.Next() {
		item := it.Item()
		k := item.Key()
		if len(k) != len(base)+chunkNumLen {
			return nil, true, "malformed key"
		}
		var why string
		err := item.Value(func(v []byte) error {
			why = a.add(binary.BigEndian.Uint32(k[len(base):]), v)
			return nil
		})
		if err != nil {
			return nil, true, "unreadable value: " + err.Error()
		}
		if why != "" {
			return nil, true, why
		}
	}
	if a.next == 0 {
		return nil, false, ""
	}
	if why := a.done(); why != "" {
		return nil, true, why
	}
	return a.payload, true, ""
}

// partMeta caches what the write path needs to know about one partition's
// stored log, so that an append reads nothing from Badger.
type partMeta struct {
	snapIdx uint64 // stored snapshot index, 0 if none
	first   uint64 // first stored entry index, 0 if no entries
	last    uint64 // last stored entry index, 0 if no entries
}

// lastIndex is wal.PartStore.LastIndex over the cached values.
func (m partMeta) lastIndex() uint64 {
	if m.last == 0 {
		return m.snapIdx
	}
	return m.last
}

// drop updates m for dropping the entries with from <= Index < to (to == 0:
// no bound). It reports whether any stored entry is in that range; ok is
// false when the drop punches a hole, which the cache cannot describe.
func (m *partMeta) drop(from, to uint64) (any, ok bool) {
	hi := m.last
	if to != 0 && to-1 < hi {
		hi = to - 1
	}
	lo := max(from, m.first)
	if m.first == 0 || lo > hi {
		return false, true
	}
	switch {
	case lo == m.first && hi == m.last:
		m.first, m.last = 0, 0
	case lo == m.first:
		m.first = hi + 1
	case hi == m.last:
		m.last = lo - 1
	default:
		return true, false
	}
	return true, true
}

// txnPart implements wal.PartStore for one partition over a transaction. Its
// partMeta is read from Badger once per process and then kept up to date by
// the writes; Log.Append publishes it only if the transaction commits.
type txnPart struct {
	w    *txnWriter
	p    uint32
	meta *partMeta // nil until loaded
	// stagedIdx is the index of a snapshot whose data is staged
	// (split.go): PutSnapshot then points at it.
	stagedIdx uint64
}

// load returns the partition's partMeta, reading it on first use.
func (t *txnPart) load() (*partMeta, error) {
	if t.meta != nil {
		return t.meta, nil
	}
	m := &partMeta{}
	var err error
	if m.snapIdx, err = t.readSnapIndex(); err != nil {
		return nil, err
	}
	if m.first, m.last, err = t.readEntryRange(); err != nil {
		return nil, err
	}
	t.meta = m
	return m, nil
}

func (t *txnPart) readSnapIndex() (uint64, error) {
	b, ok, why := t.w.record(partKey(t.p, kindSnapMeta))
	if why != "" {
		return 0, corruptPart(wal.RecordSnapshot, t.p, 0, "%s", why)
	}
	if !ok {
		return 0, nil
	}
	var s raftpb.Snapshot
	if err := s.Unmarshal(b); err != nil {
		return 0, corruptPart(wal.RecordSnapshot, t.p, 0, "undecodable: %v", err)
	}
	return s.Metadata.Index, nil
}

// readEntryRange returns the first and last stored entry indexes (0, 0 if
// none) from the first and last keys.
func (t *txnPart) readEntryRange() (first, last uint64, err error) {
	prefix := partKey(t.p, kindEntry)
	edge := func(reverse bool) ([]byte, error) {
		it := t.w.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: reverse})
		defer it.Close()
		seek := prefix
		if reverse {
			seek = append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, 8+chunkNumLen)...)
		}
		if it.Seek(seek); !it.ValidForPrefix(prefix) {
			return nil, nil
		}
		k := it.Item().KeyCopy(nil)
		if len(k) != entryKeyLen+chunkNumLen {
			return nil, corruptPart(wal.RecordEntry, t.p, 0, "malformed key %x", k)
		}
		return k, nil
	}
	lo, err := edge(false)
	if err != nil || lo == nil {
		return 0, 0, err
	}
	hi, err := edge(true)
	if err != nil {
		return 0, 0, err
	}
	return binary.BigEndian.Uint64(lo[partKeyLen:entryKeyLen]), binary.BigEndian.Uint64(hi[partKeyLen:entryKeyLen]), nil
}

func (t *txnPart) SnapIndex() (uint64, error) {
	m, err := t.load()
	if err != nil {
		return 0, err
	}
	return m.snapIdx, nil
}

func (t *txnPart) Term(i uint64) (uint64, bool, error) {
	m, err := t.load()
	if err != nil || m.first == 0 || i < m.first || i > m.last {
		return 0, false, err
	}
	b, ok, why := t.w.record(entryKey(t.p, i))
	if why != "" {
		return 0, false, corruptPart(wal.RecordEntry, t.p, i, "%s", why)
	}
	if !ok {
		return 0, false, nil
	}
	var e raftpb.Entry
	if err := e.Unmarshal(b); err != nil {
		return 0, false, corruptPart(wal.RecordEntry, t.p, i, "undecodable: %v", err)
	}
	return e.Term, true, nil
}

func (t *txnPart) LastIndex() (uint64, error) {
	m, err := t.load()
	if err != nil {
		return 0, err
	}
	return m.lastIndex(), nil
}

func (t *txnPart) DropEntries(from, to uint64) error {
	m, err := t.load()
	if err != nil {
		return err
	}
	// Seek past the tombstones of earlier drops: start at the first entry.
	seek := entryKey(t.p, max(from, m.first))
	found, ok := m.drop(from, to)
	if !ok {
		t.meta = nil // re-read after the deletes below
	}
	if !found {
		return nil
	}
	prefix := partKey(t.p, kindEntry)
	keys := t.w.keys(prefix, seek, func(k []byte) bool {
		if len(k) < entryKeyLen {
			return true // malformed: drop it with the rest
		}
		return to == 0 || binary.BigEndian.Uint64(k[partKeyLen:entryKeyLen]) < to
	})
	for _, k := range keys {
		if err := t.w.del(k); err != nil {
			return err
		}
	}
	return nil
}

func (t *txnPart) PutSnapshot(s raftpb.Snapshot) error {
	meta := s
	meta.Data = nil
	m, err := t.load()
	if err != nil {
		return err
	}
	if err := t.w.putRecord(partKey(t.p, kindSnapMeta), marshal(&meta)); err != nil {
		return err
	}
	m.snapIdx = s.Metadata.Index
	if t.stagedIdx != 0 && t.stagedIdx == m.snapIdx {
		if err := t.w.deleteRecord(partKey(t.p, kindSnapData)); err != nil {
			return err
		}
		return t.w.dropStaged(t.p, m.snapIdx)
	}
	if err := t.w.dropStaged(t.p, 0); err != nil {
		return err
	}
	return t.w.putRecord(partKey(t.p, kindSnapData), s.Data)
}

// Clear deletes every record of the partition: hard state, snapshot
// metadata and data, staged snapshot data and entries.
func (t *txnPart) Clear() error {
	prefix := binary.BigEndian.AppendUint32([]byte{prefixPart}, t.p)
	for _, k := range t.w.keys(prefix, nil, func([]byte) bool { return true }) {
		if err := t.w.del(k); err != nil {
			return err
		}
	}
	t.meta, t.stagedIdx = &partMeta{}, 0
	return nil
}

func (t *txnPart) PutHardState(hs raftpb.HardState) error {
	return t.w.putRecord(partKey(t.p, kindHardState), marshal(&hs))
}

func (t *txnPart) PutEntries(es []raftpb.Entry) error {
	m, err := t.load()
	if err != nil {
		return err
	}
	if m.first == 0 {
		m.first = es[0].Index
	}
	m.last = es[len(es)-1].Index
	for _, e := range es {
		base := entryKey(t.p, e.Index)
		if err := t.w.putValues(base, encodeMessage(base, &e, t.w.alloc)); err != nil {
			return err
		}
	}
	return nil
}
