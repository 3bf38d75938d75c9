package simulate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/ring"
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
			t.Fatalf("peers %d seed %d: lost %d, violations %v\nreplay: %s", cfg.Peers, seed, r.Lost, r.Violations, cfg.ReplayCommand())
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

// TestKillSelectVoters: --kill-select voters kills, in a mesh whose
// peers join through n0 (so that partitions have learners while the ring
// hands them out), every voter of a partition that has a learner, and
// --unsafe-recover declares their disks lost: the learner recovers its
// partition, losing what it had not received (LostUnsafe), partitions no
// replica survived are a total loss (LostTotal), and nothing else may go
// (Lost, invariants). Seed 1 stalled while a learner named in the
// configuration, whose snapshot never came, sent no claim (node:
// TestUnsafeRecoverLearnerWithoutCopy); seed 35 broke invariant 2 while
// the checker took what any survivor held as kept, where the learner that
// recovers alone (it never learned of the other) held less
// (unsafeLoss.recoverers); on 4 peers seed 18 stalled with two of four
// voters surviving, seeds 40 and 45 with a stalled leader and a learner
// each waiting for the other (node: TestUnsafeRecoverVoterBehindLearner,
// claimWins); seeds 19 and 30 stalled in a joint configuration whose
// outgoing voter was lost (node: TestUnsafeRecoverJoint,
// TestUnsafeRecoverJointSurvivors), seed 26 on a survivor that, restarted,
// learned of the other only after it claimed (mesh.add asks for a scan).
// On 5 peers seed 59 broke invariant 2 while a joint configuration's
// voter, holding an outcome, refused and a lagging learner recovered
// without it; seed 71 stalled on a recovered configuration keeping a
// voter that had left the partition (withoutCopy), seed 172 on
// surviving voters lagging behind their promotion, which a learner had
// applied and, seeing a majority alive, claimed nothing (lastReplica).
// Without the declaration the runs stall.
func TestKillSelectVoters(t *testing.T) {
	t.Parallel()
	var killed, total, unsafe int
	for _, run := range [][2]uint64{{3, 1}, {3, 2}, {3, 3}, {3, 4}, {3, 5}, {3, 6}, {3, 7}, {3, 8}, {3, 9}, {3, 10}, {3, 35}, {4, 18}, {4, 19}, {4, 26}, {4, 30}, {4, 40}, {4, 45}, {4, 1010}, {5, 59}, {5, 71}, {5, 172}} {
		seed := run[1]
		cfg := DefaultConfig()
		cfg.Seed, cfg.Peers, cfg.Start = seed, int(run[0]), StartJoin
		cfg.Kill, cfg.KillSelect, cfg.UnsafeRecover = time.Second, KillVoters, 5*time.Second
		r := mustRun(t, cfg)
		if r.Failed() || r.Lost != 0 {
			t.Fatalf("peers %d seed %d: lost %d, violations %v\nreplay: %s", cfg.Peers, seed, r.Lost, r.Violations, cfg.ReplayCommand())
		}
		if len(r.Killed) > 0 {
			killed++
		}
		total += r.LostTotal
		unsafe += r.LostUnsafe
	}
	if killed == 0 || total == 0 || unsafe == 0 {
		t.Fatalf("%d kills found a learner, lost_total %d, lost_unsafe %d: the test shows nothing", killed, total, unsafe)
	}
	cfg := DefaultConfig()
	cfg.Peers, cfg.Tasks, cfg.Start, cfg.Kill, cfg.KillSelect = 3, 100, StartJoin, time.Second, KillVoters
	if r := mustRun(t, cfg); !r.Failed() || len(r.Killed) == 0 {
		t.Fatalf("voters of a learner's partition killed (%v), no --unsafe-recover: failed %v; want a stall", r.Killed, r.Failed())
	}
	for _, cfg := range []Config{{Peers: 3, KillSelect: KillVoters}, {Peers: 3, Kill: time.Second, KillCount: 2, KillSelect: KillVoters}, {Peers: 3, Kill: time.Second, KillSelect: 2}} {
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--kill-select") {
			t.Fatalf("%+v: %v; want an error naming --kill-select", cfg, err)
		}
	}
	if _, err := ParseKillSelect("first"); err == nil {
		t.Fatal(`ParseKillSelect("first"): no error`)
	}
}

