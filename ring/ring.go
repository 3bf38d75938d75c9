package ring

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// PeerID names one peer of the mesh.
type PeerID string

// String returns the id itself (it makes PeerID a consistent.Member, as
// the tests use it).
func (id PeerID) String() string { return string(id) }

// Epoch versions the membership. The caller owns it and bumps it on every
// join or forget; the Ring only carries it so that messages can name the
// placement they were computed with.
type Epoch uint64

// Ring is the placement of a fixed number of partitions over one membership:
// for each partition, an ordered replica set. A Ring is immutable after New
// and safe for concurrent reads.
//
// Invariants (checked by checkInvariants in the tests and the fuzz test):
//  1. members is sorted and has no duplicates or "".
//  2. Every partition has exactly k = min(Replicas, len(members)) distinct
//     replicas.
//  3. The first replica of a partition is consistent's bounded-load owner of
//     it; the others follow it on the circle of member-name hashes.
type Ring struct {
	cfg     Config   // validated placement config
	epoch   Epoch    // membership version given to New
	members []PeerID // sorted, distinct, never ""
	k       int      // replicas per partition: min(cfg.Replicas, len(members))
	// reps holds the replica sets, partition p at reps[p*k:(p+1)*k], as
	// indexes into members, primary first.
	reps []int32
	// byMember lists, for each member index, the partitions whose replica
	// set holds it, in increasing order.
	byMember [][]int32
}

// New places cfg.Partitions partitions over members. Duplicate members are
// ignored and order does not matter: members are sorted before they reach
// consistent, whose tie-breaks depend on insertion order. Zero members is
// allowed; every replica set is then empty. New returns an error (and never
// panics) when cfg or the member count is invalid (see ValidateMembers) or a
// member is "".
func New(cfg Config, epoch Epoch, members []PeerID) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sorted := slices.Clone(members)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) > 0 && sorted[0] == "" {
		return nil, ErrEmptyPeerID
	}
	if err := cfg.ValidateMembers(len(sorted)); err != nil {
		return nil, err
	}
	r := &Ring{cfg: cfg, epoch: epoch, members: sorted, k: min(cfg.Replicas, len(sorted))}
	if len(sorted) == 0 {
		return r, nil
	}
	r.reps = place(cfg, sorted, r.k)
	// byMember's lists share one array, each cut to its member's count.
	count := make([]int, len(sorted))
	for _, m := range r.reps {
		count[m]++
	}
	all := make([]int32, len(r.reps))
	r.byMember = make([][]int32, len(sorted))
	for m, c := range count {
		r.byMember[m], all = all[:0:c], all[c:]
	}
	for i, m := range r.reps {
		r.byMember[m] = append(r.byMember[m], int32(i/r.k))
	}
	return r, nil
}

// place computes each partition's owner as consistent does (primaries)
// and appends the k-1 members that follow the owner on the circle of
// member-name hashes. This is what consistent.GetClosestNForPartition
// returns, computed once per ring instead of hashing and sorting all
// members on every call (and with a deterministic tie-break should two
// names share a hash).
func place(cfg Config, members []PeerID, k int) []int32 {
	return withReplicas(cfg, members, primaries(cfg, members), k)
}

// withReplicas returns, for each partition, its owner (owners[p], an
// index in members) and the k-1 members after it on the circle, or the
// spread replicas (cfg.Placement).
func withReplicas(cfg Config, members []PeerID, owners []int32, k int) []int32 {
	// circle lists member indexes by (xxhash(name), name); at[i] is the
	// position of members[i] in circle.
	circle := make([]int32, len(members))
	sums := make([]uint64, len(members))
	for i, m := range members {
		circle[i], sums[i] = int32(i), xxhash.Sum64String(string(m))
	}
	slices.SortFunc(circle, func(a, b int32) int {
		return cmp.Or(cmp.Compare(sums[a], sums[b]), cmp.Compare(members[a], members[b]))
	})
	at := make([]int, len(members))
	for pos, i := range circle {
		at[i] = pos
	}
	reps := make([]int32, 0, cfg.Partitions*k)
	for _, owner := range owners {
		for j := range k {
			reps = append(reps, circle[(at[owner]+j)%len(circle)])
		}
	}
	if cfg.Placement == PlacementSpread {
		spreadReplicas(reps, members, k, cfg.Partitions)
	}
	return reps
}

