package wal

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Memory is the in-memory Log of the deterministic simulator. It keeps two
// states: what was appended (read by Load, Outbox, Meta) and what was synced.
// Crash drops the difference, as kill -9 followed by a power loss drops a
// real disk's unsynced page cache. Results never depend on map order.
//
// Entries are immutable once stored: Append keeps the batch's entries, and
// the caller must not modify them after (Raft does not). Entry slices may
// share a backing array between the two states and between clones, so a
// slice is only ever extended in place by the appended state at its own
// end, and every other copy of a slice header is capped at its length (see
// memState.clone).
type Memory struct {
	mu sync.Mutex
	// parts holds each partition's stored log, appended and synced: one
	// map lookup per update (a map of each state, and of the partitions
	// dirty, took four, and a walk of two maps at every Append and Sync:
	// 4% of the simulator's CPU). A partition that stores nothing in a
	// state is absent from it.
	parts map[uint32]*memSlot
	// dirty are the partitions Append changed since the last Sync (each
	// once, memSlot.dirty), so that Sync costs what changed, not the
	// whole state.
	dirty []*memSlot
	// cur is the outbox and metadata appended, synced those as of the
	// last Sync; Sync copies into synced what changed in cur since
	// (dirtyOut, dirtyMeta), Crash replaces cur with it.
	cur, synced memRecords
	dirtyOut    map[string]struct{}
	dirtyMeta   map[string]struct{}
	// scratch are Append's copies of the partitions it changes, of the
	// slots in scratchOf (memSlot.scratch indexes them), reused.
	scratch   []memPart
	scratchOf []*memSlot
}

// memSlot is one partition's log: as appended (cur) and as of the last
// Sync (synced).
type memSlot struct {
	cur, synced memPart
	dirty       bool // in Memory.dirty
	// scratch is 1 + the index of the partition's copy in Memory.scratch
	// during an Append, 0 otherwise.
	scratch int
}

// memRecords is one version of the outbox and the metadata.
type memRecords struct {
	outbox map[string][]byte
	meta   map[string][]byte
}

// memPart is one partition's stored log. Its values are never mutated, only
// replaced.
type memPart struct {
	hs   raftpb.HardState
	snap raftpb.Snapshot
	ents []raftpb.Entry
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	m := &Memory{parts: map[uint32]*memSlot{}, cur: newMemRecords(), synced: newMemRecords()}
	m.resetDirty()
	return m
}

func (m *Memory) resetDirty() {
	for _, sl := range m.dirty {
		sl.dirty = false
	}
	m.dirty = m.dirty[:0]
	m.dirtyOut = map[string]struct{}{}
	m.dirtyMeta = map[string]struct{}{}
}

func newMemRecords() memRecords {
	return memRecords{outbox: map[string][]byte{}, meta: map[string][]byte{}}
}

func (r memRecords) clone() memRecords {
	return memRecords{outbox: maps.Clone(r.outbox), meta: maps.Clone(r.meta)}
}

// capped is mp with its entry slice capped at its length, so that
// appending to either copy of a shared backing array reallocates instead
// of writing into it. Values are immutable and shared.
func capped(mp memPart) memPart {
	mp.ents = mp.ents[:len(mp.ents):len(mp.ents)]
	return mp
}

// Append implements Log. It applies b to a scratch copy of the touched
// partitions and publishes them only if every update applies.
func (m *Memory) Append(b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer func() {
		for _, sl := range m.scratchOf {
			sl.scratch = 0
		}
		clear(m.scratch) // what they point at is cur's, or garbage
		m.scratch = m.scratch[:0]
		clear(m.scratchOf)
		m.scratchOf = m.scratchOf[:0]
	}()
	for i := range b.Updates {
		u := &b.Updates[i]
		sl := m.parts[u.Partition]
		if sl == nil {
			// Stores nothing yet: an empty slot is as absent (Partitions
			// and Load skip it), should the batch be refused.
			sl = &memSlot{}
			m.parts[u.Partition] = sl
		}
		if sl.scratch == 0 {
			// Appends may write past cur's end in the shared backing
			// array; harmless if the batch is rejected, as no slice
			// header reaches there.
			m.scratch = append(m.scratch, sl.cur)
			m.scratchOf = append(m.scratchOf, sl)
			sl.scratch = len(m.scratch)
		}
		if err := ApplyUpdate(&m.scratch[sl.scratch-1], u); err != nil {
			return fmt.Errorf("wal: append: %w", err)
		}
	}
	for j, sl := range m.scratchOf {
		sl.cur = m.scratch[j]
		if !sl.dirty {
			sl.dirty = true
			m.dirty = append(m.dirty, sl)
		}
	}
	for _, r := range b.OutboxPut {
		m.cur.outbox[r.Key] = slices.Clone(r.Value)
		m.dirtyOut[r.Key] = struct{}{}
	}
	for _, k := range b.OutboxDel {
		delete(m.cur.outbox, k)
		m.dirtyOut[k] = struct{}{}
	}
	for _, r := range b.MetaPut {
		m.cur.meta[r.Key] = slices.Clone(r.Value)
		m.dirtyMeta[r.Key] = struct{}{}
	}
	return nil
}

// Sync implements Log: everything appended so far becomes durable.
func (m *Memory) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sl := range m.dirty {
		sl.synced = capped(sl.cur) // see capped
		sl.dirty = false
	}
	clear(m.dirty)
	m.dirty = m.dirty[:0]
	if len(m.dirtyOut) > 0 {
		copyKeys(m.synced.outbox, m.cur.outbox, m.dirtyOut)
		clear(m.dirtyOut) // kept for the next sync's keys
	}
	if len(m.dirtyMeta) > 0 {
		copyKeys(m.synced.meta, m.cur.meta, m.dirtyMeta)
		clear(m.dirtyMeta)
	}
	return nil
}

