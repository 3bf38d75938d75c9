package badgerwal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/needle-mesh/needle/wal"
)

// Options configures Open. The zero value is a good default.
type Options struct {
	// Logger receives Badger's warnings and errors and the GC loop's
	// failures. Nil discards them.
	Logger *slog.Logger
	// InMemory keeps the database in memory only (tests); dir must be "".
	// Sync is then a no-op and nothing survives Close.
	InMemory bool
	// MemTableSize is the size of one Badger memtable in bytes. One Append
	// must fit in 15% of it (wal.ErrBatchTooBig otherwise). Default 64 MiB;
	// at least 4 MiB.
	MemTableSize int64
	// GCInterval is how often the value-log GC runs. Default 1 minute.
	GCInterval time.Duration
	// JournalSize is the size of the redo journal (journal.go) in bytes:
	// default 64 MiB, at least twice the largest transaction (15% of the
	// memtable). Negative: no journal; Sync then syncs Badger's memtable
	// files. In memory there is none.
	JournalSize int64
}

// Log is the wal.Log of a real peer: one Badger database holding every
// partition's Raft log, hard state and snapshot, the outbox and the meta
// records. Create it with Open and release it with Close.
type Log struct {
	db  *badger.DB
	log *slog.Logger

	// mu serializes Append, Sync and Close (write lock) against reads
	// (read lock), and guards dirty and closed.
	mu sync.RWMutex
	// dirty is set by Append and cleared by Sync.
	dirty bool
	// closed is set by Close.
	closed bool
	// parts caches each partition's partMeta once the write path read it;
	// Append updates it after a successful commit.
	parts map[uint32]partMeta
	// txnMax is the size of one Badger transaction (15% of the memtable).
	txnMax int64
	// kick wakes the compaction goroutine after writes (compact.go):
	// unkicked counts the bytes appended since the last kick, kickEvery
	// how many make the next.
	kick                chan struct{}
	unkicked, kickEvery int64
	// compactions counts the compactions the goroutine ran (tests).
	compactions atomic.Int64
	// ms syncs the memtable files alone (sync.go); nil in memory.
	ms *memSync
	// j is the redo journal (journal.go); nil in memory or when turned
	// off.
	j *journal
	// commits counts the transactions Badger has not applied yet (with a
	// journal they commit without waiting, txnDo).
	commits sync.WaitGroup
	// cbMu guards what Badger's commit callbacks set: the first error of
	// a commit not waited for, which every later write and read returns
	// (the journal holds what it lost: a restart replays it), and arena,
	// the room the last transaction encoded its entries in
	// (txnWriter.alloc), lent to the next once Badger has copied them.
	cbMu     sync.Mutex
	asyncErr error
	arena    []byte

	// cancel stops the GC and compaction goroutines; wg waits for them in
	// Close.
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ wal.Log = (*Log)(nil)

const (
	defaultMemTableSize = 64 << 20
	minMemTableSize     = 4 << 20
	defaultGCInterval   = time.Minute
	// gcDiscardRatio: rewrite a value-log file when half of it is garbage.
	gcDiscardRatio = 0.5
	// gcMaxRounds bounds the files one GC tick rewrites.
	gcMaxRounds = 16
)

// Open opens (or creates) the Badger database in dir.
func Open(dir string, opts Options) (*Log, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	bo, err := badgerOptions(dir, opts, log)
	if err != nil {
		return nil, fmt.Errorf("badgerwal: open %s: %w", dir, err)
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("badgerwal: open %s: %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Log{db: db, log: log, cancel: cancel, parts: map[uint32]partMeta{}, txnMax: 15 * bo.MemTableSize / 100,
		kick: make(chan struct{}, 1), kickEvery: bo.MemTableSize / 16}
	if !opts.InMemory {
		b.ms = openMemSync(dir)
		if err := b.openJournal(dir, opts.JournalSize); err != nil {
			_ = db.Close()
			cancel()
			return nil, fmt.Errorf("badgerwal: open %s: journal: %w", dir, err)
		}
	}
	b.wg.Go(func() { b.compactLoop(ctx) })
	b.kickCompaction() // a database left with a full L0
	if !opts.InMemory {
		every := opts.GCInterval
		if every <= 0 {
			every = defaultGCInterval
		}
		b.wg.Go(func() { b.gcLoop(ctx, every) })
	}
	return b, nil
}

// badgerOptions tunes Badger for a write-heavy log on a small machine.
func badgerOptions(dir string, opts Options, log *slog.Logger) (badger.Options, error) {
	mt := opts.MemTableSize
	if mt == 0 {
		mt = defaultMemTableSize
	}
	if mt < minMemTableSize {
		return badger.Options{}, fmt.Errorf("memtable size %d below %d", mt, minMemTableSize)
	}
	bo := badger.DefaultOptions(dir)
	if opts.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	}
	return bo.
		// We fsync once per loop iteration in Sync (group commit).
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		// One writer (the peer loop): no conflict tracking needed.
		WithDetectConflicts(false).
		WithMemTableSize(mt).
		WithNumMemtables(3).
		// No compactors of Badger's own: each polls every 50 ms, which
		// was most of an idle peer's CPU. compactLoop compacts instead,
		// woken by writes (compact.go).
		WithNumCompactors(0).
		WithBlockCacheSize(32 << 20).
		WithValueLogFileSize(64 << 20). // unused: values stay in the LSM
		// Values are chunked below this, so nothing goes to the value log.
		WithValueThreshold(min(1<<20, 15*mt/100)).
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{log}).
		WithLoggingLevel(badger.WARNING), nil
}

