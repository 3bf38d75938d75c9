package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// MustNew builds a ring or fails the test.
func MustNew(tb testing.TB, cfg Config, epoch Epoch, members []PeerID) *Ring {
	tb.Helper()
	r, err := New(cfg, epoch, members)
	if err != nil {
		tb.Fatalf("New(%+v, %d members) = %v", cfg, len(members), err)
	}
	return r
}

// named returns n peers "peer-00", "peer-01", ...
func named(n int) []PeerID {
	out := make([]PeerID, n)
	for i := range out {
		out[i] = PeerID(fmt.Sprintf("peer-%02d", i))
	}
	return out
}

// randomIDs returns n distinct libp2p-like peer ids drawn from rng.
func randomIDs(rng *rand.Rand, n int) []PeerID {
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	seen := map[PeerID]bool{}
	out := make([]PeerID, 0, n)
	for len(out) < n {
		b := []byte("12D3KooW")
		for range 16 {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		if id := PeerID(b); !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// shuffled returns members in a random order with some duplicated.
func shuffled(rng *rand.Rand, members []PeerID) []PeerID {
	out := slices.Clone(members)
	for i := 0; i < len(members) && rng.IntN(2) == 0; i++ {
		out = append(out, members[rng.IntN(len(members))])
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// hasher is the xxhash64 consistent.Hasher, which primaries and
// PartitionOf compute with.
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

var _ consistent.Member = PeerID("")
var _ consistent.Hasher = hasher{}

// reference builds consistent directly from the sorted members, the way the
// package documentation of consistent shows.
func reference(cfg Config, members []PeerID) *consistent.Consistent {
	cms := make([]consistent.Member, len(members))
	for i, m := range members {
		cms[i] = m
	}
	return consistent.New(cms, consistent.Config{
		Hasher: hasher{}, PartitionCount: cfg.Partitions, ReplicationFactor: vnodes, Load: cfg.Load,
	})
}

// checkInvariants checks the numbered invariants of Ring against consistent
// itself: sorted distinct members, k distinct replicas per partition, and
// replica sets equal to consistent.GetClosestNForPartition.
func checkInvariants(tb testing.TB, r *Ring) {
	tb.Helper()
	ms := r.Members()
	if !slices.IsSorted(ms) || len(slices.Compact(slices.Clone(ms))) != len(ms) {
		tb.Fatalf("Members() = %v; want sorted and distinct", ms)
	}
	k := min(r.Config().Replicas, len(ms))
	var c *consistent.Consistent
	if len(ms) > 0 {
		c = reference(r.Config(), ms)
	}
	for p := range r.Partitions() {
		reps := r.Replicas(p)
		if len(reps) != k {
			tb.Fatalf("len(Replicas(%d)) = %d; want %d", p, len(reps), k)
		}
		if got := len(slices.Compact(slices.Sorted(slices.Values(reps)))); got != k {
			tb.Fatalf("Replicas(%d) = %v; want distinct", p, reps)
		}
		if c == nil {
			continue
		}
		want, err := c.GetClosestNForPartition(p, k)
		if err != nil {
			tb.Fatalf("GetClosestNForPartition(%d, %d) = %v", p, k, err)
		}
		if r.Config().Placement == PlacementSpread {
			want = want[:1] // the primary; spread picks the rest
		}
		for i := range want {
			if want[i].(PeerID) != reps[i] {
				tb.Fatalf("Replicas(%d) = %v; consistent says %v", p, reps, want)
			}
		}
		for _, m := range reps {
			if !r.IsReplica(p, m) {
				tb.Fatalf("IsReplica(%d, %s) = false; it is in Replicas", p, m)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	def := DefaultConfig()
	with := func(f func(*Config)) Config { c := def; f(&c); return c }
	tests := []struct {
		name    string
		cfg     Config
		members int
		field   string // substring the error must contain; "" = valid
	}{
		{"default", def, 3, ""},
		{"default no members", def, 0, ""},
		{"one partition one member", with(func(c *Config) { c.Partitions = 1 }), 1, ""},
		{"spread placement", with(func(c *Config) { c.Placement = PlacementSpread }), 3, ""},
		{"unknown placement", with(func(c *Config) { c.Placement = PlacementSpread + 1 }), 3, "Placement"},
		{"members equal partitions", with(func(c *Config) { c.Partitions = 8 }), 8, ""},
		{"max partitions", with(func(c *Config) { c.Partitions = MaxPartitions }), 50, ""},
		{"zero partitions", with(func(c *Config) { c.Partitions = 0 }), 3, "Partitions"},
		{"negative partitions", with(func(c *Config) { c.Partitions = -1 }), 3, "Partitions"},
		{"too many partitions", with(func(c *Config) { c.Partitions = MaxPartitions + 1 }), 3, "Partitions"},
		{"zero replicas", with(func(c *Config) { c.Replicas = 0 }), 3, "Replicas"},
		{"too many replicas", with(func(c *Config) { c.Replicas = MaxReplicas + 1 }), 3, "Replicas"},
		{"load one", with(func(c *Config) { c.Load = 1 }), 3, "Load"},
		{"load below one", with(func(c *Config) { c.Load = 0.8 }), 3, "Load"},
		{"load zero", with(func(c *Config) { c.Load = 0 }), 3, "Load"},
		{"load NaN", with(func(c *Config) { c.Load = math.NaN() }), 3, "Load"},
		{"load Inf", with(func(c *Config) { c.Load = math.Inf(1) }), 3, "Load"},
		{"more members than partitions", with(func(c *Config) { c.Partitions = 8 }), 9, "Partitions = 8"},
		{"too many members", def, MaxMembers + 1, "members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.ValidateMembers(tt.members)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ValidateMembers(%d) = %v; want nil", tt.members, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "ring: ") || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("ValidateMembers(%d) = %v; want a ring: error naming %q", tt.members, err, tt.field)
			}
			if _, err := New(tt.cfg, 1, named(tt.members)); err == nil {
				t.Fatalf("New accepted %+v with %d members", tt.cfg, tt.members)
			}
		})
	}
}

// TestFitsMatchesConsistent checks the no-panic predicate against consistent
// itself, including load factors Validate rejects.
func TestFitsMatchesConsistent(t *testing.T) {
	panics := func(p, n int, load float64) (panicked bool) {
		defer func() { panicked = recover() != nil }()
		reference(Config{Partitions: p, Load: load}, named(n))
		return false
	}
	loads := []float64{0.5, 1, 1 + 1e-12, 1.1, 1.25, math.NaN(), math.Inf(1)}
	grid := 0
	for _, load := range loads {
		for p := 1; p <= 16; p++ {
			for n := 1; n <= 20; n++ {
				if got, want := fits(p, n, load), !panics(p, n, load); got != want {
					t.Errorf("fits(%d, %d, %v) = %v; consistent panics = %v", p, n, load, got, !want)
				}
				grid++
			}
		}
	}
	for _, n := range []int{50, 255, 256, 257} {
		if testing.Short() {
			break
		}
		if got, want := fits(256, n, 1.25), !panics(256, n, 1.25); got != want {
			t.Errorf("fits(256, %d, 1.25) = %v; consistent panics = %v", n, got, !want)
		}
	}
	t.Logf("fits agrees with consistent on %d (partitions, members, load) combos", grid+4)
}

// TestVnodeNameCollisions uses names whose "%s%d" vnode keys collide
// ("a"+"10" == "a1"+"0"); New must still place every partition.
func TestVnodeNameCollisions(t *testing.T) {
	members := []PeerID{"a", "a1", "a11", "a111", "a2", "a21", "b"}
	cfg := Config{Partitions: len(members), Replicas: 3, Load: 1.0001}
	for range 10 {
		rng := rand.New(rand.NewPCG(7, 7))
		r := MustNew(t, cfg, 1, shuffled(rng, members))
		checkInvariants(t, r)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		members []PeerID
	}{
		{"empty id", []PeerID{"a", "", "b"}},
		{"only empty id", []PeerID{""}},
		{"more than partitions", named(9)},
	}
	cfg := Config{Partitions: 8, Replicas: 3, Load: 1.25}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := New(cfg, 1, tt.members); err == nil {
				t.Fatalf("New(%v) = %v, nil; want error", tt.members, r)
			}
		})
	}
}

func TestEmptyRing(t *testing.T) {
	r := MustNew(t, DefaultConfig(), 4, nil)
	if r.Epoch() != 4 || r.Partitions() != 256 || len(r.Members()) != 0 {
		t.Fatalf("empty ring = epoch %d, %d partitions, members %v", r.Epoch(), r.Partitions(), r.Members())
	}
	for p := range r.Partitions() {
		if got := r.Replicas(p); len(got) != 0 {
			t.Fatalf("Replicas(%d) = %v; want none", p, got)
		}
	}
	if got := r.PartitionsOf("x"); got != nil {
		t.Fatalf("PartitionsOf(x) = %v; want nil", got)
	}
	for p, o := range r.PreferredOwners(func(PeerID) bool { return true }) {
		if o != "" {
			t.Fatalf("PreferredOwners[%d] = %q; want \"\"", p, o)
		}
	}
	one := MustNew(t, DefaultConfig(), 5, []PeerID{"solo"})
	if got := len(Moved(r, one)); got != 256 {
		t.Fatalf("len(Moved(empty, one)) = %d; want 256", got)
	}
}

func TestReplicas(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		members  int
	}{
		{"one peer R3", 3, 1},
		{"two peers R3", 3, 2},
		{"three peers R3", 3, 3},
		{"five peers R3", 3, 5},
		{"fifty peers R3", 3, 50},
		{"ten peers R1", 1, 10},
		{"ten peers R5", 5, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Replicas = tt.replicas
			r := MustNew(t, cfg, 1, named(tt.members))
			checkInvariants(t, r)
			c := reference(cfg, named(tt.members))
			total := 0
			for _, m := range r.Members() {
				ps := r.PartitionsOf(m)
				if !slices.IsSorted(ps) {
					t.Fatalf("PartitionsOf(%s) = %v; want sorted", m, ps)
				}
				total += len(ps)
			}
			if want := r.Partitions() * min(tt.replicas, tt.members); total != want {
				t.Fatalf("sum of len(PartitionsOf) = %d; want %d", total, want)
			}
			for p := range r.Partitions() {
				if got, want := r.Replicas(p)[0], c.GetPartitionOwner(p).(PeerID); got != want {
					t.Fatalf("Replicas(%d)[0] = %s; consistent owner %s", p, got, want)
				}
			}
		})
	}
}

func TestPartitionOfMatchesConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, parts := range []int{1, 7, 256, 271, 4096, MaxPartitions} {
		cfg := DefaultConfig()
		cfg.Partitions = parts
		c := reference(cfg, named(1))
		r := MustNew(t, cfg, 1, named(1))
		for i := range 1000 {
			key := fmt.Sprintf("group-%d-%x", i, rng.Uint64())
			want := c.FindPartitionID([]byte(key))
			if got := PartitionOf(key, parts); got != want {
				t.Fatalf("PartitionOf(%q, %d) = %d; consistent %d", key, parts, got, want)
			}
			if got := r.Partition(key); got != want {
				t.Fatalf("Partition(%q) = %d; want %d", key, got, want)
			}
		}
	}
}

// TestInsertionOrderIrrelevant is the agreement property: every peer that
// builds the ring from the same membership, in whatever order and with
// whatever duplicates, gets the same replica sets and preferred owners.
func TestInsertionOrderIrrelevant(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 0))
	for iter := range 200 {
		n := 1 + rng.IntN(30)
		members := randomIDs(rng, n)
		cfg := Config{Partitions: 1 + rng.IntN(300), Replicas: 1 + rng.IntN(5), Load: 1.05 + rng.Float64()}
		if cfg.Partitions < n {
			cfg.Partitions = n
		}
		a := MustNew(t, cfg, 9, shuffled(rng, members))
		b := MustNew(t, cfg, 9, shuffled(rng, members))
		dead := map[PeerID]bool{members[rng.IntN(n)]: true}
		live := func(id PeerID) bool { return !dead[id] }
		if !slices.Equal(a.Members(), b.Members()) {
			t.Fatalf("iter %d: Members differ: %v vs %v", iter, a.Members(), b.Members())
		}
		for p := range cfg.Partitions {
			if ra, rb := a.Replicas(p), b.Replicas(p); !slices.Equal(ra, rb) {
				t.Fatalf("iter %d: Replicas(%d) = %v vs %v", iter, p, ra, rb)
			}
		}
		if oa, ob := a.PreferredOwners(live), b.PreferredOwners(live); !slices.Equal(oa, ob) {
			t.Fatalf("iter %d: PreferredOwners differ", iter)
		}
		if m := Moved(a, b); len(m) != 0 {
			t.Fatalf("iter %d: Moved(a, b) = %v; want none", iter, m)
		}
	}
}

