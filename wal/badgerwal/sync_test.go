package badgerwal

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// TestSyncReachesMemtableFile checks what memSync assumes of Badger's
// files: after an Append, its entry is in the memtable file memSync
// syncs (the highest "%05d.mem"), also after the memtable rotated. If a
// Badger upgrade names or rotates its files otherwise, a checkpoint would
// fsync the wrong file, and the journal start over on writes that are
// not durable: this fails first.
func TestSyncReachesMemtableFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 MiB")
	}
	const mt = 4 << 20
	b, err := Open(t.TempDir(), Options{MemTableSize: mt})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ms == nil || b.ms.fallback {
		t.Fatal("no memtable file found after Open: Badger's naming changed (see sync.go)")
	}
	first := b.ms.fid
	filler := bytes.Repeat([]byte("f"), 64<<10)
	for i := range 320 {
		marker := fmt.Appendf(nil, "marker-%08d", i)
		data := append(append([]byte{}, marker...), filler...)
		batch := wal.Batch{Updates: []wal.Update{{Partition: 1,
			Entries: []raftpb.Entry{{Index: uint64(i + 1), Term: uint64(1), Data: data}}}}}
		if err := b.Append(&batch); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		b.mu.Lock()
		err := b.checkpoint()
		b.mu.Unlock()
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		if i%16 != 15 {
			continue
		}
		synced, err := os.ReadFile(b.ms.path(b.ms.fid))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(synced, marker) {
			t.Fatalf("after append %d the synced file %s does not hold its entry", i, b.ms.path(b.ms.fid))
		}
	}
	if rotations := b.ms.fid - first; rotations < 3 {
		t.Fatalf("%d memtable rotations in 20 MiB through a 4 MiB memtable; want several", rotations)
	}
}