// Append implements Log: b is written in one Badger transaction, which
// Badger commits as one request with a commit mark, so a crash keeps all of
// it or none. A wal.Batch over 15% of the memtable size is written in several
// transactions in an order that keeps the log valid after a crash between
// them (see split.go); one record over MaxRecord fails with
// wal.ErrBatchTooBig.
//
// If an earlier Append was not synced yet, Append syncs first: Badger does
// not fsync a memtable's WAL file when it rotates to a new memtable, so a
// crash could lose an unsynced Append while keeping a later one in the
// next memtable's file, where the journal's replay (which ends at the
// first record it lacks) would not reach to overwrite it.
func (b *Log) Append(batch *wal.Batch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return wal.ErrClosed
	}
	if b.dirty {
		if err := b.durable(); err != nil {
			return fmt.Errorf("badgerwal: append: sync previous: %w", err)
		}
		b.dirty = false
	}
	err := b.txnDo(func(w *txnWriter, part func(uint32) *txnPart) error { return writeBatch(w, batch, part) })
	if errors.Is(err, wal.ErrBatchTooBig) {
		err = b.appendSplit(batch)
	}
	if err != nil {
		return wrap("append", err)
	}
	b.dirty = true
	if b.unkicked += batchBytes(batch); b.unkicked >= b.kickEvery {
		b.unkicked = 0
		b.kickCompaction()
	}
	return nil
}

// partFor returns a function giving the txnPart of a partition within one
// Append, starting from a copy of the cached partMeta.
func (b *Log) partFor(w *txnWriter, staged map[uint32]*txnPart) func(p uint32) *txnPart {
	return func(p uint32) *txnPart {
		if tp, ok := staged[p]; ok {
			return tp
		}
		tp := &txnPart{w: w, p: p}
		if m, ok := b.parts[p]; ok {
			tp.meta = &m
		}
		staged[p] = tp
		return tp
	}
}

// writeBatch stages every change of batch in w's transaction.
func writeBatch(w *txnWriter, batch *wal.Batch, part func(p uint32) *txnPart) error {
	for i := range batch.Updates {
		u := &batch.Updates[i]
		if err := wal.ApplyUpdate(part(u.Partition), u); err != nil {
			return err
		}
	}
	for _, r := range batch.OutboxPut {
		if err := w.putRecord(namedKey(prefixOutbox, r.Key), r.Value); err != nil {
			return err
		}
	}
	for _, k := range batch.OutboxDel {
		if err := w.deleteRecord(namedKey(prefixOutbox, k)); err != nil {
			return err
		}
	}
	for _, r := range batch.MetaPut {
		if err := w.putRecord(namedKey(prefixMeta, r.Key), r.Value); err != nil {
			return err
		}
	}
	return nil
}

// Sync implements Log: it syncs the journal's new records (journal.go),
// or without a journal Badger's memtable files.
func (b *Log) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return wal.ErrClosed
	}
	if err := b.durable(); err != nil {
		return fmt.Errorf("badgerwal: sync: %w", err)
	}
	b.dirty = false
	return nil
}

