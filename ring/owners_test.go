package ring

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// naiveOwners is the sort-based reference for rules 1-2 of PreferredOwners
// (docs/design.md's rule): it works on peer ids and maps, recounts from scratch
// and picks the taker by sorting the candidates.
func naiveOwners(r *Ring, live func(PeerID) bool) []PeerID {
	owners := make([]PeerID, r.Partitions())
	count := map[PeerID]int{}
	eligible := map[PeerID]bool{}
	led := 0
	for p := range owners {
		for _, m := range r.Replicas(p) {
			if live(m) {
				eligible[m] = true
				if owners[p] == "" {
					owners[p] = m
				}
			}
		}
		if owners[p] != "" {
			count[owners[p]]++
			led++
		}
	}
	if len(eligible) == 0 {
		return owners
	}
	mean := led / len(eligible)
	if led%len(eligible) != 0 {
		mean++
	}
	for p, o := range owners {
		if o == "" || count[o] <= mean {
			continue
		}
		type cand struct {
			id    PeerID
			order int
		}
		var cands []cand
		for i, m := range r.Replicas(p) {
			if m != o && live(m) && count[m] < mean {
				cands = append(cands, cand{m, i})
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			if count[cands[i].id] != count[cands[j].id] {
				return count[cands[i].id] < count[cands[j].id]
			}
			return cands[i].order < cands[j].order
		})
		if len(cands) > 0 {
			count[o]--
			count[cands[0].id]++
			owners[p] = cands[0].id
		}
	}
	return owners
}

// checkOwners checks that each preferred owner is a live replica of its
// partition, and "" exactly when the partition has no live replica.
func checkOwners(tb testing.TB, r *Ring, live func(PeerID) bool, owners []PeerID) {
	tb.Helper()
	if len(owners) != r.Partitions() {
		tb.Fatalf("len(PreferredOwners) = %d; want %d", len(owners), r.Partitions())
	}
	for p, o := range owners {
		anyLive := slices.ContainsFunc(r.Replicas(p), live)
		if o == "" {
			if anyLive {
				tb.Fatalf("PreferredOwners[%d] = \"\" but %v has a live replica", p, r.Replicas(p))
			}
			continue
		}
		if !live(o) || !r.IsReplica(p, o) {
			tb.Fatalf("PreferredOwners[%d] = %s; not a live replica of %v", p, o, r.Replicas(p))
		}
	}
}

// rules12 runs rules 1-2 of PreferredOwners alone.
func rules12(r *Ring, live func(PeerID) bool) []PeerID {
	alive := make([]bool, len(r.members))
	for i, m := range r.members {
		alive[i] = live(m)
	}
	b := r.firstLive(alive)
	b.onePass(r)
	out := make([]PeerID, r.Partitions())
	for p, o := range b.owner {
		if o >= 0 {
			out[p] = r.members[o]
		}
	}
	return out
}

// canImprove is the naive check of rule 3's stopping condition: it computes,
// by depth-first search over peer ids, which owners each live peer can take
// a partition from (directly or along a chain), and reports a pair whose
// counts differ by two or more.
func canImprove(r *Ring, live func(PeerID) bool, owners []PeerID) (from, to PeerID, ok bool) {
	count := map[PeerID]int{}
	for _, o := range owners {
		if o != "" {
			count[o]++
		}
	}
	takes := map[PeerID]map[PeerID]bool{} // takes[x][y]: x is a live replica of a partition y leads
	for p, o := range owners {
		for _, x := range r.Replicas(p) {
			if o != "" && x != o && live(x) {
				if takes[x] == nil {
					takes[x] = map[PeerID]bool{}
				}
				takes[x][o] = true
			}
		}
	}
	for _, u := range r.Members() {
		if !live(u) {
			continue
		}
		reach := map[PeerID]bool{u: true}
		stack := []PeerID{u}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for y := range takes[x] {
				if !reach[y] {
					reach[y] = true
					stack = append(stack, y)
				}
			}
		}
		for y := range reach {
			if count[y] >= count[u]+2 {
				return y, u, true
			}
		}
	}
	return "", "", false
}

func TestPreferredOwnersMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for iter := range 300 {
		n := 1 + rng.IntN(40)
		cfg := Config{Partitions: max(n, 1+rng.IntN(512)), Replicas: 1 + rng.IntN(5), Load: 1.01 + rng.Float64()}
		r := MustNew(t, cfg, 1, randomIDs(rng, n))
		dead := map[PeerID]bool{}
		for _, m := range r.Members() {
			if rng.IntN(4) == 0 {
				dead[m] = true
			}
		}
		live := func(id PeerID) bool { return !dead[id] }
		if got, want := rules12(r, live), naiveOwners(r, live); !slices.Equal(got, want) {
			t.Fatalf("iter %d (%+v, %d members, %d dead): rules 1-2 differ from naive", iter, cfg, n, len(dead))
		}
		got := r.PreferredOwners(live)
		checkOwners(t, r, live, got)
		if from, to, ok := canImprove(r, live, got); ok {
			t.Fatalf("iter %d: %s could still take a partition from %s along a chain", iter, to, from)
		}
		if again := r.PreferredOwners(live); !slices.Equal(got, again) {
			t.Fatalf("iter %d: PreferredOwners not deterministic", iter)
		}
	}
}

// TestPreferredOwnersOptimal compares, on rings small enough to enumerate
// every assignment of partitions to live replicas, the sorted leadership
// counts of PreferredOwners with the assignment of least sum of squares.
func TestPreferredOwnersOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for iter := range 150 {
		n := 2 + rng.IntN(4)
		cfg := Config{Partitions: max(n, 2+rng.IntN(7)), Replicas: 1 + rng.IntN(3), Load: 1.01 + rng.Float64()}
		r := MustNew(t, cfg, 1, randomIDs(rng, n))
		dead := r.Members()[rng.IntN(n)]
		live := func(id PeerID) bool { return id != dead || iter%2 == 0 }
		got := leadCounts(r.PreferredOwners(live), r.Members())
		want := bruteForce(r, live)
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d (%+v, %d members): counts %v; optimum %v", iter, cfg, n, got, want)
		}
	}
}

