package badgerwal

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// TestCompactionUnderWrites writes 25 memtables' worth of Raft entries
// (8 partitions, each snapshotted every 256 entries, which drops the
// entries below) into a Log with a 4 MiB memtable: without Badger's
// compactors, the Log's own compaction must keep L0 below Badger's write
// stall and the directory bounded by the live data plus a few memtables,
// and the log must load afterwards.
func TestCompactionUnderWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MiB")
	}
	dir := t.TempDir()
	const mt = 4 << 20
	b, err := Open(dir, Options{MemTableSize: mt})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const parts, perAppend, size, snapEvery = 8, 4, 4 << 10, 256
	stall := b.db.Opts().NumLevelZeroTablesStall
	payload := bytes.Repeat([]byte("e"), size)
	last := make([]uint64, parts)
	peakL0, peakDir := 0, int64(0)
	for i := range 800 {
		var batch wal.Batch
		for p := range uint32(parts) {
			u := wal.Update{Partition: p}
			for range perAppend {
				last[p]++
				u.Entries = append(u.Entries, raftpb.Entry{Index: last[p], Term: uint64(1), Data: payload})
			}
			if last[p]%snapEvery == 0 {
				conf := raftpb.ConfState{Voters: []uint64{1}}
				u.Snapshot = raftpb.Snapshot{Data: []byte("state"),
					Metadata: raftpb.SnapshotMetadata{Index: last[p], Term: uint64(1), ConfState: conf}}
			}
			batch.Updates = append(batch.Updates, u)
		}
		if err := b.Append(&batch); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if peakL0 = max(peakL0, b.db.Levels()[0].NumTables); peakL0 >= stall {
			t.Fatalf("L0 reached %d tables after %d appends: Badger's write stall", peakL0, i+1)
		}
		if i%10 == 9 {
			peakDir = max(peakDir, dirSize(t, dir))
		}
	}
	written := int64(800 * parts * perAppend * size)
	t.Logf("written %d MiB, compactions %d, peak L0 %d tables, peak dir %d MiB, levels:%s",
		written>>20, b.compactions.Load(), peakL0, peakDir>>20, b.db.LevelsToString())
	if b.compactions.Load() == 0 {
		t.Errorf("no compaction after %d MiB written", written>>20)
	}
	// Live: at most snapEvery+perAppend entries per partition (8 MiB),
	// plus the memtables' files and L0 (a few memtables each), plus the
	// journal's fixed size.
	if bound := int64(parts*(snapEvery+perAppend)*size + 12*mt + defaultJournalSize); peakDir > bound {
		t.Errorf("directory reached %d MiB; want at most %d MiB (%d MiB written)", peakDir>>20, bound>>20, written>>20)
	}
	for p := range uint32(parts) {
		st, err := b.Load(p)
		if err != nil {
			t.Fatalf("Load(%d): %v", p, err)
		}
		if n := len(st.Entries); n == 0 || st.Entries[n-1].Index != last[p] {
			t.Errorf("partition %d: %d entries after the snapshot, last index %d; want up to %d", p, n, st.Entries[max(n-1, 0)].Index, last[p])
		}
	}
}

// dirSize sums the disk space of the files under dir: the blocks they
// hold where the system says (Badger's value log is a sparse 128 MiB
// file, unused here), else their sizes. Badger compacts while it walks: a
// file removed between the listing and its stat holds nothing any more.
func dirSize(t *testing.T, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
