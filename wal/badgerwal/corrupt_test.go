package badgerwal

import (
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

func ent(i, term uint64) raftpb.Entry {
	return raftpb.Entry{Index: i, Term: term, Data: []byte("data")}
}

func ents(lo, hi, term uint64) []raftpb.Entry {
	var es []raftpb.Entry
	for i := lo; i <= hi; i++ {
		es = append(es, ent(i, term))
	}
	return es
}

// newCorruptible returns an in-memory Log holding partition 3 with
// entries 1..10 (entry 4 spans three chunks) and commit 5.
func newCorruptible(t *testing.T) *Log {
	t.Helper()
	b, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	es := ents(1, 10, 1)
	es[3].Data = make([]byte, 2*chunkSize+10)
	hs := raftpb.HardState{Term: uint64(1), Commit: uint64(5)}
	err = b.Append(&wal.Batch{
		Updates:   []wal.Update{{Partition: 3, HardState: hs, Entries: es}},
		OutboxPut: []wal.Record{{Key: "o", Value: []byte("v")}},
		MetaPut:   []wal.Record{{Key: "m", Value: []byte("v")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(3); err != nil {
		t.Fatalf("Load before corruption: %v", err)
	}
	return b
}

// raw edits the database underneath the Log.
func raw(t *testing.T, b *Log, fn func(txn *badger.Txn) error) {
	t.Helper()
	if err := b.db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// flip flips one bit of the stored value at key.
func flip(at int) func(t *testing.T, b *Log, key []byte) {
	return func(t *testing.T, b *Log, key []byte) {
		raw(t, b, func(txn *badger.Txn) error {
			item, err := txn.Get(key)
			if err != nil {
				return err
			}
			v, _ := item.ValueCopy(nil)
			v[min(at, len(v)-1)] ^= 0x10
			return txn.Set(key, v)
		})
	}
}

func set(v []byte) func(t *testing.T, b *Log, key []byte) {
	return func(t *testing.T, b *Log, key []byte) {
		raw(t, b, func(txn *badger.Txn) error { return txn.Set(key, v) })
	}
}

func del(t *testing.T, b *Log, key []byte) {
	raw(t, b, func(txn *badger.Txn) error { return txn.Delete(key) })
}

func TestLoadCorrupt(t *testing.T) {
	entry := func(i uint64, c uint32) []byte { return chunkKey(entryKey(3, i), c) }
	hsKey := chunkKey(partKey(3, kindHardState), 0)
	wrongIndex := encodeChunks(entryKey(3, 7), marshal(new(ent(8, 1))))[0]
	commit20 := encodeChunks(partKey(3, kindHardState), marshal(&raftpb.HardState{Commit: uint64(20)}))[0]
	snap5 := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: uint64(5), Term: uint64(1)}}
	tests := []struct {
		name    string
		key     []byte
		corrupt func(t *testing.T, b *Log, key []byte)
		rec     string
		index   uint64
	}{
		{"checksum payload", entry(2, 0), flip(headerLen + 2), wal.RecordEntry, 2},
		{"checksum header", entry(6, 0), flip(2), wal.RecordEntry, 6},
		{"version", entry(6, 0), set(append([]byte{9}, make([]byte, 20)...)), wal.RecordEntry, 6},
		{"truncated value", entry(7, 0), set([]byte{formatVersion, 1, 2}), wal.RecordEntry, 7},
		{"empty value", entry(7, 0), set(nil), wal.RecordEntry, 7},
		{"undecodable", entry(7, 0), set(encodeChunks(entryKey(3, 7), []byte{0xff, 0xff, 0xff})[0]), wal.RecordEntry, 7},
		{"wrong index", entry(7, 0), set(wrongIndex), wal.RecordEntry, 7},
		{"missing chunk", entry(4, 1), del, wal.RecordEntry, 4},
		{"missing last chunk", entry(4, 2), del, wal.RecordEntry, 4},
		{"gap", entry(5, 0), del, wal.RecordEntry, 6},
		{"first entry missing", entry(1, 0), del, wal.RecordEntry, 2},
		{"commit beyond last", hsKey, set(commit20), wal.RecordHardState, 20},
		{"hard state checksum", hsKey, flip(headerLen), wal.RecordHardState, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newCorruptible(t)
			tt.corrupt(t, b, tt.key)
			_, err := b.Load(3)
			var ce *wal.CorruptError
			if !errors.Is(err, wal.ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("Load = %v; want a wal.CorruptError", err)
			}
			if ce.Partition != 3 || ce.Index != tt.index || ce.Record != tt.rec {
				t.Errorf("Load = %v; want %s of partition 3 index %d", err, tt.rec, tt.index)
			}
		})
	}
	t.Run("entry not dropped by snapshot", func(t *testing.T) {
		b := newCorruptible(t)
		raw(t, b, func(txn *badger.Txn) error {
			w := &txnWriter{txn: txn}
			return (&txnPart{w: w, p: 3}).PutSnapshot(snap5)
		})
		_, err := b.Load(3)
		var ce *wal.CorruptError
		if !errors.As(err, &ce) || ce.Index != 1 {
			t.Errorf("Load = %v; want corrupt entry 1", err)
		}
	})
}

func TestOutboxMetaCorrupt(t *testing.T) {
	b := newCorruptible(t)
	flip(headerLen)(t, b, chunkKey(namedKey(prefixOutbox, "o"), 0))
	if _, err := b.Outbox(); !errors.Is(err, wal.ErrCorrupt) {
		t.Errorf("Outbox = %v; want wal.ErrCorrupt", err)
	}
	flip(1)(t, b, chunkKey(namedKey(prefixMeta, "m"), 0))
	if _, _, err := b.Meta("m"); !errors.Is(err, wal.ErrCorrupt) {
		t.Errorf("Meta = %v; want wal.ErrCorrupt", err)
	}
}

// FuzzLoad flips bytes and truncates values of a stored log: Load must
// report wal.ErrCorrupt or succeed, never panic.
func FuzzLoad(f *testing.F) {
	f.Add(uint8(2), uint16(0), uint8(1), false)
	f.Add(uint8(4), uint16(12), uint8(0x80), true)
	f.Fuzz(func(t *testing.T, idx uint8, at uint16, mask uint8, cut bool) {
		b := newCorruptible(t)
		key := chunkKey(entryKey(3, uint64(idx%12)), 0)
		raw(t, b, func(txn *badger.Txn) error {
			item, err := txn.Get(key)
			if err != nil {
				return nil
			}
			v, _ := item.ValueCopy(nil)
			i := int(at) % len(v)
			if cut {
				v = v[:i]
			} else {
				v[i] ^= mask | 1
			}
			return txn.Set(key, v)
		})
		if _, err := b.Load(3); err != nil && !errors.Is(err, wal.ErrCorrupt) {
			t.Fatalf("Load = %v; want nil or wal.ErrCorrupt", err)
		}
	})
}
