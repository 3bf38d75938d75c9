package ring

import (
	"cmp"
	"slices"
)

// PreferredOwners returns, for every partition, the live replica that should
// lead it (its Raft leader), or "" when none of its replicas is live. live is
// called once per member, in sorted order. The result depends only on the
// ring and the live set, so every peer that agrees on both computes the same
// owners.
//
// The rule:
//
//  1. Each partition starts with its first live replica, in replica order.
//     With every member live that is the ring's primary, whose bounded-load
//     placement caps the busiest peer but leaves min/mean at about 0.2-0.8.
//  2. Let eligible be the live members that are a replica of some partition
//     with a live replica, and mean = ceil(led partitions / eligible). One
//     pass over partitions in increasing order: if the owner leads more than
//     mean partitions, leadership moves to the live replica of that partition
//     that leads the fewest (ties: earliest in replica order), provided it
//     leads fewer than mean.
//  3. Rules 1-2 are docs/design.md's. One pass cannot move leadership along a
//     chain (A is above the mean, B at it, C below it, and only B shares a
//     partition with C), and it left one peer of ten at 0.39 of the mean. So,
//     for each eligible member u in order of (count, member) and while it
//     helps, a breadth-first search over "u can take partition p from its
//     owner v, v can take p' from v', ..." finds the nearest owner w that
//     leads at least two more than u, and shifts one partition along the
//     path: u gains one, w loses one, the peers between keep their count.
//     Sweeps repeat until one moves nothing. An assignment with no such path
//     minimizes the largest count and the spread (Harvey, Ladner, Lovász,
//     Tamir, "Semi-matchings for bipartite graphs and load balancing", 2006).
//     Every shift lowers the sum of squared counts, so it terminates; it is
//     also capped at Partitions shifts.
func (r *Ring) PreferredOwners(live func(PeerID) bool) []PeerID {
	out := make([]PeerID, r.cfg.Partitions)
	if r.k == 0 {
		return out
	}
	alive := make([]bool, len(r.members))
	for i, m := range r.members {
		alive[i] = live(m)
	}
	b := r.firstLive(alive)
	b.onePass(r)
	b.augment(r)
	for p, o := range b.owner {
		if o >= 0 {
			out[p] = r.members[o]
		}
	}
	return out
}

// balance is the working state of PreferredOwners.
type balance struct {
	alive    []bool  // by member index
	owner    []int32 // by partition: member index, or -1 when no live replica
	count    []int   // by member index: partitions led
	eligible []int32 // live members that are a replica of a led partition
	mean     int     // ceil(led partitions / len(eligible)); 0 if none
}

// firstLive applies rule 1 and computes rule 2's mean.
func (r *Ring) firstLive(alive []bool) *balance {
	b := &balance{
		alive: alive,
		owner: make([]int32, r.cfg.Partitions),
		count: make([]int, len(r.members)),
	}
	isEligible := make([]bool, len(r.members))
	led := 0
	for p := range r.cfg.Partitions {
		b.owner[p] = -1
		for _, m := range r.replicaIdx(p) {
			if !alive[m] {
				continue
			}
			isEligible[m] = true
			if b.owner[p] < 0 {
				b.owner[p] = m
			}
		}
		if b.owner[p] >= 0 {
			b.count[b.owner[p]]++
			led++
		}
	}
	for m, e := range isEligible {
		if e {
			b.eligible = append(b.eligible, int32(m))
		}
	}
	if n := len(b.eligible); n > 0 {
		b.mean = (led + n - 1) / n
	}
	return b
}

// onePass applies rule 2.
func (b *balance) onePass(r *Ring) {
	for p, o := range b.owner {
		if o < 0 || b.count[o] <= b.mean {
			continue
		}
		best := int32(-1)
		for _, m := range r.replicaIdx(p) {
			if b.alive[m] && b.count[m] < b.mean && (best < 0 || b.count[m] < b.count[best]) {
				best = m
			}
		}
		if best >= 0 {
			b.count[o]--
			b.count[best]++
			b.owner[p] = best
		}
	}
}

// augment applies rule 3.
func (b *balance) augment(r *Ring) {
	s := newSearch(len(r.members))
	shifts := 0
	for moved := true; moved && shifts < r.cfg.Partitions; {
		moved = false
		order := slices.Clone(b.eligible)
		slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(b.count[x], b.count[y]) })
		top := 0
		for _, m := range b.eligible {
			top = max(top, b.count[m])
		}
		for _, u := range order {
			if b.count[u]+2 > top {
				break // nobody leads two more than u; counts only narrow
			}
			for shifts < r.cfg.Partitions && s.shift(r, b, u) {
				moved = true
				shifts++
			}
		}
	}
}

// search holds the breadth-first search state of augment, reused across
// searches; a member is visited in the current search when seen == gen.
type search struct {
	gen    int
	seen   []int   // by member index: generation that visited it
	parent []int32 // by member index: the member that would take via's partition
	via    []int32 // by member index: the partition it would give up
	queue  []int32
}

func newSearch(members int) *search {
	return &search{
		seen:   make([]int, members),
		parent: make([]int32, members),
		via:    make([]int32, members),
	}
}

// shift finds the nearest owner w reachable from u that leads at least
// count[u]+2 partitions and moves one partition along each edge of the path
// to it. It reports whether it found one.
func (s *search) shift(r *Ring, b *balance, u int32) bool {
	s.gen++
	s.seen[u] = s.gen
	s.queue = append(s.queue[:0], u)
	for i := 0; i < len(s.queue); i++ {
		x := s.queue[i]
		for _, p := range r.byMember[x] {
			y := b.owner[p]
			if y < 0 || s.seen[y] == s.gen {
				continue
			}
			s.seen[y], s.parent[y], s.via[y] = s.gen, x, p
			if b.count[y] >= b.count[u]+2 {
				for w := y; w != u; w = s.parent[w] {
					b.owner[s.via[w]] = s.parent[w]
				}
				b.count[y]--
				b.count[u]++
				return true
			}
			s.queue = append(s.queue, y)
		}
	}
	return false
}
