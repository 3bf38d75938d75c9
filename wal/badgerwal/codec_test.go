package badgerwal

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestEncodeMessageMatchesChunks: an entry encoded in place behind its
// chunk header (encodeMessage) is stored as the same values, byte for
// byte, as its encoding framed by encodeChunks: one chunk, and the
// entries larger than a chunk.
//
// The messages are encoded into one transaction's arena, as PutEntries
// does, and compared once all are: a value written over by a later one
// (the arena lending room twice) differs.
func TestEncodeMessageMatchesChunks(t *testing.T) {
	base := entryKey(3, 42)
	sizes := []int{0, 1, 100, chunkSize - 64, chunkSize, chunkSize + 1, 3*chunkSize + 17, 5, minArena - 30, minArena, 2 * minArena, 7}
	w := &txnWriter{}
	var entries []raftpb.Entry
	var encoded [][][]byte
	for _, size := range sizes {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + size)
		}
		e := raftpb.Entry{Term: uint64(5), Index: uint64(42), Type: raftpb.EntryNormal, Data: data}
		entries = append(entries, e)
		encoded = append(encoded, encodeMessage(base, &e, w.alloc))
	}
	for i, e := range entries {
		size := sizes[i]
		got := encoded[i]
		want := encodeChunks(base, marshal(&e))
		if len(got) != len(want) {
			t.Fatalf("data of %d bytes: %d chunks, want %d", size, len(got), len(want))
		}
		for c := range want {
			if !bytes.Equal(got[c], want[c]) {
				t.Fatalf("data of %d bytes: chunk %d differs", size, c)
			}
		}
	}
}