// TestKillSelectVotersRemovedReplica: a replica removed from its
// partition that never learned it (n5, still a voter of {n0, n3, n5})
// and the last voter of the configuration that removed it (n2, of {n0,
// n2, n3}) each saw themselves alone once n0 and n3 were declared lost;
// both recovered, and n5's copy, which lacked an outcome n2's held, failed
// the task (6 peers, circle placement, seed 4019). Each now hears the
// other's claim: the most up to date recovers, the other waits. Seeds
// 4088 and 4101: a learner that knew of one other survivor beat it and
// recovered before it heard the claim of a third, more up to date; every
// survivor now hears the claims for the grace first.
func TestKillSelectVotersRemovedReplica(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{4019, 4088, 4101} {
		runCircleVoterKill(t, 6, seed)
	}
}

// runCircleVoterKill runs peers joining in circle placement, the voters
// of a partition killed at 1 s and declared lost 5 s later, and fails t
// on a violation, a lost task or a double acceptance.
func runCircleVoterKill(t *testing.T, peers int, seed uint64) (Report, Config) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Seed, cfg.Peers, cfg.Start, cfg.Placement = seed, peers, StartJoin, ring.PlacementCircle
	cfg.Kill, cfg.KillSelect, cfg.UnsafeRecover = time.Second, KillVoters, 5*time.Second
	r := mustRun(t, cfg)
	if r.Failed() || r.Lost != 0 || r.DoubleAccepted != 0 {
		t.Fatalf("seed %d: lost %d, double accepted %d, violations %v\nreplay: %s", seed, r.Lost, r.DoubleAccepted, r.Violations, cfg.ReplayCommand())
	}
	return r, cfg
}

// TestKillSelectVotersLeftVoter: a survivor lagging behind the change
// that removed another surviving voter (which left the partition and
// holds no copy) counted a majority that cannot vote, claimed nothing and
// campaigned in vain for good: liveness broke (6 peers, circle placement,
// seed 4119). It asks the voters it counts; the one without a copy
// answers with an empty claim, and it recovers the partition. Seeds 4193,
// 4260 and 4298 hold that a question makes no one a rival: asked with
// plain claims, the lagging copies of removed replicas became rivals of
// the last voter that removed them, which waited for them for good.
func TestKillSelectVotersLeftVoter(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{4119, 4193, 4260, 4298} {
		runCircleVoterKill(t, 6, seed)
	}
}

// TestKillSelectVotersCutTail: a survivor whose log ended with its own
// removal (not applied) claimed with its whole log, beat a learner that
// had applied the entries after the removal (committed by the lost
// voters), and its recovery cut them: an outcome the learner held ran
// again (invariant 2; 8 peers, circle placement, seed 6078). A claim is
// made with the log the recovery keeps.
func TestKillSelectVotersCutTail(t *testing.T) {
	t.Parallel()
	runCircleVoterKill(t, 8, 6078)
}

// TestKillSelectVotersConfsDisagree: two survivors whose configurations
// disagree, one seeing its majority survive (with the less up-to-date
// log, so Raft elects neither) and the other not, stalled: the second
// claimed naming the first, which never claimed (liveness; 8 peers seed
// 6002, 6 peers seeds 4173 and 4341, circle placement). A voter named in
// a claim claims with it.
func TestKillSelectVotersConfsDisagree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		peers int
		seed  uint64
	}{{8, 6002}, {6, 4173}, {6, 4341}} {
		runCircleVoterKill(t, c.peers, c.seed)
	}
}

// TestKillSelectVotersLivesOn: a replica removed that never learned it,
// whose configuration's other voters were the lost peers, recovered its
// stale copy beside the live partition, led elsewhere: an acknowledged
// group was gone (10 peers seed 9028), outcomes ran again (8 peers seed
// 6292, 10 peers seed 9025). It asks the ring's replicas first, once a
// heartbeat: a first version asked again at every scan of a voter's
// question, and the answers woke it for the next (6 peers seed 4060:
// 40,063 messages per task, 8.3 million in all).
func TestKillSelectVotersLivesOn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		peers int
		seed  uint64
	}{{10, 9028}, {8, 6292}, {10, 9025}, {6, 4060}} {
		r, cfg := runCircleVoterKill(t, c.peers, c.seed)
		if r.MessagesPerTask > 200 {
			t.Fatalf("seed %d: %.0f messages per task; want at most 200 (a storm)\nreplay: %s", c.seed, r.MessagesPerTask, cfg.ReplayCommand())
		}
	}
}