// churn measures, for a join of one member to n-1 (or a forget of one of n),
// the fraction of partitions whose primary changes and whose replica set
// changes.
func churn(tb testing.TB, rng *rand.Rand, cfg Config, n int) (primary, moved float64) {
	members := randomIDs(rng, n)
	small := MustNew(tb, cfg, 1, members[:n-1])
	big := MustNew(tb, cfg, 2, members)
	changed := 0
	for p := range cfg.Partitions {
		if small.Replicas(p)[0] != big.Replicas(p)[0] {
			changed++
		}
	}
	mv := Moved(small, big)
	for p := range cfg.Partitions {
		if !slices.Contains(mv, p) && !sameSet(small.Replicas(p), big.Replicas(p)) {
			tb.Fatalf("partition %d changed but not in Moved", p)
		}
	}
	return float64(changed) / float64(cfg.Partitions), float64(len(mv)) / float64(cfg.Partitions)
}

func TestChurnOnJoin(t *testing.T) {
	const trials = 40
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{4, 5, 10, 20, 50} {
		cfg := DefaultConfig()
		var sumP, maxP, sumM, maxM float64
		for range trials {
			p, m := churn(t, rng, cfg, n)
			sumP, maxP = sumP+p, max(maxP, p)
			sumM, maxM = sumM+m, max(maxM, m)
		}
		meanP := sumP / trials
		t.Logf("join to %2d peers: primaries moved mean %.3f max %.3f (1/N = %.3f, %.2f/N mean, %.2f/N max); "+
			"replica sets changed mean %.3f max %.3f", n, meanP, maxP, 1/float64(n),
			meanP*float64(n), maxP*float64(n), sumM/trials, maxM)
		if limit := 2.5 / float64(n); meanP > limit {
			t.Errorf("join to %d peers: mean primaries moved %.3f > 2.5/N = %.3f", n, meanP, limit)
		}
	}
}

// topPartitions picks the same partitions, in the same order, whether it
// keeps a few in order as it goes or ranks them all and sorts (many).
func TestTopPartitionsBothWays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		partitions, k := 1+rng.IntN(3000), 1+rng.IntN(5)
		members := 1 + rng.IntN(20)
		reps := make([]int32, partitions*k)
		for p := range partitions {
			reps[p*k] = int32(rng.IntN(members))
		}
		salts := make([]uint64, partitions)
		for p := range salts {
			salts[p] = mix(uint64(p) + 1)
		}
		m, h := int32(rng.IntN(members)), rng.Uint64()
		floor := 1 + rng.IntN(100)
		var all []ranked
		for p, salt := range salts {
			if reps[p*k] != m {
				all = append(all, ranked{mix(h ^ salt), int32(p)})
			}
		}
		slices.SortFunc(all, byRank)
		want := all[:min(len(all), floor)]
		if got := topPartitions(nil, reps, salts, k, m, h, floor); !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d partitions, floor %d): %v; want %v", trial, partitions, floor, got, want)
		}
	}
}
