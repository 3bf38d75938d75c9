package badgerwal_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/badgerwal"
	"github.com/needle-mesh/needle/wal/waltest"
)

// openBadger opens a Log in a fresh temp dir; reopen closes it and opens
// the same dir again.
func openBadger(t *testing.T) (wal.Log, func() wal.Log) {
	dir := t.TempDir()
	opts := badgerwal.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cur := mustOpen(t, dir, opts)
	t.Cleanup(func() { _ = cur.Close() })
	return cur, func() wal.Log {
		if err := cur.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		cur = mustOpen(t, dir, opts)
		return cur
	}
}

func mustOpen(t *testing.T, dir string, opts badgerwal.Options) *badgerwal.Log {
	t.Helper()
	b, err := badgerwal.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	waltest.Run(t, openBadger)
}

func TestConformanceInMemory(t *testing.T) {
	waltest.Run(t, func(t *testing.T) (wal.Log, func() wal.Log) {
		b, err := badgerwal.Open("", badgerwal.Options{InMemory: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b, func() wal.Log { return b } // no restart without a disk
	})
}

func TestClosed(t *testing.T) {
	l, _ := openBadger(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	if _, err := l.Load(1); !errors.Is(err, wal.ErrClosed) {
		t.Errorf("Load after Close = %v; want ErrClosed", err)
	}
	if err := l.Append(&wal.Batch{}); !errors.Is(err, wal.ErrClosed) {
		t.Errorf("Append after Close = %v; want ErrClosed", err)
	}
}

func TestBatchTooBig(t *testing.T) {
	b, err := badgerwal.Open("", badgerwal.Options{InMemory: true, MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	big := make([]byte, 1<<20)
	err = b.Append(&wal.Batch{OutboxPut: []wal.Record{{Key: "a", Value: big}}})
	if !errors.Is(err, wal.ErrBatchTooBig) {
		t.Fatalf("Append(1 MiB, memtable 4 MiB) = %v; want ErrBatchTooBig", err)
	}
	if ob, _ := b.Outbox(); len(ob) != 0 {
		t.Errorf("Outbox after a failed Append has %d records", len(ob))
	}
}
