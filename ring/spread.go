package ring

import (
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Placement chooses how a partition's replicas after the primary are
// picked. It is part of the placement: every peer of a mesh must use the
// same one (see Config.Placement).
type Placement uint8

const (
	// PlacementCircle (the zero value) takes the k-1 members that follow
	// the primary on the circle of member-name hashes, as consistent's
	// GetClosestNForPartition does. A member's replica count is then the
	// primaries of itself and of the k-1 members before it on that circle,
	// which ranges from a quarter to 1.2 times the mean at 1,000 members x
	// 4,096 partitions, and the members that share partitions form a chain
	// along the circle, so a stretch of the circle with few primaries
	// cannot borrow leadership from far away.
	PlacementCircle Placement = iota
	// PlacementSpread keeps the primary and ranks the members for each
	// partition by rendezvous hashing (mix(hash(member) ^ mix(partition+1)),
	// highest first). Each member first reserves a replica in the
	// partitions that rank it highest (reserve); then, in increasing
	// partition order, the remaining replicas are the highest-ranked
	// members not yet chosen that hold fewer than spreadLoad times the mean
	// replica sets (primaries counted). The members that share partitions
	// are then a random graph rather than a chain, and PreferredOwners
	// keeps every member within 0.73-1.22 of the mean leadership at 1,000
	// members (docs/performance.md, "Leadership at scale").
	PlacementSpread
)

// spreadLoad bounds the replica sets a member is in under PlacementSpread,
// over the mean. It is part of the placement.
const spreadLoad = 1.25

// spreadFloor: under PlacementSpread a member reserves a replica in
// 1/spreadFloor of the mean number of further replicas per member (4 of
// 8.2 at 1,000 members x 4,096 partitions, R=3). It is part of the
// placement.
const spreadFloor = 2

// String names the placement as the --placement flag does.
func (p Placement) String() string {
	switch p {
	case PlacementCircle:
		return "circle"
	case PlacementSpread:
		return "spread"
	}
	return "unknown"
}

// ParsePlacement is String's inverse.
func ParsePlacement(s string) (Placement, error) {
	switch s {
	case "circle", "":
		return PlacementCircle, nil
	case "spread":
		return PlacementSpread, nil
	}
	return 0, ErrPlacement
}

// spreadReplicas replaces the replicas after the primary in reps (k per
// partition, primary first) by PlacementSpread's choice: first each
// member's reserved partitions (reserve), then, partition by partition,
// the highest-ranked members below the load limit. It ranks every member
// for every partition twice: 8 million mixes at 1,000 members x 4,096
// partitions.
func spreadReplicas(reps []int32, members []PeerID, k, partitions int) {
	if k < 2 {
		return
	}
	sums := make([]uint64, len(members))
	for i, m := range members {
		sums[i] = xxhash.Sum64String(string(m))
	}
	salts := make([]uint64, partitions)
	for p := range salts {
		salts[p] = mix(uint64(p) + 1)
	}
	load := make([]int, len(members))
	for p := range partitions {
		load[reps[p*k]]++
	}
	filled := reserve(reps, sums, salts, k, load)
	// A member takes further replicas while it holds fewer than limit
	// (primaries and reservations counted); limit*members >=
	// partitions*k, so one is always left.
	limit := int(math.Ceil(float64(partitions*k) / float64(len(members)) * spreadLoad))
	best := make([]ranked, 0, k)
	for p := range partitions {
		set, from := reps[p*k:(p+1)*k], filled[p]
		if from == k {
			continue
		}
		// One pass ranks every member once and keeps the k-from best
		// below the limit, highest first. A pick raises only its own load
		// (and it is chosen already), so the next replica is the next of
		// this list, as a pass per replica would find.
		best = bestBelow(best[:0], sums, salts[p], load, limit, set[:from], k-from)
		if len(best) < k-from {
			pickEach(set, from, sums, salts[p], load, limit) // never needed, kept as a guard
			continue
		}
		for j, c := range best {
			set[from+j] = c.m
			load[c.m]++
		}
	}
}

// bestBelow appends to best (empty) the n highest-ranked members for the
// partition of salt that hold fewer than limit replica sets and are not
// in chosen, highest first; fewer when fewer qualify.
func bestBelow(best []ranked, sums []uint64, salt uint64, load []int, limit int, chosen []int32, n int) []ranked {
	for i, h := range sums {
		if load[i] >= limit {
			continue
		}
		c := ranked{mix(h ^ salt), int32(i)}
		if len(best) == n && !c.above(best[n-1]) || slices.Contains(chosen, c.m) {
			continue
		}
		best = insertTop(best, c, n)
	}
	return best
}

// insertTop puts c in its place in top (highest first, at most n long),
// dropping the last when top is full; the caller checked that c ranks
// above that last.
func insertTop(top []ranked, c ranked, n int) []ranked {
	at := min(len(top), n-1)
	if len(top) < n {
		top = append(top, c)
	}
	for at > 0 && c.above(top[at-1]) {
		top[at] = top[at-1]
		at--
	}
	top[at] = c
	return top
}

// pickEach fills set[from:] replica by replica, each the highest-ranked
// member not chosen yet below the limit, or any when none is.
func pickEach(set []int32, from int, sums []uint64, salt uint64, load []int, limit int) {
	for j := from; j < len(set); j++ {
		best := ranked{m: -1}
		for _, capped := range []bool{true, false} {
			for i, h := range sums {
				c := ranked{mix(h ^ salt), int32(i)}
				if (!capped || load[i] < limit) && (best.m < 0 || c.above(best)) && !slices.Contains(set[:j], c.m) {
					best = c
				}
			}
			if best.m >= 0 {
				break
			}
		}
		set[j] = best.m
		load[best.m]++
	}
}

// reserve gives every member, before any load limit, a replica in the
// spreadFloor partitions (of those it is not the primary of) that rank it
// highest, so that no member is in only a handful of replica sets (the
// rest are placed by rank under a load limit, and a member that ranks low
// everywhere would get few). A partition keeps at most k-1 reservations,
// the highest-ranked. It writes them to reps after the primary, adds
// them to load, and returns how many replicas each partition now has.
func reserve(reps []int32, sums, salts []uint64, k int, load []int) []int {
	partitions, n := len(salts), len(sums)
	floor := partitions * (k - 1) / n / spreadFloor
	filled := make([]int, partitions)
	for p := range filled {
		filled[p] = 1
	}
	if floor == 0 {
		return filled
	}
	// Each member's reservations, then grouped by partition (a counting
	// sort: one allocation, not one list per partition).
	type reservation struct {
		p int32
		r ranked // the member in .m
	}
	all := make([]reservation, 0, min(n*floor, partitions*(k-1)))
	top := make([]ranked, 0, max(floor+1, min(partitions, 1024))) // by partition index in .m
	for i, h := range sums {
		top = topPartitions(top[:0], reps, salts, k, int32(i), h, floor)
		for _, c := range top {
			all = append(all, reservation{c.m, ranked{c.h, int32(i)}})
		}
	}
	start := make([]int32, partitions+1)
	for _, e := range all {
		start[e.p+1]++
	}
	for p := range partitions {
		start[p+1] += start[p]
	}
	byPart, at := make([]ranked, len(all)), slices.Clone(start[:partitions])
	for _, e := range all {
		byPart[at[e.p]] = e.r
		at[e.p]++
	}
	for p := range partitions {
		rs := byPart[start[p]:start[p+1]]
		slices.SortFunc(rs, byRank)
		for _, c := range rs[:min(len(rs), k-1)] {
			reps[p*k+filled[p]] = c.m
			load[c.m]++
			filled[p]++
		}
	}
	return filled
}

// topPartitions appends to top the floor partitions, of those member m
// (hash h) is not the primary of, that rank it highest, highest first.
// A few are kept in order as the partitions go by; many (a small
// membership: floor is half the partitions per member) are all ranked
// and sorted, where keeping them in order moved the list for nearly every
// partition: each of 5,000 peers that knew only itself and its seed
// built a ring of 2 members x 16,384 partitions, and those builds were
// most of a forming mesh's CPU.
func topPartitions(top []ranked, reps []int32, salts []uint64, k int, m int32, h uint64, floor int) []ranked {
	if floor > 32 {
		for p, salt := range salts {
			if reps[p*k] != m {
				top = append(top, ranked{mix(h ^ salt), int32(p)})
			}
		}
		top = selectTop(top, floor)
		slices.SortFunc(top, byRank)
		return top
	}
	for p, salt := range salts {
		c := ranked{mix(h ^ salt), int32(p)}
		if reps[p*k] == m || len(top) == floor && !c.above(top[floor-1]) {
			continue
		}
		top = insertTop(top, c, floor)
	}
	return top
}

// selectTop returns the first n of rs in byRank order, in some order
// (all of rs when it is no longer): a quickselect, where a sort of all
// ranked the whole of a small membership's partitions to keep a tenth.
// Ranks are distinct (above breaks ties by .m), so the n are the same
// whatever the pivots.
func selectTop(rs []ranked, n int) []ranked {
	if n >= len(rs) {
		return rs
	}
	lo, hi := 0, len(rs) // the n-th is in rs[lo:hi]
	for rounds := 0; hi-lo > 16; rounds++ {
		if rounds > 64 { // pivots this bad are not hash mixes: sort the rest
			slices.SortFunc(rs[lo:hi], byRank)
			return rs[:n]
		}
		// Median of three as the pivot, moved to the end; Lomuto's scheme
		// puts every rank above it before it.
		a, b, c := lo, lo+(hi-lo)/2, hi-1
		if rs[b].above(rs[a]) {
			a, b = b, a
		}
		if rs[c].above(rs[b]) {
			b = c
			if rs[b].above(rs[a]) {
				b = a
			}
		}
		rs[b], rs[hi-1] = rs[hi-1], rs[b]
		pivot, at := rs[hi-1], lo
		for i := lo; i < hi-1; i++ {
			if rs[i].above(pivot) {
				rs[i], rs[at] = rs[at], rs[i]
				at++
			}
		}
		rs[at], rs[hi-1] = rs[hi-1], rs[at]
		switch {
		case at == n || at+1 == n:
			return rs[:n]
		case at > n:
			hi = at
		default:
			lo = at + 1
		}
	}
	slices.SortFunc(rs[lo:hi], byRank)
	return rs[:n]
}

// ranked is a member's rendezvous rank for one partition.
type ranked struct {
	h uint64
	m int32
}

// above orders by rank, highest first; ties (two members whose mixes
// collide) by member index, which is sorted name order.
func (a ranked) above(b ranked) bool {
	return a.h > b.h || a.h == b.h && a.m < b.m
}

// byRank orders ranks highest first (above), for slices.SortFunc.
func byRank(a, b ranked) int {
	switch {
	case a.above(b):
		return -1
	case b.above(a):
		return 1
	}
	return 0
}

// mix is the splitmix64 finalizer: a bijection of 64 bits whose output bits
// each depend on every input bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
