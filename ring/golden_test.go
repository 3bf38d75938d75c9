package ring

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The spread placement is part of a mesh's contract: every peer, of any
// release, must compute the same replica sets for the same membership.
// These digests of whole placements were computed when the placement was
// last changed on purpose; a change to how it is computed must not move
// them.
func TestSpreadPlacementStable(t *testing.T) {
	for _, tc := range []struct {
		members, partitions, replicas int
		want                          string
	}{
		{1, 64, 3, "7c853b7d09f98ce2"}, {2, 16384, 3, "a7a18a86ab4fe536"}, {3, 4096, 3, "3a3061bee448e095"},
		{7, 1000, 3, "bab87ae4f030add7"}, {20, 16384, 3, "f0420a7f7b89c37d"}, {200, 1024, 3, "d7458a46c47675b2"},
		{1000, 4096, 3, "872b0cc9bebbff89"}, {50, 512, 5, "61dd79bd1c840897"},
	} {
		var ms []PeerID
		for i := range tc.members {
			ms = append(ms, PeerID(fmt.Sprintf("12D3KooW-peer-%04d", i)))
		}
		cfg := DefaultConfig()
		cfg.Partitions, cfg.Replicas, cfg.Placement = tc.partitions, tc.replicas, PlacementSpread
		r, err := New(cfg, 1, ms)
		if err != nil {
			t.Fatal(err)
		}
		d := xxhash.New()
		for p := range tc.partitions {
			for _, id := range r.Replicas(p) {
				d.WriteString(string(id))
				d.WriteString(",")
			}
			d.WriteString(";")
		}
		got := fmt.Sprintf("%016x", d.Sum64())
		if got != tc.want {
			t.Errorf("%d members x %d partitions, R=%d: placement digest %s; want %s", tc.members, tc.partitions, tc.replicas, got, tc.want)
		}
	}
}
