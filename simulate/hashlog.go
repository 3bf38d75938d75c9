package simulate

import (
	"encoding/binary"
	"hash/fnv"
)

// hashLog is the run's event-log hash: FNV-1a (64 bits) over the persisted
// entries and the handler starts, in the order the run makes them
// (hashPersist, hashRun). The run hands it the bytes to hash, and a
// goroutine of its own hashes them, in that order, on another core: FNV
// takes its bytes one at a time, a multiplication each, and was 2-3% of a
// run's CPU (every replica's copy of every entry). The sum is the same as
// hashing them in the run's goroutine. What it is handed is not modified
// afterwards: an entry's data is Raft's, which never changes an entry
// once made; the other bytes are copied into the batch.
type hashLog struct {
	cur  *hashBatch
	work chan *hashBatch // batches to hash, in order
	free chan *hashBatch // batches hashed, to reuse
	done chan uint64     // the sum, once work is closed
	// summed is set, and total is the sum, once sum was called.
	summed bool
	total  uint64
}

// hashBatch is bytes to hash, in order: pieces, which point into arena
// (small ones, copied) or at entries' data.
type hashBatch struct {
	arena  []byte
	pieces [][]byte
}

// Batches go to the hashing goroutine at hashBatchPieces pieces or
// hashBatchBytes bytes copied, whichever first.
const (
	hashBatchPieces = 1024
	hashBatchBytes  = 32 << 10
)

// copied appends b, copied, to the bytes to hash.
func (h *hashLog) copied(b []byte) {
	c := h.batch()
	start := len(c.arena)
	c.arena = append(c.arena, b...)
	// A piece keeps the array it was appended to, should a later append
	// move the arena.
	c.pieces = append(c.pieces, c.arena[start:len(c.arena):len(c.arena)])
	h.maybeSend()
}

// header appends the four numbers that head an entry, little-endian.
func (h *hashLog) header(a, b, c, d uint64) {
	var buf [32]byte
	binary.LittleEndian.PutUint64(buf[0:], a)
	binary.LittleEndian.PutUint64(buf[8:], b)
	binary.LittleEndian.PutUint64(buf[16:], c)
	binary.LittleEndian.PutUint64(buf[24:], d)
	h.copied(buf[:])
}

// shared appends b, which nobody modifies afterwards, to the bytes to
// hash, without a copy.
func (h *hashLog) shared(b []byte) {
	if len(b) == 0 {
		return
	}
	c := h.batch()
	c.pieces = append(c.pieces, b)
	h.maybeSend()
}

func (h *hashLog) batch() *hashBatch {
	if h.cur == nil {
		select {
		case h.cur = <-h.free:
		default:
			h.cur = &hashBatch{}
		}
	}
	return h.cur
}

func (h *hashLog) maybeSend() {
	if len(h.cur.pieces) >= hashBatchPieces || len(h.cur.arena) >= hashBatchBytes {
		h.send()
	}
}

// send hands the current batch to the hashing goroutine, started at the
// first (a run that hashes nothing starts none).
func (h *hashLog) send() {
	if h.work == nil {
		h.work, h.free, h.done = make(chan *hashBatch, 64), make(chan *hashBatch, 64), make(chan uint64, 1)
		go hashBatches(h.work, h.free, h.done)
	}
	h.work <- h.cur
	h.cur = nil
}

// hashBatches hashes the batches of work in order, hands each back on
// free, and the sum on done once work is closed.
func hashBatches(work <-chan *hashBatch, free chan<- *hashBatch, done chan<- uint64) {
	f := fnv.New64a()
	for b := range work {
		for _, p := range b.pieces {
			f.Write(p)
		}
		clear(b.pieces) // the entries' data it points at
		b.pieces, b.arena = b.pieces[:0], b.arena[:0]
		select {
		case free <- b:
		default:
		}
	}
	done <- f.Sum64()
}

// sum returns the hash of everything appended, and ends the hashing
// goroutine: nothing may be appended after.
func (h *hashLog) sum() uint64 {
	if h.summed {
		return h.total
	}
	h.summed = true
	if h.cur != nil {
		h.send()
	}
	if h.work == nil {
		h.total = fnv.New64a().Sum64() // nothing hashed
		return h.total
	}
	close(h.work)
	h.total = <-h.done
	return h.total
}
