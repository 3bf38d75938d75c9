package ring

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// primaries returns each partition's primary, as an index into members
// (sorted, distinct): the owner that github.com/buraksezer/consistent
// v0.10.0 gives it when built as consistent.New(members in sorted order,
// Config{Hasher: xxhash, PartitionCount: cfg.Partitions,
// ReplicationFactor: vnodes, Load: cfg.Load}), computed the same way but
// with the circle sorted once. consistent.New inserts member after member
// and re-sorts its whole circle after each insertion, which is quadratic in
// the membership (2.8 s at 2,048 members); this is O(members x vnodes x
// log) plus the bounded-load walk. TestPrimariesMatchConsistent and every
// checkInvariants compare the two.
//
// What is consistent's, and must stay so (it is part of the placement):
//   - member m's points on the circle are xxhash("<m><i>") for i in
//     0..vnodes-1 (fmt's "%s%d"); two points with the same hash are both on
//     the circle (the sorted list keeps duplicates) and both belong to the
//     member inserted last, i.e. the greatest name;
//   - partition p starts at the first point >= xxhash(p as 8 little-endian
//     bytes), wrapping to the first point, and goes to the first member
//     clockwise whose load+1 <= ceil(float64(partitions/members) * Load);
//   - partitions are placed in increasing order.
//
// It panics where consistent would ("not enough room"), which
// Config.ValidateMembers rules out.
func primaries(cfg Config, members []PeerID) []int32 {
	if len(members) == 1 {
		// Load > 1 leaves room for every partition on the one member (a
		// peer that knows only itself builds this ring at start).
		return make([]int32, cfg.Partitions)
	}
	type point struct {
		h uint64
		m int32
	}
	circle := make([]point, 0, len(members)*vnodes)
	var buf []byte
	for i, m := range members {
		for v := range vnodes {
			buf = strconv.AppendInt(append(buf[:0], m...), int64(v), 10)
			circle = append(circle, point{xxhash.Sum64(buf), int32(i)})
		}
	}
	slices.SortFunc(circle, func(a, b point) int { return cmp.Compare(a.h, b.h) })
	// A hash that several points share is the last inserted member's.
	for i := len(circle) - 2; i >= 0; i-- {
		if circle[i].h == circle[i+1].h {
			circle[i].m = max(circle[i].m, circle[i+1].m)
		}
	}
	for i := 1; i < len(circle); i++ {
		if circle[i].h == circle[i-1].h {
			circle[i].m = circle[i-1].m
		}
	}
	avg := math.Ceil(float64(uint64(cfg.Partitions)/uint64(len(members))) * cfg.Load)
	loads := make([]float64, len(members))
	out := make([]int32, cfg.Partitions)
	var bs [8]byte
	for p := range cfg.Partitions {
		binary.LittleEndian.PutUint64(bs[:], uint64(p))
		key := xxhash.Sum64(bs[:])
		idx := sort.Search(len(circle), func(i int) bool { return circle[i].h >= key })
		if idx >= len(circle) {
			idx = 0
		}
		for count := 1; ; count++ {
			if count >= len(circle) {
				panic(fmt.Sprintf("ring: not enough room to distribute partition %d", p))
			}
			if m := circle[idx].m; loads[m]+1 <= avg {
				out[p] = m
				loads[m]++
				break
			}
			if idx++; idx >= len(circle) {
				idx = 0
			}
		}
	}
	return out
}
