package shard

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The ready queue pops in priority order, then submission order, whatever
// was pushed and removed before, and every queued task knows its place.
func TestReadyQueueOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		var q readyQueue
		var in []*task
		seq := uint64(0)
		for range r.IntN(300) {
			switch k := r.IntN(10); {
			case k < 6 || len(in) == 0:
				seq++
				tk := &task{pol: &TaskSpec{Priority: int32(r.IntN(4))}, seq: seq, heapIdx: -1}
				q.Push(tk)
				in = append(in, tk)
			case k < 8:
				i := r.IntN(len(in))
				q.Remove(in[i])
				if in[i].heapIdx != -1 {
					t.Fatalf("round %d: a removed task keeps heap index %d", round, in[i].heapIdx)
				}
				in = slices.Delete(in, i, i+1)
			default:
				want := slices.MinFunc(in, func(a, b *task) int {
					if a.pol.Priority != b.pol.Priority {
						return int(b.pol.Priority - a.pol.Priority)
					}
					return int(a.seq) - int(b.seq)
				})
				if got := q.Pop(); got != want {
					t.Fatalf("round %d: Pop = seq %d, want seq %d", round, got.seq, want.seq)
				}
				in = slices.DeleteFunc(in, func(x *task) bool { return x == want })
			}
			if q.Len() != len(in) {
				t.Fatalf("round %d: %d queued, want %d", round, q.Len(), len(in))
			}
			for i, it := range q.items {
				if it.t.heapIdx != int32(i) {
					t.Fatalf("round %d: item %d's task has heap index %d", round, i, it.t.heapIdx)
				}
				if i > 0 && q.less(i, (i-1)/2) {
					t.Fatalf("round %d: item %d comes before its parent", round, i)
				}
			}
		}
	}
}
