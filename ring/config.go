package ring

import (
	"errors"
	"fmt"
	"math"
)

// Limits on Config. They bound the work New does and the memory a Ring holds.
const (
	// MaxPartitions is the largest Config.Partitions accepted.
	MaxPartitions = 65536
	// MaxReplicas is the largest Config.Replicas accepted. Raft groups of more
	// than a handful of voters only add write latency.
	MaxReplicas = 15
	// MaxMembers is the largest membership New accepts (a mesh may not have
	// more members than partitions either). New sorts the circle of
	// members x vnodes points once (primaries; consistent.New re-sorted it
	// at every member, 2.8 s at 2,048 members), then walks it for each
	// partition; BenchmarkScale reports the build time, which grows about
	// linearly with members x partitions under PlacementSpread.
	MaxMembers = 8192
)

// vnodes is consistent's ReplicationFactor: how many points each member gets
// on the hash circle. It is part of the placement, so every peer of a mesh
// must use the same value; it is a constant, not a Config field. It must be
// at least 2 for the no-panic condition in fits to hold (see fits).
const vnodes = 20

// ErrEmptyPeerID is returned by New for a member whose id is "": that value
// means "no owner" in PreferredOwners.
var ErrEmptyPeerID = errors.New("ring: empty peer id in members")

// ErrPlacement is returned for a Placement that is neither PlacementCircle
// nor PlacementSpread (Config.Validate, ParsePlacement).
var ErrPlacement = errors.New("ring: unknown placement; want circle or spread")

// Config is the placement configuration of a mesh. Every peer of a mesh must
// use the same Config, or they will disagree on owners. It is fixed at the
// first start of a mesh.
type Config struct {
	// Partitions is the number of ring partitions; a key maps to one of them
	// with PartitionOf. It is fixed for the life of a mesh. Range
	// 1..MaxPartitions; default 256. A mesh may not have more members than
	// partitions.
	Partitions int
	// Replicas is R, the size of each partition's replica set (the voters of
	// its Raft group). While the mesh has fewer than R members, the replica
	// set is the whole membership. Range 1..MaxReplicas; default 3.
	Replicas int
	// Load is the bounded-load factor of buraksezer/consistent (the "c" of
	// consistent hashing with bounded loads): no member is the primary of
	// more than ceil(floor(Partitions/members) * Load) partitions. Must be
	// finite and > 1; default 1.25.
	Load float64
	// Placement picks the replicas after the primary; the zero value,
	// PlacementCircle, is the placement of every release before it existed.
	// Like Partitions, it is fixed when a mesh is founded: peers with
	// different placements disagree on every replica set.
	Placement Placement
}

// DefaultConfig returns the default placement: 256 partitions, 3 replicas,
// load factor 1.25.
func DefaultConfig() Config {
	return Config{Partitions: 256, Replicas: 3, Load: 1.25}
}

// Validate reports whether c is usable with some membership. Whether a given
// member count fits is checked by ValidateMembers (and by New).
func (c Config) Validate() error {
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return fmt.Errorf("ring: Partitions = %d; want 1..%d", c.Partitions, MaxPartitions)
	}
	if c.Replicas < 1 || c.Replicas > MaxReplicas {
		return fmt.Errorf("ring: Replicas = %d; want 1..%d", c.Replicas, MaxReplicas)
	}
	// Written as !(> 1) so that NaN is rejected too.
	if !(c.Load > 1) || math.IsInf(c.Load, 0) {
		return fmt.Errorf("ring: Load = %v; want a finite value > 1", c.Load)
	}
	if c.Placement > PlacementSpread {
		return fmt.Errorf("%w: Placement = %d", ErrPlacement, c.Placement)
	}
	return nil
}

// ValidateMembers reports whether c is valid and a membership of n distinct
// peers can be placed with it: n must not exceed MaxMembers, and consistent
// must be able to give every partition a primary (it panics otherwise).
func (c Config) ValidateMembers(n int) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if n < 0 || n > MaxMembers {
		return fmt.Errorf("ring: %d members; want 0..%d", n, MaxMembers)
	}
	if !fits(c.Partitions, n, c.Load) {
		return fmt.Errorf("ring: %d members do not fit in Partitions = %d with Load = %v "+
			"(at most one member per partition; use more partitions)", n, c.Partitions, c.Load)
	}
	return nil
}

// fits reports whether consistent v0.10.0 can distribute partitions over
// members with the given load factor without panicking.
//
// consistent.distributeWithLoad gives partition after partition to the first
// member clockwise whose load+1 <= avg, where
//
//	avg = ceil(float64(partitions / members) * load)   // integer division
//
// and panics ("not enough room to distribute partitions") after walking
// len(circle)-1 points without finding one. With vnodes >= 2 every member is
// reached within that walk (a member keeps at least 10 distinct points even
// when "%s%d" vnode names collide, because members are inserted in sorted
// order and single-digit suffixes cannot collide), so it panics exactly when
// all members are full while a partition is left: members*avg < partitions.
// The expression below is the same float64 arithmetic consistent does, so the
// rounding is the same. For load > 1 it reduces to members <= partitions
// (avg >= floor(partitions/members)+1); members > partitions gives avg = 0.
// TestFitsMatchesConsistent checks this against consistent itself.
func fits(partitions, members int, load float64) bool {
	if members == 0 {
		return true
	}
	avg := math.Ceil(float64(uint64(partitions)/uint64(members)) * load)
	return float64(members)*avg >= float64(partitions)
}