// TestKillSelectVotersSchedules: a schedule whose partition lost every
// replica fires no more; the checker counts it (LostTotalSchedules) and
// stops holding the mesh to its ticks, as it stops waiting for the groups
// of such a partition.
func TestKillSelectVotersSchedules(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Seed, cfg.Peers, cfg.Start, cfg.Workload = 2000, 4, StartJoin, "sched"
	cfg.Kill, cfg.KillSelect, cfg.UnsafeRecover = time.Second, KillVoters, 5*time.Second
	r := mustRun(t, cfg)
	if r.Failed() || r.Lost != 0 || r.LostTotalSchedules == 0 {
		t.Fatalf("lost %d, lost_total_schedules %d, violations %v; want a schedule lost with its partition and nothing else\nreplay: %s",
			r.Lost, r.LostTotalSchedules, r.Violations, cfg.ReplayCommand())
	}
}

// TestUnsafeLossTotal: at the declaration, an acknowledged group of a
// partition that lost a majority of its voters and of which no survivor
// held a replica is a total loss: counted in LostTotal, no longer waited
// for, its client operations abandoned. A group of a partition that lost
// no majority is still waited for.
func TestUnsafeLossTotal(t *testing.T) {
	cfg := Config{Peers: 3, Partitions: 16, Kill: time.Second, KillSelect: KillVoters, UnsafeRecover: time.Second}
	s := &sim{cfg: cfg, wl: &workload{}}
	s.chk = newChecker(s)
	s.cl = newClient(s, s.wl)
	s.chk.unsafe = newUnsafeLoss(cfg)
	spec := func(id shard.GroupID) *shard.GroupSpec {
		return &shard.GroupSpec{ID: id, Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Handler: "echo"}, {Handler: "echo"}}}
	}
	lost, kept := spec("g1"), spec("g2")
	for i := 2; s.partitionOf(kept.ID) == s.partitionOf(lost.ID); i++ {
		kept = spec(shard.GroupID(fmt.Sprintf("g%d", i)))
	}
	for _, sp := range []*shard.GroupSpec{lost, kept} {
		s.chk.register(sp)
		s.chk.groups[sp.ID].acked = true
	}
	u := s.chk.unsafe
	u.allUp, u.lostTwo[s.partitionOf(lost.ID)] = true, true
	s.chk.recovering()
	if tasks, parts, _ := s.chk.totalTasks(); tasks != 2 || parts != 1 || s.chk.outstanding != 2 {
		t.Fatalf("lost_total %d on %d partitions, outstanding %d; want 2 on 1, and g2's 2 outstanding", tasks, parts, s.chk.outstanding)
	}
	if !s.chk.totalLost(lost.ID) || s.chk.totalLost(kept.ID) {
		t.Fatalf("total loss: %s %v, %s %v; want true, false", lost.ID, s.chk.totalLost(lost.ID), kept.ID, s.chk.totalLost(kept.ID))
	}
	s.cl.issue(&op{kind: opCancel, group: lost.ID})
	if s.cl.inflight != 0 || s.cl.abandoned != 1 {
		t.Fatalf("client inflight %d abandoned %d; want 0 and 1 (nobody serves the partition)", s.cl.inflight, s.cl.abandoned)
	}
	// A survivor's replica makes it no total loss.
	s2 := &sim{cfg: cfg, wl: &workload{}}
	s2.chk, s2.cl = newChecker(s2), newClient(s2, s2.wl)
	s2.chk.unsafe = newUnsafeLoss(cfg)
	s2.chk.register(lost)
	u2 := s2.chk.unsafe
	u2.allUp, u2.lostTwo[s2.partitionOf(lost.ID)], u2.held[s2.partitionOf(lost.ID)] = true, true, true
	s2.chk.recovering()
	if tasks, _, _ := s2.chk.totalTasks(); tasks != 0 || s2.chk.outstanding != 2 {
		t.Fatalf("a survivor held it: lost_total %d outstanding %d; want 0 and 2", tasks, s2.chk.outstanding)
	}
}
