package node

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A partSet's count of words not zero, which lets a walk of an empty set
// read nothing, stays right through any mix of marks set and cleared, and
// a walk yields exactly the marked partitions a node holds.
func TestPartSetCount(t *testing.T) {
	const parts = 300
	n := &Node{parts: make([]*partition, parts)}
	for i := range n.parts {
		if i%3 != 0 {
			n.parts[i] = &partition{id: i}
		}
	}
	r := newPartSet(parts)
	marked := map[int]bool{}
	rng := rand.New(rand.NewPCG(5, 6))
	for op := range 20000 {
		i, on := rng.IntN(parts), rng.IntN(3) == 0
		r.set(i, on)
		marked[i] = on
		nz := 0
		for _, w := range r.w {
			if w != 0 {
				nz++
			}
		}
		if r.nz != nz {
			t.Fatalf("op %d: %d words counted not zero; %d are", op, r.nz, nz)
		}
		if op%100 != 0 {
			continue
		}
		var got, want []int
		for p := range r.held(n) {
			got = append(got, p.id)
		}
		for i := range parts {
			if marked[i] && n.parts[i] != nil {
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("op %d: walk yields %v; want %v", op, got, want)
		}
	}
}