// PartitionOf returns the partition of key among partitions:
// xxhash64(key) mod partitions, which is what consistent.FindPartitionID
// computes with the xxhash hasher. It needs no Ring, so any peer (and the
// simulator) can route a key. It panics if partitions < 1.
func PartitionOf(key string, partitions int) int {
	if partitions < 1 {
		panic(fmt.Sprintf("ring: PartitionOf with %d partitions", partitions))
	}
	return int(xxhash.Sum64String(key) % uint64(partitions))
}

// Epoch returns the membership version given to New.
func (r *Ring) Epoch() Epoch { return r.epoch }

// Config returns the configuration the ring was built with.
func (r *Ring) Config() Config { return r.cfg }

// Members returns a sorted copy of the membership.
func (r *Ring) Members() []PeerID { return slices.Clone(r.members) }

// Partitions returns the number of partitions.
func (r *Ring) Partitions() int { return r.cfg.Partitions }

// Partition returns the partition of key; see PartitionOf.
func (r *Ring) Partition(key string) int { return PartitionOf(key, r.cfg.Partitions) }

// Replicas returns a copy of partition p's replica set, primary first, then
// the members that follow it on the circle of member-name hashes. It has
// min(Replicas, len(Members())) distinct peers, none when the membership is
// empty. It panics if p is out of range.
func (r *Ring) Replicas(p int) []PeerID {
	idx := r.replicaIdx(p)
	out := make([]PeerID, len(idx))
	for i, m := range idx {
		out[i] = r.members[m]
	}
	return out
}

// IsReplica reports whether id is in partition p's replica set. It panics if
// p is out of range.
func (r *Ring) IsReplica(p int, id PeerID) bool {
	m, ok := slices.BinarySearch(r.members, id)
	return ok && slices.Contains(r.replicaIdx(p), int32(m))
}

// PartitionsOf returns, in increasing order, the partitions whose replica set
// holds id; nil when id is not a member.
func (r *Ring) PartitionsOf(id PeerID) []int {
	m, ok := slices.BinarySearch(r.members, id)
	if !ok {
		return nil
	}
	out := make([]int, len(r.byMember[m]))
	for i, p := range r.byMember[m] {
		out[i] = int(p)
	}
	return out
}

// replicaIdx returns partition p's replica set as member indexes (shared;
// do not modify).
func (r *Ring) replicaIdx(p int) []int32 {
	if p < 0 || p >= r.cfg.Partitions {
		panic(fmt.Sprintf("ring: partition %d out of range [0,%d)", p, r.cfg.Partitions))
	}
	return r.reps[p*r.k : (p+1)*r.k]
}

// LogValue summarizes the ring for log/slog without listing every partition.
func (r *Ring) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Uint64("epoch", uint64(r.epoch)),
		slog.Int("members", len(r.members)),
		slog.Int("partitions", r.cfg.Partitions),
		slog.Int("replicas", r.k),
	)
}

// Moved returns, in increasing order, the partitions whose replica set (as a
// set: order is ignored) differs between a and b. A join or forget changes
// exactly these partitions' Raft configurations. It panics if a and b have
// different partition counts, which no mesh can have.
func Moved(a, b *Ring) []int {
	if a.cfg.Partitions != b.cfg.Partitions {
		panic(fmt.Sprintf("ring: Moved between %d and %d partitions", a.cfg.Partitions, b.cfg.Partitions))
	}
	var out []int
	for p := range a.cfg.Partitions {
		if !sameSet(a.Replicas(p), b.Replicas(p)) {
			out = append(out, p)
		}
	}
	return out
}

// sameSet reports whether x and y hold the same distinct peers. It sorts x
// and y in place; both are small (at most MaxReplicas).
func sameSet(x, y []PeerID) bool {
	if len(x) != len(y) {
		return false
	}
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