// copyKeys makes dst agree with src on keys (values are immutable, shared).
func copyKeys(dst, src map[string][]byte, keys map[string]struct{}) {
	for k := range keys {
		if v, ok := src[k]; ok {
			dst[k] = v
		} else {
			delete(dst, k)
		}
	}
}

// Crash drops everything appended since the last Sync. The Memory stays
// usable afterwards as the restarted peer's disk.
func (m *Memory) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sl := range m.parts {
		sl.cur = capped(sl.synced)
	}
	m.cur = m.synced.clone()
	m.resetDirty()
}

// Clone returns an independent copy of m, with the same appended and synced
// states.
func (m *Memory) Clone() *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Memory{parts: make(map[uint32]*memSlot, len(m.parts)), cur: m.cur.clone(), synced: m.synced.clone()}
	c.resetDirty()
	for p, sl := range m.parts {
		cs := &memSlot{cur: capped(sl.cur), synced: capped(sl.synced), dirty: sl.dirty}
		c.parts[p] = cs
		if cs.dirty {
			c.dirty = append(c.dirty, cs)
		}
	}
	maps.Copy(c.dirtyOut, m.dirtyOut)
	maps.Copy(c.dirtyMeta, m.dirtyMeta)
	return c
}

// Partitions implements Log.
func (m *Memory) Partitions() ([]uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []uint32
	for _, p := range slices.Sorted(maps.Keys(m.parts)) {
		if !emptyPart(m.parts[p].cur) {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

// Load implements Log. The result is a deep copy.
func (m *Memory) Load(p uint32) (PartitionState, error) {
	m.mu.Lock()
	var mp memPart
	if sl := m.parts[p]; sl != nil {
		mp = sl.cur
	}
	m.mu.Unlock()
	var ps PartitionState
	ps.HardState = mp.hs
	ps.Snapshot = CloneSnapshot(mp.snap)
	if len(mp.ents) > 0 {
		ps.Entries = make([]raftpb.Entry, len(mp.ents))
		for i, e := range mp.ents {
			e.Data = slices.Clone(e.Data)
			ps.Entries[i] = e
		}
	}
	if err := VerifyState(p, &ps); err != nil {
		return PartitionState{}, fmt.Errorf("wal: load: %w", err)
	}
	return ps, nil
}

// Outbox implements Log.
func (m *Memory) Outbox() ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rs []Record
	for _, k := range slices.Sorted(maps.Keys(m.cur.outbox)) {
		rs = append(rs, Record{Key: k, Value: slices.Clone(m.cur.outbox[k])})
	}
	return rs, nil
}

// Meta implements Log.
func (m *Memory) Meta(key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.cur.meta[key]
	return slices.Clone(v), ok, nil
}

// Close implements Log. Like Badger's clean shutdown it keeps everything
// appended (it syncs), and the Memory stays usable as the disk a restarted
// peer opens again.
func (m *Memory) Close() error { return m.Sync() }

// memPart implements PartStore for Memory.Append.

// emptyPart reports whether mp stores nothing.
func emptyPart(mp memPart) bool {
	return raft.IsEmptyHardState(mp.hs) && raft.IsEmptySnap(mp.snap) && len(mp.ents) == 0
}

func (mp *memPart) Clear() error {
	*mp = memPart{}
	return nil
}

func (mp *memPart) SnapIndex() (uint64, error) { return mp.snap.Metadata.Index, nil }

func (mp *memPart) Term(i uint64) (uint64, bool, error) {
	if len(mp.ents) == 0 || i < mp.ents[0].Index || i > mp.ents[len(mp.ents)-1].Index {
		return 0, false, nil
	}
	return mp.ents[i-mp.ents[0].Index].Term, true, nil
}

func (mp *memPart) LastIndex() (uint64, error) {
	if len(mp.ents) == 0 {
		return mp.SnapIndex()
	}
	return mp.ents[len(mp.ents)-1].Index, nil
}

func (mp *memPart) DropEntries(from, to uint64) error {
	n := uint64(len(mp.ents))
	if n == 0 {
		return nil
	}
	first := mp.ents[0].Index
	off := func(i uint64) uint64 { return min(max(i, first)-first, n) }
	a, b := off(from), n
	if to != 0 {
		b = off(to)
	}
	switch {
	case a >= b:
	case a == 0:
		mp.ents = mp.ents[b:]
	case b == n:
		mp.ents = mp.ents[:a:a]
	default:
		mp.ents = append(mp.ents[:a:a], mp.ents[b:]...)
	}
	if len(mp.ents) == 0 {
		mp.ents = nil
	}
	return nil
}

// PutSnapshot keeps the snapshot with its data and configuration shared,
// not copied, as PutEntries keeps entries: nothing modifies them once
// made or received, and a copy of every replica's last snapshot was 98 MB
// at 1,000 peers x 1,000,000 tasks. Load still returns a copy.
func (mp *memPart) PutSnapshot(s raftpb.Snapshot) error {
	mp.snap = s
	return nil
}

func (mp *memPart) PutHardState(hs raftpb.HardState) error {
	mp.hs = hs
	return nil
}

// PutEntries keeps the entries themselves, not copies: the Node's come
// from Raft, which never modifies an entry it handed out, and a copy of
// every entry of every simulated peer was the simulator's largest item
// after the tasks (415 MB at 1,000 peers x 1,000,000 tasks). Load still
// returns copies.
func (mp *memPart) PutEntries(es []raftpb.Entry) error {
	mp.ents = append(mp.ents, es...)
	return nil
}
