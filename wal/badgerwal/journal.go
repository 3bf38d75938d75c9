package badgerwal

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
)

// The redo journal. Badger writes a memtable's log through a shared
// mapping of its file, and making a commit durable then costs more than
// the write: fdatasync of a mapped file write-protects every page it
// writes back (a TLB shootdown on every CPU that ran the process) and the
// next write to each of those pages faults again. Under a 3-peer W2 the
// memtable's sync was 15% of a peer's CPU, half of it those shootdowns
// and faults; an append of the same bytes to a plain file and its
// fdatasync cost about half as much CPU and 90 us less time
// (docs/performance.md).
//
// So the Log also writes every change of a transaction, as the Badger
// operations it made (set key to value, delete key), to one record of
// needle.journal, a file of fixed size (its blocks allocated ahead)
// written from its start with pwrite, and Sync makes the journal durable instead of Badger: one
// fdatasync of the records written since the last. Badger commits
// behind it (txnDo does not wait for them: Badger's next transaction
// does, before it reads) and is made durable only at a checkpoint:
// when the journal is full, at Close, and at Open after a replay. A
// checkpoint syncs Badger's memtable files (memSync) and starts a new
// cycle at the journal's start, with a start record naming a random
// cycle id.
//
// At Open the records of the cycle the start record names are replayed
// into Badger, in order, up to the first that is not whole (a torn write:
// a bad checksum, another cycle's id, a sequence number out of turn):
// what a crash kept of Badger is then overwritten, key by key, by the
// journal's last values, and a key the journal does not name was last
// written before the checkpoint, which made it durable. Replaying a
// record Badger already holds writes the same values again. As before,
// two Appends are never unsynced at once (Append syncs the journal
// first), so what Badger kept beyond the journal's synced records is at
// most one Append's transactions, each whole or not at all, on top of
// a prefix: a prefix again.
//
// A record is: CRC32C (4 bytes, over the rest of the header and the
// payload), payload length (4), cycle id (8), sequence number (8), then
// the payload: operations, each a kind byte (opSet, opDelete), the key's
// length as a uvarint and the key, and for opSet the value's length and
// the value. The start record has sequence number 0 and no payload.

const (
	journalName = "needle.journal"
	// defaultJournalSize is the journal file's size: twice the largest
	// transaction of a 128 MiB memtable (peer.go), and more.
	defaultJournalSize = 64 << 20
	journalHeader      = 24
	opSet              = 1
	opDelete           = 2
)

// journal is the redo journal's file and what is written to it, used
// under the Log's lock.
type journal struct {
	f    *os.File
	size int64
	// cycle is the id of the current cycle, seq the next record's number,
	// off where it goes.
	cycle, seq uint64
	off        int64
	// rec is the payload of the transaction being built; buf the records
	// not written yet; unsynced is set when records were written and not
	// synced.
	rec, buf []byte
	unsynced bool
	// resize: the file is not size bytes long (new, or made with another
	// size); restart prepares it first.
	resize bool
}

// openJournal opens (or creates, its blocks allocated) the journal at
// path and returns the payloads of its current cycle's records, which
// the caller replays and then checkpoints (restart). It reads the
// records of that cycle alone: after a clean Close, the start record.
func openJournal(path string, size int64) (*journal, [][]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // owner only: it holds entries' payloads
	if err != nil {
		return nil, nil, err
	}
	j := &journal{f: f, size: size}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	payloads, err := parseJournal(f, st.Size())
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	j.resize = st.Size() != size
	return j, payloads, nil
}

// errJournal is a record of the current cycle that is whole but cannot be
// read: not a torn write, a bug or a corrupted disk.
var errJournal = errors.New("journal record unreadable")