// leadCounts returns the sorted number of partitions each member leads.
func leadCounts(owners, members []PeerID) []int {
	count := map[PeerID]int{}
	for _, o := range owners {
		count[o]++
	}
	out := make([]int, len(members))
	for i, m := range members {
		out[i] = count[m]
	}
	slices.Sort(out)
	return out
}

// bruteForce enumerates every assignment of partitions to live replicas and
// returns the sorted counts of one with the least sum of squares.
func bruteForce(r *Ring, live func(PeerID) bool) []int {
	var best []int
	bestCost := -1
	owners := make([]PeerID, r.Partitions())
	var rec func(p int)
	rec = func(p int) {
		if p == len(owners) {
			c := leadCounts(owners, r.Members())
			cost := 0
			for _, v := range c {
				cost += v * v
			}
			if bestCost < 0 || cost < bestCost {
				best, bestCost = c, cost
			}
			return
		}
		owners[p] = ""
		any := false
		for _, m := range r.Replicas(p) {
			if live(m) {
				owners[p], any = m, true
				rec(p + 1)
			}
		}
		if !any {
			rec(p + 1)
		}
	}
	rec(0)
	return best
}

// spread returns max/mean and min/mean of the leadership counts over peers,
// where every peer in ids counts (zero when it leads nothing).
func spread(owners []PeerID, ids []PeerID) (hi, lo float64, zero int) {
	count := map[PeerID]int{}
	for _, o := range owners {
		count[o]++
	}
	mean := float64(len(owners)) / float64(len(ids))
	mx, mn := 0, len(owners)
	for _, id := range ids {
		mx, mn = max(mx, count[id]), min(mn, count[id])
		if count[id] == 0 {
			zero++
		}
	}
	return float64(mx) / mean, float64(mn) / mean, zero
}

// TestLeadershipBalance reports max/mean and min/mean of leadership with all
// peers live, for the ring's primaries alone and for PreferredOwners, over the
// named membership and 50 random ones per size.
func TestLeadershipBalance(t *testing.T) {
	all := func(PeerID) bool { return true }
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{3, 5, 10, 50} {
		sets := [][]PeerID{named(n)}
		for range 50 {
			sets = append(sets, randomIDs(rng, n))
		}
		var worst struct{ ringHi, ringLo, prefHi, prefLo float64 }
		worst.ringLo, worst.prefLo = 1e9, 1e9
		var sumPrefLo, sumRingLo float64
		zeros := 0
		for i, ids := range sets {
			r := MustNew(t, DefaultConfig(), 1, ids)
			primaries := make([]PeerID, r.Partitions())
			for p := range primaries {
				primaries[p] = r.Replicas(p)[0]
			}
			rh, rl, _ := spread(primaries, ids)
			ph, pl, z := spread(r.PreferredOwners(all), ids)
			worst.ringHi, worst.ringLo = max(worst.ringHi, rh), min(worst.ringLo, rl)
			worst.prefHi, worst.prefLo = max(worst.prefHi, ph), min(worst.prefLo, pl)
			sumPrefLo, sumRingLo = sumPrefLo+pl, sumRingLo+rl
			zeros += z
			if i == 0 {
				t.Logf("n=%2d named: ring max/mean %.2f min/mean %.2f; preferred max/mean %.2f min/mean %.2f",
					n, rh, rl, ph, pl)
			}
			if n <= 10 && (pl < 0.5 || z > 0) {
				t.Errorf("n=%d set %d: preferred min/mean %.2f, %d peers lead nothing", n, i, pl, z)
			}
		}
		t.Logf("n=%2d over %d sets: ring worst max/mean %.2f min/mean %.2f (avg min/mean %.2f); "+
			"preferred worst max/mean %.2f min/mean %.2f (avg min/mean %.2f); peers leading nothing: %d",
			n, len(sets), worst.ringHi, worst.ringLo, sumRingLo/float64(len(sets)),
			worst.prefHi, worst.prefLo, sumPrefLo/float64(len(sets)), zeros)
	}
}

// TestPreferredOwnersFailover checks that a dead peer's partitions go to live
// replicas, that leadership stays even among the survivors, and that the
// owners of partitions the dead peer did not lead rarely change.
func TestPreferredOwnersFailover(t *testing.T) {
	r := MustNew(t, DefaultConfig(), 1, named(5))
	before := r.PreferredOwners(func(PeerID) bool { return true })
	dead := PeerID("peer-02")
	live := func(id PeerID) bool { return id != dead }
	after := r.PreferredOwners(live)
	checkOwners(t, r, live, after)
	kept := 0
	for p := range before {
		if before[p] != dead && before[p] == after[p] {
			kept++
		}
	}
	survivors := slices.DeleteFunc(named(5), func(id PeerID) bool { return id == dead })
	hi, lo, zero := spread(after, survivors)
	t.Logf("5 peers, one dead: survivors max/mean %.2f min/mean %.2f; %d of %d partitions kept their owner",
		hi, lo, kept, len(before)-countOf(before, dead))
	if zero > 0 || lo < 0.5 {
		t.Errorf("after one death: min/mean %.2f, %d survivors lead nothing", lo, zero)
	}
	none := r.PreferredOwners(func(PeerID) bool { return false })
	checkOwners(t, r, func(PeerID) bool { return false }, none)
}

func countOf(xs []PeerID, x PeerID) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
