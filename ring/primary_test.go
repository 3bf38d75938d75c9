package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/buraksezer/consistent"
)

// oldPlace is place as it was before primaries: each partition's owner
// asked of consistent.New built over the sorted members (quadratic in
// the membership), then the same circle or spread replicas.
func oldPlace(cfg Config, members []PeerID, k int) []int32 {
	cms := make([]consistent.Member, len(members))
	for i, m := range members {
		cms[i] = m
	}
	c := consistent.New(cms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: vnodes,
		Load:              cfg.Load,
	})
	owners := make([]int32, cfg.Partitions)
	for p := range cfg.Partitions {
		owner, ok := slices.BinarySearch(members, c.GetPartitionOwner(p).(PeerID))
		if !ok {
			panic(fmt.Sprintf("ring: consistent owner of partition %d is not a member", p))
		}
		owners[p] = int32(owner)
	}
	return withReplicas(cfg, members, owners, k)
}

// TestPrimariesMatchConsistent: New places every partition exactly as it
// did when it asked consistent.New for the primaries, on random
// memberships: libp2p-like ids, the simulator's, and names whose vnode
// names collide ("a1"+"0" == "a"+"10": the point is the greater name's),
// over partition counts from one per member to many, load factors near 1
// and above, both placements and replica counts 1 to 5.
func TestPrimariesMatchConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	collided := false
	for i, n := range []int{1, 2, 3, 7, 50, 200, 400, 1024} {
		kinds := [][]PeerID{randomIDs(rng, n), simNames(n), fuzzMembers(uint64(i)+1, 2*n)}
		if n == 1024 { // the former MaxMembers: consistent.New takes 0.7 s
			if testing.Short() {
				break
			}
			kinds = kinds[:1]
		}
		for kind, members := range kinds {
			members = slices.Compact(slices.Sorted(slices.Values(members)))
			for _, m := range members {
				_, found := slices.BinarySearch(members, m+"1")
				collided = collided || found
			}
			parts := []int{len(members), 256, 4096, 1 + rng.IntN(3000)}[rng.IntN(4)]
			cfg := Config{Partitions: max(parts, len(members)), Replicas: 1 + rng.IntN(5),
				Load: []float64{1.01, 1.25, 1.5, 3}[rng.IntN(4)], Placement: Placement(rng.IntN(2))}
			r, err := New(cfg, 1, members)
			if err != nil {
				t.Fatalf("New(%+v, %d members): %v", cfg, len(members), err)
			}
			if want := oldPlace(cfg, members, r.k); !slices.Equal(r.reps, want) {
				t.Fatalf("%d members (kind %d), %+v: placement differs from consistent.New's", len(members), kind, cfg)
			}
		}
	}
	if !collided {
		t.Error("no membership had members whose vnode names collide")
	}
}
