package simulate

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

// TestHashLogMatchesFNV checks that the hashing goroutine's sum is FNV-1a
// over the bytes appended, in order, across many batches, copied and
// shared pieces mixed, a buffer reused for the copies as hashRun does.
func TestHashLogMatchesFNV(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 9))
		var h hashLog
		want := fnv.New64a()
		var scratch []byte
		for range 20_000 {
			switch rng.IntN(3) {
			case 0:
				a, b, c, d := rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()
				h.header(a, b, c, d)
				var buf [32]byte
				for i, v := range []uint64{a, b, c, d} {
					binary.LittleEndian.PutUint64(buf[8*i:], v)
				}
				want.Write(buf[:])
			case 1:
				data := make([]byte, rng.IntN(300))
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				h.shared(data)
				want.Write(data)
			case 2:
				scratch = scratch[:0]
				for range rng.IntN(40) {
					scratch = append(scratch, byte(rng.Uint32()))
				}
				h.copied(scratch)
				want.Write(scratch)
				for i := range scratch { // the caller's buffer is its own again
					scratch[i] = 0
				}
			}
		}
		if got := h.sum(); got != want.Sum64() || h.sum() != got {
			t.Fatalf("seed %d: sum %016x, want %016x", seed, got, want.Sum64())
		}
	}
	var empty hashLog
	if got := empty.sum(); got != fnv.New64a().Sum64() {
		t.Errorf("empty: %016x", got)
	}
}
