package simulate

import (
	"strings"
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

// TestUnsafeRecoverLostDisk: on a 2-peer mesh (every partition on both
// peers) under every fault, the second peer is killed for good at 5 s and
// its disk declared lost 5 s later (needle forget --unsafe-recover on the
// survivor): the survivor recovers every partition, the work finishes and
// nothing acknowledged is lost (two voters: every committed entry was on
// both). The same runs without the declaration stall for good.
func TestUnsafeRecoverLostDisk(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := Config{Seed: seed, Peers: 2, Tasks: 100, Kill: 5 * time.Second, UnsafeRecover: 5 * time.Second}
		r := mustRun(t, cfg)
		if r.Failed() || r.Lost != 0 {
			t.Fatalf("seed %d: lost %d, violations %v\nreplay: %s", seed, r.Lost, r.Violations, cfg.ReplayCommand())
		}
	}
	stalled := 0
	for seed := uint64(1); seed <= 6; seed++ {
		if r := mustRun(t, Config{Seed: seed, Peers: 2, Tasks: 100, Kill: 5 * time.Second}); r.Failed() {
			stalled++
		}
	}
	if stalled == 0 {
		t.Fatal("no run stalled without --unsafe-recover: the test shows nothing")
	}
	if err := (Config{Peers: 2, UnsafeRecover: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "--unsafe-recover") {
		t.Fatalf("--unsafe-recover without --kill: %v; want an error naming it", err)
	}
}