// durable makes every write so far durable: the journal's records, or
// without a journal Badger's memtable files.
func (b *Log) durable() error {
	if b.j == nil {
		return b.syncWAL()
	}
	if err := b.commitErr(); err != nil {
		return err
	}
	return b.j.sync(b.checkpoint)
}

// checkpoint makes every write Badger was given durable in Badger itself,
// once it has applied them all: the journal may then start over.
func (b *Log) checkpoint() error {
	b.commits.Wait()
	if err := b.commitErr(); err != nil {
		return err
	}
	return b.syncWAL()
}

// commitErr is the first error of a commit not waited for.
func (b *Log) commitErr() error {
	b.cbMu.Lock()
	defer b.cbMu.Unlock()
	if b.asyncErr != nil {
		return fmt.Errorf("an earlier commit failed: %w", b.asyncErr)
	}
	return nil
}

// syncWAL makes every write Badger applied durable: the memtable files
// alone (sync.go), or Badger's DB.Sync where they cannot be found.
func (b *Log) syncWAL() error {
	if b.ms == nil || b.ms.fallback {
		return b.db.Sync()
	}
	return b.ms.sync()
}

// Close implements Log: it stops the GC and compaction goroutines (a
// compaction under way finishes first) and closes Badger, which flushes
// the memtables.
func (b *Log) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.cancel()
	b.wg.Wait()
	var jerr error
	if b.j != nil {
		// Records not written yet go to the journal, in case Badger's
		// close fails; once it flushed its memtables the journal holds
		// nothing it needs.
		jerr = b.j.sync(b.checkpoint)
		b.commits.Wait()
		// A commit Badger failed is in the journal alone: keep it for
		// the next Open to replay.
		jerr = errors.Join(jerr, b.commitErr())
	}
	if b.ms != nil {
		b.ms.close()
	}
	err := b.db.Close()
	if b.j != nil {
		if err == nil && jerr == nil {
			jerr = b.j.restart()
		}
		jerr = errors.Join(jerr, b.j.close())
	}
	if err = errors.Join(err, jerr); err != nil {
		return fmt.Errorf("badgerwal: close: %w", err)
	}
	return nil
}

// gcLoop runs the value-log GC every interval until ctx is done. Raft
// entries are deleted as the log is truncated, compacted and snapshotted;
// LSM compaction drops their tombstones, and this reclaims value-log space
// (unused while values stay below the threshold, but cheap to check).
func (b *Log) gcLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.runGC(ctx)
		}
	}
}

// runGC rewrites value-log files until none is worth it (bounded).
func (b *Log) runGC(ctx context.Context) {
	for range gcMaxRounds {
		if ctx.Err() != nil {
			return
		}
		err := b.db.RunValueLogGC(gcDiscardRatio)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return
		}
		if err != nil {
			b.log.Warn("value log gc failed", "err", err)
			return
		}
	}
}

// badgerErr maps Badger errors that callers can act on to wal sentinels.
func badgerErr(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: %w", wal.ErrBatchTooBig, err)
	}
	return err
}

// wrap prefixes err with the operation.
func wrap(op string, err error) error {
	return fmt.Errorf("badgerwal: %s: %w", op, err)
}

// corruptPart builds the wal.CorruptError of a partition record.
func corruptPart(rec string, p uint32, i uint64, format string, args ...any) *wal.CorruptError {
	return &wal.CorruptError{Record: rec, Partition: p, Index: i, Reason: fmt.Sprintf(format, args...)}
}

// badgerLogger adapts Badger's printf logger to slog. Badger's logging
// level applies to its default logger only, so Badger's information
// (Flatten reports every level it compacts) is logged at debug level here.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any)   { l.emit(slog.LevelError, f, a) }
func (l badgerLogger) Warningf(f string, a ...any) { l.emit(slog.LevelWarn, f, a) }
func (l badgerLogger) Infof(f string, a ...any)    { l.emit(slog.LevelDebug, f, a) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.emit(slog.LevelDebug, f, a) }

func (l badgerLogger) emit(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if l.log.Enabled(ctx, level) {
		l.log.Log(ctx, level, "badger", "msg", strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
}
