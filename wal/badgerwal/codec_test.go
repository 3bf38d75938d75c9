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
func TestEncodeMessageMatchesChunks(t *testing.T) {
	base := entryKey(3, 42)
	for _, size := range []int{0, 1, 100, chunkSize - 64, chunkSize, chunkSize + 1, 3*chunkSize + 17} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + size)
		}
		e := &raftpb.Entry{Term: new(uint64(5)), Index: new(uint64(42)), Type: raftpb.EntryNormal.Enum(), Data: data}
		got := encodeMessage(base, e)
		want := encodeChunks(base, marshal(e))
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
