package simulate

import (
	"testing"
	"time"
)

// TestQuiescedLeaderCrash: a partition whose tasks run for 30 s is
// quiesced (no Raft ticks, no heartbeats) on every replica when its
// leader crashes with them. The other replicas learn of the death from
// the membership alone, wake and elect a new leader, which runs the
// tasks again; nothing acknowledged is lost and every task finishes (the
// run's invariants). Checked on several seeds: the crashed leader held
// the partition quiesced, and a survivor served it within 10 s.
func TestQuiescedLeaderCrash(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := Config{Seed: seed, Peers: 3, Tasks: 10, Faults: []string{}, quietCrash: true}.withDefaults()
		s, err := newSim(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g := s.wl.arrivals[0].spec.ID
		owner := s.route(g)
		part := s.nodes[owner].n.PartitionOf(g)
		var quiet []string
		s.at(20*time.Second-time.Millisecond, func() {
			for _, nd := range s.nodes {
				if nd.n.Quiesced(part) {
					quiet = append(quiet, nd.id)
				}
			}
		})
		server := ""
		s.at(30*time.Second, func() {
			for _, nd := range s.nodes {
				if nd.up && nd.n.Serving(g) {
					server = nd.id
				}
			}
		})
		s.loop()
		r := s.conclude(time.Now())
		if r.Failed() {
			t.Fatalf("seed %d: %v", seed, r.Violations[0])
		}
		if len(quiet) != 3 {
			t.Errorf("seed %d: partition %d quiesced on %v when its leader n%d crashed; want all 3 replicas", seed, part, quiet, owner)
		}
		if server == "" || server == s.nodes[owner].id {
			t.Errorf("seed %d: partition %d served by %q 10 s after n%d crashed; want a survivor", seed, part, server, owner)
		}
		if r.Crashes != 1 || r.Tasks != 10 {
			t.Errorf("seed %d: %d crashes, %d tasks; want 1 and 10", seed, r.Crashes, r.Tasks)
		}
	}
}
