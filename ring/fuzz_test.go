package ring

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// fuzzMembers derives a membership from seed. Names come from a tiny
// alphabet with digits so that consistent's "%s%d" vnode names collide
// ("a1"+"0" == "a"+"10") and members share prefixes.
func fuzzMembers(seed uint64, n int) []PeerID {
	rng := rand.New(rand.NewPCG(seed, seed>>32))
	out := make([]PeerID, n)
	for i := range out {
		b := []byte{"ab"[rng.IntN(2)]}
		for range rng.IntN(4) {
			b = append(b, "ab0123"[rng.IntN(6)])
		}
		out[i] = PeerID(b)
	}
	return out
}

// FuzzRingRebalance builds rings from fuzzed configs and memberships derived
// from a seed, joins or forgets one member, and checks that New never panics
// and that the ring, PreferredOwners and Moved keep their invariants.
func FuzzRingRebalance(f *testing.F) {
	f.Add(uint64(1), uint16(256), uint8(3), uint8(16), uint8(5), uint64(0))
	f.Add(uint64(2), uint16(8), uint8(3), uint8(1), uint8(9), uint64(0b101))
	f.Add(uint64(3), uint16(1), uint8(1), uint8(0), uint8(1), uint64(1))
	f.Add(uint64(4), uint16(7), uint8(5), uint8(200), uint8(40), uint64(0xffff))
	f.Add(uint64(5), uint16(300), uint8(0), uint8(16), uint8(0), uint64(0))
	f.Fuzz(func(t *testing.T, seed uint64, parts uint16, reps, load8, n8 uint8, deadMask uint64) {
		cfg := Config{
			Partitions: int(parts % 1200),
			Replicas:   int(reps % (MaxReplicas + 2)),
			Load:       0.75 + float64(load8)/64, // 0.75 .. 4.73, crossing 1
			Placement:  Placement(seed & 1),
		}
		members := fuzzMembers(seed, int(n8%64))
		r, err := New(cfg, Epoch(seed), members)
		distinct := len(slices.Compact(slices.Sorted(slices.Values(members))))
		if wantErr := cfg.ValidateMembers(distinct) != nil; (err != nil) != wantErr {
			t.Fatalf("New(%+v, %d distinct) = %v; ValidateMembers says error = %v", cfg, distinct, err, wantErr)
		}
		if err != nil {
			return
		}
		checkInvariants(t, r)
		rng := rand.New(rand.NewPCG(seed, 1))
		if other := MustNew(t, cfg, Epoch(seed), shuffled(rng, members)); len(Moved(r, other)) != 0 {
			t.Fatalf("reordered membership moved partitions %v", Moved(r, other))
		}
		dead := map[PeerID]bool{}
		for i, m := range r.Members() {
			dead[m] = deadMask>>(i%64)&1 == 1
		}
		live := func(id PeerID) bool { return !dead[id] }
		owners := r.PreferredOwners(live)
		checkOwners(t, r, live, owners)
		if got, want := rules12(r, live), naiveOwners(r, live); !slices.Equal(got, want) {
			t.Fatalf("rules 1-2 differ from naive")
		}
		if from, to, ok := canImprove(r, live, owners); ok {
			t.Fatalf("%s could still take a partition from %s", to, from)
		}
		checkChange(t, r, seed)
	})
}

// checkChange joins a new member to r (or forgets one when r is full) and
// checks Moved against a direct comparison of replica sets.
func checkChange(t *testing.T, r *Ring, seed uint64) {
	members := r.Members()
	if len(members) < r.Partitions() && len(members) < MaxMembers {
		members = append(members, PeerID("new"+strconv.FormatUint(seed, 36)))
	} else {
		members = members[1:]
	}
	next, err := New(r.Config(), r.Epoch()+1, members)
	if err != nil {
		t.Fatalf("New after one change: %v", err)
	}
	checkInvariants(t, next)
	moved := Moved(r, next)
	for p := range r.Partitions() {
		if same := sameSet(r.Replicas(p), next.Replicas(p)); same == slices.Contains(moved, p) {
			t.Fatalf("partition %d: replica sets same = %v, in Moved = %v", p, same, !same)
		}
	}
}
