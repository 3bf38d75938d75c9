package simulate

import (
	"testing"
	"time"
)

// TestPeersReachEachOther: direct messages travel on connections, which
// need an address from one side, and a joiner's first gossip reaches only
// the seed it dialed (links.go): every pair of peers that are members of
// each other must still end up reachable, the peers started together at
// time 0 and the one that joins late (churn) alike. The probe membership
// once lost this (a member learned from a list had no address, and
// nothing gave it one: the real mesh never accepted a submission).
func TestPeersReachEachOther(t *testing.T) {
	t.Parallel()
	for _, faults := range [][]string{{}, {"churn"}} {
		for seed := uint64(1); seed <= 3; seed++ {
			r := mustRun(t, Config{Seed: seed, Peers: 5, Tasks: 100, Workload: "w1", Faults: faults})
			if r.Failed() {
				t.Fatalf("seed %d faults %v: %v", seed, faults, r.Violations)
			}
			if r.Unreachable > 0 {
				t.Errorf("seed %d faults %v: %d pairs of peers cannot reach each other (%d direct messages dropped for want of an address)",
					seed, faults, r.Unreachable, r.Unlinked)
			}
			if r.GossipLost == 0 {
				t.Errorf("seed %d faults %v: no gossip lost to young peers; the links model is off", seed, faults)
			}
		}
	}
}

// TestKillDetected: a peer stopped for good is dead to every other within
// 5 s, and no other peer is declared dead by anyone (Report.Deaths counts
// every declaration).
func TestKillDetected(t *testing.T) {
	t.Parallel()
	const peers = 12
	r := mustRun(t, Config{Seed: 1, Peers: peers, Partitions: 32, Workload: "idle", Faults: []string{}, Kill: 30 * time.Second})
	if r.Failed() {
		t.Fatal(r.Violations)
	}
	if r.DeadKnownAfter < 0 || r.DeadKnownAfter > 5 {
		t.Errorf("the killed peer was dead to all %.2f s after the kill; want within 5 s", r.DeadKnownAfter)
	}
	if r.Deaths != peers-1 {
		t.Errorf("%d deaths declared; want %d (the killed peer, once by each other peer)", r.Deaths, peers-1)
	}
}
