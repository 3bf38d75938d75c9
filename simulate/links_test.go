package simulate

import (
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
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

// TestUnsafeRecoverTwoLostDisks: the last two peers are killed for good at
// 5 s and both disks declared lost 5 s later, on 3, 4 and 5 peers (3
// replicas: on 3 peers every partition, on 4 and 5 some, had both among
// its voters). Every partition serves again and the work finishes; what
// was acknowledged is lost only where the two lost peers alone held it
// (counted in LostUnsafe, which some seeds must show), never elsewhere
// (Lost). Without the declaration the run stalls.
func TestUnsafeRecoverTwoLostDisks(t *testing.T) {
	t.Parallel()
	unsafe := 0
	for _, peers := range []int{3, 4, 5} {
		for seed := uint64(1); seed <= 5; seed++ {
			cfg := DefaultConfig() // every fault, the peers started together
			cfg.Seed, cfg.Peers, cfg.Tasks, cfg.Kill, cfg.KillCount, cfg.UnsafeRecover = seed, peers, 100, 5*time.Second, 2, 5*time.Second
			r := mustRun(t, cfg)
			if r.Failed() || r.Lost != 0 {
				t.Fatalf("peers %d seed %d: lost %d, violations %v\nreplay: %s", peers, seed, r.Lost, r.Violations, cfg.ReplayCommand())
			}
			unsafe += r.LostUnsafe
		}
	}
	if unsafe == 0 {
		t.Fatal("no run lost what only the two lost peers held: the test shows nothing")
	}
	cfg := DefaultConfig()
	cfg.Tasks, cfg.Kill, cfg.KillCount = 100, 5*time.Second, 2
	if r := mustRun(t, cfg); !r.Failed() {
		t.Fatal("3 peers, two killed for good, no --unsafe-recover: the run finished; want a stall")
	}
	for _, cfg := range []Config{{Peers: 3, KillCount: 2}, {Peers: 2, Kill: time.Second, KillCount: 2}, {Peers: 4, Kill: time.Second, KillCount: 3}} {
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--kill-count") {
			t.Fatalf("%+v: %v; want an error naming --kill-count", cfg, err)
		}
	}
}

// TestUnsafeLossCreatedAgain: after the recovery, a submit retried may
// create again a group the two lost peers alone held; one a survivor held
// must not be (invariant 4 as before).
func TestUnsafeLossCreatedAgain(t *testing.T) {
	spec := &shard.GroupSpec{ID: "g1", Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Handler: "echo"}}}
	for _, survivorHeld := range []bool{false, true} {
		cfg := Config{Peers: 3, Partitions: 16, Kill: time.Second, KillCount: 2, UnsafeRecover: time.Second}
		s := &sim{cfg: cfg}
		s.chk = newChecker(s)
		s.chk.unsafe = newUnsafeLoss(cfg)
		s.chk.register(spec)
		u := s.chk.unsafe
		u.recovered, u.lostTwo[s.partitionOf(spec.ID)], u.seenGroup[spec.ID] = true, true, survivorHeld
		for i, sent := range []time.Duration{time.Second, 10 * time.Second} {
			s.now = sent + time.Millisecond
			o := &op{kind: opSubmit, spec: spec, group: spec.ID}
			s.chk.submitted(o, &response{req: &request{op: o, try: i + 1}, sent: sent, node: 0, reply: node.Reply{Req: uint64(i + 1),
				Submit: node.SubmitResult{Group: "g1", Tasks: []shard.TaskID{shard.TaskIDOf("g1", 0)}, Created: true}}})
		}
		if failed := s.viol != nil; failed != survivorHeld {
			t.Fatalf("survivor held it: %v; violation %v", survivorHeld, s.viol)
		}
		if !survivorHeld && (s.chk.unsafeTasks() != 1 || s.chk.outstanding != 1) {
			t.Fatalf("lost_unsafe %d outstanding %d; want 1 and 1 (created afresh)", s.chk.unsafeTasks(), s.chk.outstanding)
		}
	}
}
