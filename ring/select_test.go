package ring

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// selectTop keeps the same n ranks a sort would, whatever the order it is
// given them in: random, sorted either way, or with every hash equal (ties
// broken by .m), across the sizes where it sorts what is left.
func TestSelectTopMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := []func(i int) uint64{
		func(int) uint64 { return rng.Uint64() },
		func(i int) uint64 { return uint64(i) },
		func(i int) uint64 { return ^uint64(i) },
		func(int) uint64 { return 42 },
		func(int) uint64 { return rng.Uint64N(4) },
	}
	for trial := range 2000 {
		size := rng.IntN(3000)
		if trial%3 == 0 {
			size = rng.IntN(40)
		}
		shape := shapes[trial%len(shapes)]
		rs := make([]ranked, size)
		for i := range rs {
			rs[i] = ranked{shape(i), int32(rng.IntN(1 << 20))}
		}
		// Distinct ranks, as topPartitions gives (one per partition).
		slices.SortFunc(rs, func(a, b ranked) int { return int(a.m - b.m) })
		rs = slices.CompactFunc(rs, func(a, b ranked) bool { return a.m == b.m })
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		n := rng.IntN(len(rs) + 2)
		want := slices.SortedFunc(slices.Values(rs), byRank)[:min(n, len(rs))]
		got := selectTop(slices.Clone(rs), n)
		slices.SortFunc(got, byRank)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d ranks, n %d): %v; want %v", trial, len(rs), n, got, want)
		}
	}
}

// bestBelow, one pass per partition, picks what pickEach, a pass per
// replica, does.
func TestBestBelowMatchesPickEach(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 3000 {
		members, k := 2+rng.IntN(60), 2+rng.IntN(4)
		k = min(k, members)
		sums := make([]uint64, members)
		for i := range sums {
			sums[i] = rng.Uint64()
			if rng.IntN(10) == 0 && i > 0 {
				sums[i] = sums[i-1] // equal ranks: ties go to the lower index
			}
		}
		load := make([]int, members)
		for i := range load {
			load[i] = rng.IntN(6)
		}
		limit := 1 + rng.IntN(6)
		from := 1 + rng.IntN(k-1)
		set := make([]int32, k)
		for j, i := range rng.Perm(members)[:from] {
			set[j] = int32(i)
		}
		salt := rng.Uint64()
		wantSet, wantLoad := slices.Clone(set), slices.Clone(load)
		pickEach(wantSet, from, sums, salt, wantLoad, limit)
		best := bestBelow(nil, sums, salt, load, limit, set[:from], k-from)
		if len(best) < k-from {
			// Too few below the limit: spreadReplicas takes pickEach's way.
			for _, c := range best {
				if load[c.m] >= limit || slices.Contains(set[:from], c.m) {
					t.Fatalf("trial %d: %v picked past the limit or twice", trial, c)
				}
			}
			continue
		}
		for j, c := range best {
			set[from+j] = c.m
			load[c.m]++
		}
		if !slices.Equal(set, wantSet) || !slices.Equal(load, wantLoad) {
			t.Fatalf("trial %d: set %v load %v; want %v %v", trial, set, load, wantSet, wantLoad)
		}
	}
}
