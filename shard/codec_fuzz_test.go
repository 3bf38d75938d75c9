package shard

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// codecFuzzSeeds returns valid encodings of batches: one with every event
// type fully set, a few random ones and an empty one.
func codecFuzzSeeds() []Batch {
	full := Batch{Origin: "o", Req: 1}
	for ty := EvSubmitted; ty.Valid(); ty++ {
		full.Events = append(full.Events, codecFullEvent(ty))
	}
	seeds := []Batch{full, {}}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		seeds = append(seeds, codecRandBatch(r))
	}
	return seeds
}

// FuzzDecodeBatch checks that decoding never panics, that every error wraps
// ErrCodec, and that a decoded batch re-encodes to bytes that decode to the
// same batch and re-encode identically.
func FuzzDecodeBatch(f *testing.F) {
	for _, b := range codecFuzzSeeds() {
		f.Add(AppendBatch(nil, &b))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := DecodeBatch(p)
		if err != nil {
			if !errors.Is(err, ErrCodec) {
				t.Fatalf("DecodeBatch error %v does not wrap ErrCodec", err)
			}
			return
		}
		q := AppendBatch(nil, &b)
		b2, err := DecodeBatch(q)
		if err != nil {
			t.Fatalf("DecodeBatch(AppendBatch(decoded)): %v", err)
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("re-decoded batch differs:\n%+v\n%+v", b, b2)
		}
		if q2 := AppendBatch(nil, &b2); !bytes.Equal(q, q2) {
			t.Fatalf("re-encoding not stable:\n%x\n%x", q, q2)
		}
		// Decoded into room left dirty by another batch, the same batch.
		room := make([]TaskSpec, 3, 64)
		for i := range room {
			room[i] = TaskSpec{Name: "stale", Payload: []byte("x"), Item: 7, Require: []string{"a=b"}}
		}
		b3, _, err := DecodeBatchReusing(p, nil, room)
		if err != nil || !reflect.DeepEqual(b, b3) {
			t.Fatalf("DecodeBatchReusing = %v:\n%+v\nwant\n%+v", err, b3, b)
		}
	})
}

// FuzzDecodeEvent is FuzzDecodeBatch for a single event, which may be
// followed by unrelated bytes.
func FuzzDecodeEvent(f *testing.F) {
	for _, b := range codecFuzzSeeds() {
		for i := range b.Events {
			f.Add(AppendEvent(nil, &b.Events[i]))
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		e, n, err := DecodeEvent(p)
		if err != nil {
			if !errors.Is(err, ErrCodec) {
				t.Fatalf("DecodeEvent error %v does not wrap ErrCodec", err)
			}
			return
		}
		if n <= 0 || n > len(p) {
			t.Fatalf("DecodeEvent consumed %d of %d bytes", n, len(p))
		}
		q := AppendEvent(nil, &e)
		e2, n2, err := DecodeEvent(q)
		if err != nil || n2 != len(q) {
			t.Fatalf("DecodeEvent(AppendEvent(decoded)) = _, %d, %v; want %d, nil", n2, err, len(q))
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-decoded event differs:\n%+v\n%+v", e, e2)
		}
		if q2 := AppendEvent(nil, &e2); !bytes.Equal(q, q2) {
			t.Fatalf("re-encoding not stable:\n%x\n%x", q, q2)
		}
	})
}
