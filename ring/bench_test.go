package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func BenchmarkPartitionOf(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("group-%08x", i*7919)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		PartitionOf(keys[i%len(keys)], 256)
	}
}

func BenchmarkReplicas(b *testing.B) {
	r := MustNew(b, DefaultConfig(), 1, named(50))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Replicas(i % 256)
	}
}

func BenchmarkIsReplica(b *testing.B) {
	r := MustNew(b, DefaultConfig(), 1, named(50))
	ids := r.Members()
	for i := 0; b.Loop(); i++ {
		r.IsReplica(i%256, ids[i%len(ids)])
	}
}

func BenchmarkNew(b *testing.B) {
	for _, n := range []int{3, 50, 256} {
		b.Run(fmt.Sprintf("partitions=256/members=%d", n), func(b *testing.B) {
			ids := randomIDs(rand.New(rand.NewPCG(1, 1)), n)
			b.ReportAllocs()
			for b.Loop() {
				MustNew(b, DefaultConfig(), 1, ids)
			}
		})
	}
	b.Run(fmt.Sprintf("partitions=8192/members=%d", MaxMembers), func(b *testing.B) {
		cfg := DefaultConfig()
		cfg.Partitions = 8192
		ids := randomIDs(rand.New(rand.NewPCG(1, 1)), MaxMembers)
		for b.Loop() {
			MustNew(b, cfg, 1, ids)
		}
	})
}

// BenchmarkNewSpread builds the spread placement of a forming 1,000-peer
// simulation (4,096 partitions, R=3): every peer builds a ring over
// itself alone, then over what it has learned of the mesh.
func BenchmarkNewSpread(b *testing.B) {
	for _, n := range []int{1, 20, 1000} {
		b.Run(fmt.Sprintf("partitions=4096/members=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Partitions, cfg.Placement = 4096, PlacementSpread
			ids := randomIDs(rand.New(rand.NewPCG(1, 1)), n)
			b.ReportAllocs()
			for b.Loop() {
				MustNew(b, cfg, 1, ids)
			}
		})
	}
}

func BenchmarkPreferredOwners(b *testing.B) {
	for _, n := range []int{3, 10, 50} {
		r := MustNew(b, DefaultConfig(), 1, randomIDs(rand.New(rand.NewPCG(2, 2)), n))
		dead := r.Members()[0]
		for _, tc := range []struct {
			name string
			live func(PeerID) bool
		}{
			{"all-live", func(PeerID) bool { return true }},
			{"one-dead", func(id PeerID) bool { return id != dead }},
		} {
			b.Run(fmt.Sprintf("partitions=256/members=%d/%s", n, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r.PreferredOwners(tc.live)
				}
			})
		}
	}
	cfg := DefaultConfig()
	cfg.Partitions = 4096
	r := MustNew(b, cfg, 1, randomIDs(rand.New(rand.NewPCG(3, 3)), 200))
	b.Run("partitions=4096/members=200/all-live", func(b *testing.B) {
		for b.Loop() {
			r.PreferredOwners(func(PeerID) bool { return true })
		}
	})
}