// parseJournal returns the payloads of the records of the cycle that the
// start record of r (size bytes) names, in order, up to the first record
// that is not whole. A whole record whose operations do not decode is an
// error.
func parseJournal(r io.ReaderAt, size int64) ([][]byte, error) {
	cycle, seq, payload, ok := journalRecordAt(r, 0, size)
	if !ok || seq != 0 || len(payload) != 0 {
		return nil, nil // no cycle: a new file, or a torn start record
	}
	var out [][]byte
	off := int64(journalHeader)
	for {
		c, s, p, ok := journalRecordAt(r, off, size)
		if !ok || c != cycle || s != seq+1 {
			return out, nil
		}
		if err := forOps(p, func(byte, []byte, []byte) error { return nil }); err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", errJournal, s, err)
		}
		out = append(out, p)
		seq = s
		off += journalHeader + int64(len(p))
	}
}

// journalRecordAt reads the record at off of r (size bytes); ok is false if
// none is whole there.
func journalRecordAt(r io.ReaderAt, off, size int64) (cycle, seq uint64, payload []byte, ok bool) {
	var h [journalHeader]byte
	if off < 0 || size-off < journalHeader {
		return 0, 0, nil, false
	}
	if _, err := r.ReadAt(h[:], off); err != nil {
		return 0, 0, nil, false
	}
	n := int64(binary.BigEndian.Uint32(h[4:8]))
	if n > size-off-journalHeader {
		return 0, 0, nil, false
	}
	payload = make([]byte, n)
	if m, err := r.ReadAt(payload, off+journalHeader); int64(m) != n || (err != nil && err != io.EOF) {
		return 0, 0, nil, false
	}
	if crc32.Update(crc32.Checksum(h[4:], castagnoli), castagnoli, payload) != binary.BigEndian.Uint32(h[0:4]) {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint64(h[8:16]), binary.BigEndian.Uint64(h[16:24]), payload, true
}

// forOps calls fn for each operation of a record's payload (v is nil for
// opDelete).
func forOps(p []byte, fn func(kind byte, k, v []byte) error) error {
	for len(p) > 0 {
		kind := p[0]
		if kind != opSet && kind != opDelete {
			return fmt.Errorf("operation kind %d", kind)
		}
		k, rest, err := lenBytes(p[1:])
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		var v []byte
		if kind == opSet {
			if v, rest, err = lenBytes(rest); err != nil {
				return fmt.Errorf("value: %w", err)
			}
		}
		if err := fn(kind, k, v); err != nil {
			return err
		}
		p = rest
	}
	return nil
}

// lenBytes reads a uvarint length and that many bytes.
func lenBytes(b []byte) (v, rest []byte, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, nil, errors.New("bad length")
	}
	if n > uint64(len(b)-w) {
		return nil, nil, errors.New("length past the end")
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}

// prepare gives the file its size (it may have changed) in blocks
// allocated ahead where the file system can (preallocate), so that a
// record's sync writes no more than the record, and syncs the file and
// its directory.
func (j *journal) prepare() error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	if err := preallocate(j.f, j.size); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(j.f.Name()))
}

// set and del add an operation to the transaction being built.
func (j *journal) set(k, v []byte) {
	j.rec = appendLenBytes(appendLenBytes(append(j.rec, opSet), k), v)
}

func (j *journal) del(k []byte) {
	j.rec = appendLenBytes(append(j.rec, opDelete), k)
}

// appendLenBytes appends b's length as a uvarint and b (lenBytes reads
// them).
func appendLenBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// begin drops what an unfinished transaction added.
func (j *journal) begin() { j.rec = j.rec[:0] }

// commit frames the transaction built as the next record (none if it
// wrote nothing).
func (j *journal) commit() {
	if len(j.rec) > 0 {
		j.buf = j.frame(j.buf, j.seq, j.rec)
		j.seq++
	}
	j.rec = keep(j.rec)
}

// maxKept is the most room the journal keeps between transactions; a
// larger one (a snapshot's) is left to the collector.
const maxKept = 4 << 20

func keep(b []byte) []byte {
	if cap(b) > maxKept {
		return nil
	}
	return b[:0]
}

