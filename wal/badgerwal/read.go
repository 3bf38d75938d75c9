package badgerwal

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// view runs fn in a read-only transaction unless b is closed.
func (b *Log) view(op string, fn func(txn *badger.Txn) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return wal.ErrClosed
	}
	if err := b.commitErr(); err != nil { // Badger may lack what it lost
		return wrap(op, err)
	}
	if err := b.db.View(fn); err != nil {
		return wrap(op, err)
	}
	return nil
}

// Partitions implements Log. It seeks from partition to partition instead
// of scanning their entries.
func (b *Log) Partitions() ([]uint32, error) {
	var ps []uint32
	err := b.view("partitions", func(txn *badger.Txn) error {
		ps = nil
		prefix := []byte{prefixPart}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); {
			k := it.Item().Key()
			if len(k) < partKeyLen {
				return corruptPart(wal.RecordEntry, 0, 0, "malformed key %x", k)
			}
			p := binary.BigEndian.Uint32(k[1:5])
			ps = append(ps, p)
			if p == math.MaxUint32 {
				break
			}
			it.Seek(binary.BigEndian.AppendUint32([]byte{prefixPart}, p+1))
		}
		return nil
	})
	return ps, err
}

// Load implements Log: it reads one partition and verifies every checksum
// and the invariants listed at verifyState.
func (b *Log) Load(p uint32) (wal.PartitionState, error) {
	var ps wal.PartitionState
	err := b.view("load", func(txn *badger.Txn) error {
		var err error
		ps, err = loadPart(txn, p)
		if err != nil {
			return err
		}
		return wal.VerifyState(p, &ps)
	})
	if err != nil {
		return wal.PartitionState{}, err
	}
	return ps, nil
}

// loadPart reads one partition's records without checking the invariants.
func loadPart(txn *badger.Txn, p uint32) (wal.PartitionState, error) {
	var ps wal.PartitionState
	if b, ok, why := readRecord(txn, partKey(p, kindHardState)); why != "" {
		return ps, corruptPart(wal.RecordHardState, p, 0, "%s", why)
	} else if ok {
		if err := ps.HardState.Unmarshal(b); err != nil {
			return ps, corruptPart(wal.RecordHardState, p, 0, "undecodable: %v", err)
		}
	}
	snap, err := loadSnapshot(txn, p)
	if err != nil {
		return ps, err
	}
	ps.Snapshot = snap
	ps.Entries, err = loadEntries(txn, p)
	return ps, err
}

// loadSnapshot reads a partition's snapshot (metadata and data), empty if none is stored.
func loadSnapshot(txn *badger.Txn, p uint32) (raftpb.Snapshot, error) {
	b, ok, why := readRecord(txn, partKey(p, kindSnapMeta))
	if why != "" {
		return raftpb.Snapshot{}, corruptPart(wal.RecordSnapshot, p, 0, "metadata: %s", why)
	}
	data, dataOK, why := readRecord(txn, partKey(p, kindSnapData))
	if why != "" {
		return raftpb.Snapshot{}, corruptPart(wal.RecordSnapshot, p, 0, "data: %s", why)
	}
	if !ok && !dataOK {
		return raftpb.Snapshot{}, nil
	}
	if !ok {
		return raftpb.Snapshot{}, corruptPart(wal.RecordSnapshot, p, 0, "data stored, metadata not")
	}
	var s raftpb.Snapshot
	if err := s.Unmarshal(b); err != nil {
		return raftpb.Snapshot{}, corruptPart(wal.RecordSnapshot, p, 0, "undecodable: %v", err)
	}
	if !dataOK {
		// Written in several transactions: the data is staged by index.
		staged, err := loadStaged(txn, p, s.Metadata.Index)
		if err != nil {
			return raftpb.Snapshot{}, err
		}
		data = staged
	}
	s.Data = data
	return s, nil
}

// chunkScan groups the chunks of consecutive records under a prefix and
// calls emit with each record's base key and payload. It returns the reason
// of the first bad chunk, with the base key it was found under.
func chunkScan(txn *badger.Txn, prefix []byte, emit func(base, payload []byte) string) (bad []byte, reason string) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	var a *assembler
	flush := func() string {
		if a == nil {
			return ""
		}
		if why := a.done(); why != "" {
			return why
		}
		return emit(a.base, a.payload)
	}
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		base, c, ok := splitChunkKey(item.KeyCopy(nil))
		if !ok {
			return item.KeyCopy(nil), "malformed key"
		}
		if a == nil || !bytes.Equal(a.base, base) {
			if why := flush(); why != "" {
				return a.base, why
			}
			a = &assembler{base: base}
		}
		var why string
		if err := item.Value(func(v []byte) error { why = a.add(c, v); return nil }); err != nil {
			why = "unreadable value: " + err.Error()
		}
		if why != "" {
			return base, why
		}
	}
	if why := flush(); why != "" {
		return a.base, why
	}
	return nil, ""
}

// loadEntries reads a partition's entries in index order; each must be
// stored under its own index.
func loadEntries(txn *badger.Txn, p uint32) ([]raftpb.Entry, error) {
	var es []raftpb.Entry
	bad, why := chunkScan(txn, partKey(p, kindEntry), func(base, payload []byte) string {
		if len(base) != entryKeyLen {
			return "malformed key"
		}
		var e raftpb.Entry
		if err := e.Unmarshal(payload); err != nil {
			return "undecodable: " + err.Error()
		}
		if i := binary.BigEndian.Uint64(base[partKeyLen:]); e.Index != i {
			return "entry stored under index " + strconv.FormatUint(i, 10)
		}
		es = append(es, e)
		return ""
	})
	if why != "" {
		var i uint64
		if len(bad) >= entryKeyLen {
			i = binary.BigEndian.Uint64(bad[partKeyLen:entryKeyLen])
		}
		return nil, corruptPart(wal.RecordEntry, p, i, "%s", why)
	}
	return es, nil
}

// Outbox implements Log.
func (b *Log) Outbox() ([]wal.Record, error) {
	var rs []wal.Record
	err := b.view("outbox", func(txn *badger.Txn) error {
		rs = nil
		bad, why := chunkScan(txn, []byte{prefixOutbox}, func(base, payload []byte) string {
			k, ok := parseNamedKey(base)
			if !ok {
				return "malformed key"
			}
			rs = append(rs, wal.Record{Key: k, Value: payload})
			return ""
		})
		if why != "" {
			k, _ := parseNamedKey(bad)
			return &wal.CorruptError{Record: wal.RecordOutbox, Key: k, Reason: why}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rs, func(x, y wal.Record) int { return strings.Compare(x.Key, y.Key) })
	return rs, nil
}

// Meta implements Log.
func (b *Log) Meta(key string) ([]byte, bool, error) {
	var (
		v  []byte
		ok bool
	)
	err := b.view("meta", func(txn *badger.Txn) error {
		var why string
		v, ok, why = readRecord(txn, namedKey(prefixMeta, key))
		if why != "" {
			return &wal.CorruptError{Record: wal.RecordMeta, Key: key, Reason: why}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return v, ok, nil
}
