package waltest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/needle-mesh/needle/wal"
)

// testJoin appends a seeded random sequence of batches to one Log batch by
// batch and to another joined in runs (wal.Batch.Join), and checks that both
// hold the same partition, outbox and meta state, before and after a reopen.
// Runs put several updates of one partition in one Append, and an outbox key
// put, deleted and put again within one.
func testJoin(t *testing.T, open Opener) {
	one, reopenOne := open(t)
	joined, reopenJoined := open(t)
	r := rand.New(rand.NewPCG(3, 4))
	st, err := wal.NewStorage(wal.PartitionState{})
	if err != nil {
		t.Fatal(err)
	}
	term := uint64(1)
	var held wal.Batch
	for step := range 300 {
		b := randomBatch(r, st, &term)
		MustAppend(t, one, b)
		held.Join(b)
		b.Reset() // Join keeps none of b's slices
		if r.IntN(4) == 0 || step == 299 {
			MustAppend(t, joined, &held)
			held.Reset()
			checkSame(t, fmt.Sprintf("step %d", step), one, joined)
		}
	}
	checkSame(t, "after reopen", reopenOne(), reopenJoined())
}

// randomBatch is a batch of one random update of partition 9 (valid for st,
// which it is applied to) and random outbox and meta changes over few keys.
func randomBatch(r *rand.Rand, st *wal.Storage, term *uint64) *wal.Batch {
	b := &wal.Batch{}
	if r.IntN(3) > 0 {
		u := randomUpdate(r, st, term)
		if err := st.Apply(u); err != nil {
			panic(fmt.Sprintf("Storage.Apply of a random update: %v", err))
		}
		b.Updates = append(b.Updates, u)
	}
	key := func() string { return fmt.Sprintf("k%d", r.IntN(5)) }
	for range r.IntN(3) {
		b.OutboxPut = append(b.OutboxPut, wal.Record{Key: key(), Value: fmt.Appendf(nil, "v%d", r.IntN(100))})
	}
	for range r.IntN(3) {
		b.OutboxDel = append(b.OutboxDel, key())
	}
	for range r.IntN(2) {
		b.MetaPut = append(b.MetaPut, wal.Record{Key: key(), Value: fmt.Appendf(nil, "m%d", r.IntN(100))})
	}
	return b
}

// checkSame fails unless a and b hold the same partition 9, outbox and meta.
func checkSame(t *testing.T, what string, a, b wal.Log) {
	t.Helper()
	CheckState(t, what+": partition 9", MustLoad(t, b, 9), MustLoad(t, a, 9))
	want, err := a.Outbox()
	if err != nil {
		t.Fatalf("%s: Outbox: %v", what, err)
	}
	checkOutbox(t, b, want)
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		va, oka, erra := a.Meta(k)
		vb, okb, errb := b.Meta(k)
		if erra != nil || errb != nil || oka != okb || string(va) != string(vb) {
			t.Errorf("%s: Meta(%q): joined %q, %v, %v; one by one %q, %v, %v", what, k, vb, okb, errb, va, oka, erra)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