// frame appends the record (j.cycle, seq, payload) to b.
func (j *journal) frame(b []byte, seq uint64, payload []byte) []byte {
	at := len(b)
	b = append(b, make([]byte, journalHeader)...)
	binary.BigEndian.PutUint32(b[at+4:], uint32(len(payload)))
	binary.BigEndian.PutUint64(b[at+8:], j.cycle)
	binary.BigEndian.PutUint64(b[at+16:], seq)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[at:], crc32.Checksum(b[at+4:], castagnoli))
	return b
}

// sync writes the records framed since the last and syncs the file. When
// they do not fit, checkpoint is called instead: it makes every change
// Badger was given durable in Badger, those of these records too, and a
// new cycle begins without them.
func (j *journal) sync(checkpoint func() error) error {
	if len(j.buf) > 0 && j.off+int64(len(j.buf)) > j.size {
		if err := checkpoint(); err != nil {
			return err
		}
		return j.restart()
	}
	if len(j.buf) > 0 {
		if _, err := j.f.WriteAt(j.buf, j.off); err != nil {
			return err
		}
		j.off += int64(len(j.buf))
		j.buf = keep(j.buf)
		j.unsynced = true
	}
	if !j.unsynced {
		return nil
	}
	if err := datasync(j.f); err != nil {
		return err
	}
	j.unsynced = false
	return nil
}

// restart begins a new cycle: a start record with a new cycle id at the
// journal's start, synced. Every change journaled before, written or
// not, must be durable in Badger already (a checkpoint): only then may a
// file of another size be made over.
func (j *journal) restart() error {
	if j.resize {
		if err := j.prepare(); err != nil {
			return err
		}
		j.resize = false
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	j.cycle = binary.BigEndian.Uint64(id[:])
	start := j.frame(make([]byte, 0, journalHeader), 0, nil)
	if _, err := j.f.WriteAt(start, 0); err != nil {
		return err
	}
	if err := datasync(j.f); err != nil {
		return err
	}
	j.off, j.seq, j.buf, j.unsynced = journalHeader, 1, keep(j.buf), false
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// syncDir fsyncs a directory, making a file created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openJournal opens the journal in dir (size 0: the default; negative:
// none), replays its current cycle into Badger and checkpoints.
func (b *Log) openJournal(dir string, size int64) error {
	if size < 0 {
		return nil
	}
	if size == 0 {
		size = defaultJournalSize
	}
	if floor := 2 * (b.txnMax + journalHeader); size < floor {
		return fmt.Errorf("size %d below %d, twice the largest transaction", size, floor)
	}
	j, payloads, err := openJournal(filepath.Join(dir, journalName), size)
	if err != nil {
		return err
	}
	if err := b.startJournal(j, payloads); err != nil {
		_ = j.close()
		return err
	}
	b.j = j
	return nil
}

// startJournal replays the payloads of j's current cycle into Badger,
// makes Badger durable and begins a new cycle.
func (b *Log) startJournal(j *journal, payloads [][]byte) error {
	if err := b.replay(payloads); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if len(payloads) > 0 { // a crash or kill, not a clean stop
		b.log.Info("wal journal replayed", "records", len(payloads))
	}
	if err := b.syncWAL(); err != nil {
		return err
	}
	return j.restart()
}

// replay applies the journal records' operations to Badger in order, in
// as few transactions as fit (a crash in between replays them again).
func (b *Log) replay(payloads [][]byte) error {
	txn := b.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	apply := func(kind byte, k, v []byte) error {
		if kind == opSet {
			return txn.Set(k, v)
		}
		return txn.Delete(k)
	}
	for _, p := range payloads {
		err := forOps(p, func(kind byte, k, v []byte) error {
			err := apply(kind, k, v)
			if errors.Is(err, badger.ErrTxnTooBig) {
				if err := txn.Commit(); err != nil {
					return err
				}
				txn = b.db.NewTransaction(true)
				err = apply(kind, k, v)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return txn.Commit()
}
