package node_test

import (
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/shard"
	raftpb "go.etcd.io/raft/v3/raftpb"
)

// learnerParts returns the partitions of which each of ids is a learner
// holding everything its leader applied (as its own replica says), with
// the leader that says so.
func learnerParts(m *nodetest.Mesh, ids ...string) []int {
	var out []int
	for part := range m.Partitions {
		srv := m.Server(part)
		if srv == "" {
			continue
		}
		lr, _ := m.MustPeer(srv).Node.Replica(part)
		if !slices.ContainsFunc(ids, func(id string) bool {
			r, ok := m.MustPeer(id).Node.Replica(part)
			return !ok || !slices.Contains(r.Learners, id) || !slices.Contains(lr.Learners, id) || r.Applied < lr.Applied
		}) {
			out = append(out, part)
		}
	}
	return out
}

// muteAcks loses peer id's successful append answers (MsgAppResp not
// rejecting): its leaders never see it caught up, so never promote it,
// while it takes what they send (a snapshot, entries, the commit index)
// as any learner does.
func muteAcks(p *nodetest.Peer) {
	p.Mute = func(msg *node.Message) bool {
		if msg.Type != node.MsgRaft {
			return false
		}
		msg.Raft = slices.DeleteFunc(slices.Clone(msg.Raft), func(r node.RaftMsg) bool {
			return r.Msg.Type == raftpb.MsgAppResp && !r.Msg.Reject
		})
		return len(msg.Raft) == 0
	}
}

// waitLearners runs the mesh until ids are learners, caught up, of every
// partition, and returns the partitions.
func waitLearners(t *testing.T, m *nodetest.Mesh, ids ...string) []int {
	t.Helper()
	if !m.RunUntil(60*time.Second, func() bool { return len(learnerParts(m, ids...)) == m.Partitions }) {
		t.Fatalf("%v are caught-up learners of %v only (voters %v)", ids, learnerParts(m, ids...), voterSets(m))
	}
	return learnerParts(m, ids...)
}

// submitIn submits one group of n echo tasks in each of parts and returns
// their ids, each acknowledged.
func submitIn(t *testing.T, m *nodetest.Mesh, prefix string, parts []int, n int) []shard.GroupID {
	t.Helper()
	var groups []shard.GroupID
	for _, part := range parts {
		g := m.GroupIn(prefix, part)
		if r, ok := m.Submit(echoGroup(g, n)); !ok || r.Err != nil || !r.Submit.Created {
			t.Fatalf("submit %s (partition %d): %+v, replied %v (servers %v)", g, part, r, ok, leaders(m))
		}
		groups = append(groups, g)
	}
	return groups
}

// declareLost has each survivor declare n1 and n2 lost for good (needle
// forget --unsafe-recover on each), as every test here loses those two.
func declareLost(m *nodetest.Mesh, survivors ...string) {
	for _, id := range survivors {
		m.MustPeer(id).Node.ForgetUnsafeRecover("n1")
		m.MustPeer(id).Node.ForgetUnsafeRecover("n2")
	}
}

// servedBy reports, when called, whether peer id serves every partition of
// parts; with id "", whether some peer serves each.
func servedBy(m *nodetest.Mesh, parts []int, id string) func() bool {
	return func() bool {
		return !slices.ContainsFunc(parts, func(part int) bool {
			if id == "" {
				return m.Server(part) == ""
			}
			return m.Server(part) != id
		})
	}
}

// A partition whose every voter is lost but which has a surviving learner
// (a replica the ring's repair was adding, not yet promoted): both voters
// of a 2-peer mesh lose their disks while n3, joining, is their learner.
// Marked lost, the learner recovers each partition as its last voter
// would: it becomes its only voter, leads, takes writes, and reopens after
// a crash. What it held is there; the groups acknowledged while it lagged
// (its Raft traffic held) are gone, the cost of the recovery.
func TestUnsafeRecoverLearner(t *testing.T) {
	m := nodetest.NewMesh(t, 2, 8)
	m.Run(15 * time.Second)
	before := submitEach(t, m, "a", 3)
	m.Run(2 * time.Second)
	checkGroups(t, m, before, "before the loss")

	muteAcks(m.AddPeer("n3"))
	parts := waitLearners(t, m, "n3")
	var kept []shard.GroupID // the groups of the learner's partitions
	for _, g := range before {
		if slices.Contains(parts, m.PartitionOf(g)) {
			kept = append(kept, g)
		}
	}
	// The learner lags: groups acknowledged now reach the voters only,
	// and are lost with them.
	m.Hold("n1", "n3", node.MsgRaft)
	m.Hold("n2", "n3", node.MsgRaft)
	lagged := submitIn(t, m, "z", parts, 1)
	m.Run(time.Second)
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.DropHeld("n1", "n3")
	m.DropHeld("n2", "n3")
	m.Run(10 * time.Second)
	n3 := m.MustPeer("n3")
	for _, part := range parts {
		if srv := m.Server(part); srv != "" {
			t.Fatalf("partition %d served by %s with both voters lost", part, srv)
		}
	}
	n3.Node.ForgetUnsafeRecover("n1")
	m.Run(5 * time.Second)
	if got := n3.Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("UnsafeRecoveries with n2 not marked = %d; want 0", got)
	}
	n3.Node.ForgetUnsafeRecover("n2")
	served := servedBy(m, parts, "n3")
	if !m.RunUntil(10*time.Second, served) {
		for _, part := range parts {
			r, _ := n3.Node.Replica(part)
			t.Logf("partition %d: %+v", part, r)
		}
		t.Fatalf("learner partitions %v not served by n3 after both voters were marked (servers %v)", parts, leaders(m))
	}
	if got := n3.Node.Counters().UnsafeRecoveries; got < len(parts) {
		t.Fatalf("UnsafeRecoveries = %d; want at least the %d partitions n3 was a learner of", got, len(parts))
	}
	for _, part := range parts {
		if r, _ := n3.Node.Replica(part); !slices.Equal(r.Voters, []string{"n3"}) || len(r.Outgoing) != 0 {
			t.Fatalf("partition %d after recovery: voters %v outgoing %v; want n3 alone", part, r.Voters, r.Outgoing)
		}
	}
	checkGroups(t, m, kept, "after the recovery")
	for _, g := range lagged {
		if st, err := n3.Node.GroupState(g); err == nil {
			t.Fatalf("%s, acknowledged while n3 lagged, is %v after the recovery; want it gone (n3 never had it)", g, st)
		}
	}
	after := submitIn(t, m, "b", parts, 2)
	m.Run(2 * time.Second)
	checkGroups(t, m, after, "submitted after the recovery")

	m.Crash("n3", true)
	m.Restart("n3")
	if !m.RunUntil(10*time.Second, served) {
		t.Fatalf("learner partitions %v not served after n3 restarted (servers %v)", parts, leaders(m))
	}
	checkGroups(t, m, append(kept, after...), "after n3 restarted")
}

// Two learners survive a partition's lost voters: either could recover
// it, and both doing so from their own copies would be two partitions
// taking writes. Each claims it in its heartbeats (its log's last term
// and index); the one whose log is the most up to date recovers it, the
// other waits and becomes a learner of the recovered partition. Here n4
// took entries n3 did not (acknowledged groups, which n3's copy lacks):
// n4 recovers every partition they shared, and those groups are there.
// The partitions with one learner are recovered by it alone.
func TestUnsafeRecoverTwoLearners(t *testing.T) {
	m := nodetest.NewMesh(t, 2, 12)
	m.Run(15 * time.Second)
	before := submitEach(t, m, "a", 2)
	m.Run(2 * time.Second)
	checkGroups(t, m, before, "before the loss")

	muteAcks(m.AddPeer("n3"))
	muteAcks(m.AddPeer("n4"))
	alone := func() []int { // partitions with n3 or n4 alone a learner
		return slices.DeleteFunc(slices.Concat(learnerParts(m, "n3"), learnerParts(m, "n4")), func(part int) bool {
			return slices.Contains(learnerParts(m, "n3", "n4"), part)
		})
	}
	if !m.RunUntil(60*time.Second, func() bool { return len(learnerParts(m, "n3", "n4")) > 0 && len(alone()) > 0 }) {
		t.Fatalf("n3 and n4 learners of %v together, %v alone: the test shows nothing (voters %v)",
			learnerParts(m, "n3", "n4"), alone(), voterSets(m))
	}
	m.Run(5 * time.Second) // the other learners the ring wants join
	both, one := learnerParts(m, "n3", "n4"), alone()
	t.Logf("learners: n3 and n4 of %v, one of them of %v", both, one)

	// n3 hears nothing more: the groups submitted now reach n4 only.
	m.Hold("n1", "n3", node.MsgRaft)
	m.Hold("n2", "n3", node.MsgRaft)
	late := submitIn(t, m, "c", both, 1)
	if !m.RunUntil(10*time.Second, func() bool {
		return !slices.ContainsFunc(both, func(part int) bool { return !slices.Contains(learnerParts(m, "n4"), part) })
	}) {
		t.Fatalf("n4 caught up on %v of %v", learnerParts(m, "n4"), both)
	}
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.DropHeld("n1", "n3")
	m.DropHeld("n2", "n3")
	m.Run(10 * time.Second)
	declareLost(m, "n3", "n4")
	if !m.RunUntil(10*time.Second, func() bool {
		return !slices.ContainsFunc(slices.Concat(one, both), func(part int) bool { return m.Server(part) == "" })
	}) {
		t.Fatalf("partitions %v (one learner) and %v (two): servers %v; want each served", one, both, leaders(m))
	}
	m.Run(2 * time.Second)
	for _, part := range both {
		if srv := m.Server(part); srv != "n4" {
			t.Fatalf("partition %d served by %q; want n4, whose log is longer", part, srv)
		}
		// n3 follows n4's recovered partition as its learner, and never
		// led it: it recovered none of them.
		if r, _ := m.MustPeer("n3").Node.Replica(part); !slices.Equal(r.Voters, []string{"n4"}) || !slices.Equal(r.Learners, []string{"n3"}) {
			t.Fatalf("partition %d on n3: %+v; want a learner of n4's", part, r)
		}
	}
	want := map[string]int{"n3": 0, "n4": len(both)}
	for _, part := range one {
		want[m.Server(part)]++
	}
	for id, n := range want {
		if got := m.MustPeer(id).Node.Counters().UnsafeRecoveries; got != n {
			t.Fatalf("%s recovered %d partitions; want %d (%v)", id, got, n, want)
		}
	}
	var kept []shard.GroupID
	for _, g := range before {
		if slices.Contains(both, m.PartitionOf(g)) {
			kept = append(kept, g)
		}
	}
	checkGroups(t, m, append(kept, late...), "after n4 recovered")
	submitIn(t, m, "b", both, 1)
}

// A partition whose every voter is lost but which has two surviving
// learners, one of which (n3) never heard of the other: both voters of a
// 2-peer mesh lose their disks while n3 and n4, joining, are their
// learners, n3's Raft traffic held from before n4 was added. n3 sees
// itself the only survivor; it used to recover at once, and n4, which had
// applied entries n3 lacked (its own addition, the groups acknowledged
// since), held a copy the recovered log disagreed with at the same index
// (the simulator's --kill-select voters, 5 peers, seed 9). n3 now waits
// for claims naming it (recoverGrace), hears n4's, and claims with it:
// n4's log is the more up to date, n4 recovers every partition, keeping
// the groups n3 lacked, and n3 follows it.
func TestUnsafeRecoverLearnerUnaware(t *testing.T) {
	m, before, parts := learnerMesh(t)
	m.Hold("n1", "n3", node.MsgRaft)
	m.Hold("n2", "n3", node.MsgRaft)
	muteAcks(m.AddPeer("n4"))
	waitLearners(t, m, "n4")
	lagged := submitIn(t, m, "b", parts, 2)
	waitLearners(t, m, "n4")
	for _, part := range parts {
		if r, _ := m.MustPeer("n3").Node.Replica(part); !slices.Equal(r.Learners, []string{"n3"}) {
			t.Fatalf("partition %d on n3: %+v; want n3 its only learner (it never heard of n4)", part, r)
		}
		if r, _ := m.MustPeer("n4").Node.Replica(part); !slices.Equal(slices.Sorted(slices.Values(r.Learners)), []string{"n3", "n4"}) {
			t.Fatalf("partition %d on n4: %+v; want learners n3 and n4", part, r)
		}
	}
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.DropHeld("n1", "n3")
	m.DropHeld("n2", "n3")
	m.Run(10 * time.Second)
	declareLost(m, "n3", "n4")
	if !m.RunUntil(10*time.Second, servedBy(m, parts, "n4")) {
		t.Fatalf("partitions %v: servers %v; want n4 serving each (n3 defers to its claim)", parts, leaders(m))
	}
	if got := m.MustPeer("n3").Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("n3 recovered %d partitions; want none (n4 recovered them)", got)
	}
	// n3 follows n4: at one applied index, both hold one state.
	if !m.RunUntil(20*time.Second, func() bool {
		return !slices.ContainsFunc(parts, func(part int) bool { return !sameCopy(m, part, "n3", "n4") })
	}) {
		t.Fatalf("n3 never held n4's recovered copies")
	}
	checkGroups(t, m, append(before, lagged...), "after n4 recovered")
}

// sameCopy reports whether peers a and b hold partition part at one
// applied index, and the same state there.
func sameCopy(m *nodetest.Mesh, part int, a, b string) bool {
	ia, sa, oka := m.MustPeer(a).Node.Digest(part)
	ib, sb, okb := m.MustPeer(b).Node.Digest(part)
	return oka && okb && ia == ib && sa == sb
}

// The same two learners, but n4, which holds what n3 lacks, is down while
// the loss is declared: n3 hears no claim naming it and recovers every
// partition alone. n4, back, holds copies the recovered log disagrees
// with below their applied index; once n3 adds it again (the ring wants
// it), n4 sees n3's appends disagree with entries it applied, drops its
// copy and takes n3's snapshot (Raft would have answered such an append
// with its commit index, which n3 took as matched: the copies diverged
// for good, or panicked on the conflict with a committed entry).
func TestUnsafeRecoverRebuildsStaleCopy(t *testing.T) {
	m, before, parts := learnerMesh(t)
	m.Hold("n1", "n3", node.MsgRaft)
	m.Hold("n2", "n3", node.MsgRaft)
	m.AddPeer("n4")
	// On n4, not n3 (lost by n3's recovery): enough entries that n4's
	// copy applied past where n3's recovered log adds n4 again.
	for _, prefix := range []string{"b", "c", "d", "e", "f", "g"} {
		submitIn(t, m, prefix, parts, 2)
	}
	if !m.RunUntil(30*time.Second, func() bool {
		return !slices.ContainsFunc(parts, func(part int) bool { return !sameCopy(m, part, "n1", "n4") })
	}) {
		t.Fatal("n4 never caught up with n1")
	}
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.Cut("n3", "n4", true)
	m.Cut("n4", "n3", true)
	m.DropHeld("n1", "n3")
	m.DropHeld("n2", "n3")
	m.Run(10 * time.Second)
	declareLost(m, "n3")
	if !m.RunUntil(10*time.Second, servedBy(m, parts, "n3")) {
		t.Fatalf("partitions %v: servers %v; want n3 serving each (alone)", parts, leaders(m))
	}
	m.Heal()
	declareLost(m, "n4")
	if !m.RunUntil(30*time.Second, func() bool {
		return !slices.ContainsFunc(parts, func(part int) bool { return !sameCopy(m, part, "n3", "n4") })
	}) {
		for _, part := range parts {
			ia, sa, _ := m.MustPeer("n3").Node.Digest(part)
			ib, sb, _ := m.MustPeer("n4").Node.Digest(part)
			t.Logf("partition %d: n3 applied %d %016x, n4 applied %d %016x", part, ia, sa, ib, sb)
		}
		t.Fatal("n4 never held n3's recovered copies")
	}
	if got := m.MustPeer("n4").Node.Counters().RecoveredElsewhere; got != len(parts) {
		t.Fatalf("n4 rebuilt %d copies; want %d", got, len(parts))
	}
	if got := m.MustPeer("n4").Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("n4 recovered %d partitions; want none (n3 had)", got)
	}
	checkGroups(t, m, before, "after n4 rebuilt its copies")
}

// A learner the ring's repair added but whose snapshot never came holds
// no copy of the partition: it never claims it as the others do, and the
// learner that holds a copy waited for its claim for good (found by the
// simulator's --kill-select voters on 3 peers). It answers the claims
// naming it with an empty one (term and index 0): the learner with a copy
// beats it and recovers every partition, and the empty one becomes its
// learner. Here (4 replicas, so that no learner is removed) n3 is a
// caught-up learner of every partition and n4 is named a learner of each
// while nothing of the voters' reaches it.
func TestUnsafeRecoverLearnerWithoutCopy(t *testing.T) {
	m, before, parts := learnerMesh(t)
	m.Hold("n1", "n4", node.MsgRaft)
	m.Hold("n2", "n4", node.MsgRaft)
	m.AddPeer("n4")
	named := func() bool { // n4 a learner of every partition, as its leader says
		return !slices.ContainsFunc(parts, func(part int) bool {
			srv := m.Server(part)
			if srv == "" {
				return true
			}
			r, _ := m.MustPeer(srv).Node.Replica(part)
			return !slices.Contains(r.Learners, "n4")
		})
	}
	if !m.RunUntil(30*time.Second, named) {
		t.Fatalf("n4 not named a learner of every partition (voters %v)", voterSets(m))
	}
	m.Run(2 * time.Second)
	for _, part := range parts {
		if r, ok := m.MustPeer("n4").Node.Replica(part); ok && (slices.Contains(r.Learners, "n4") || r.Applied > 0) {
			t.Fatalf("partition %d on n4: %+v; want no copy (its Raft traffic is held)", part, r)
		}
		if r, _ := m.MustPeer("n3").Node.Replica(part); !slices.Equal(slices.Sorted(slices.Values(r.Learners)), []string{"n3", "n4"}) {
			t.Fatalf("partition %d on n3: %+v; want learners n3 and n4", part, r)
		}
	}
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.DropHeld("n1", "n4")
	m.DropHeld("n2", "n4")
	m.Run(10 * time.Second)
	declareLost(m, "n3", "n4")
	if !m.RunUntil(10*time.Second, servedBy(m, parts, "n3")) {
		for _, part := range parts {
			r, _ := m.MustPeer("n3").Node.Replica(part)
			t.Logf("partition %d on n3: %+v", part, r)
		}
		t.Fatalf("partitions %v: servers %v; want n3 serving each (n4 has no copy)", parts, leaders(m))
	}
	if !m.RunUntil(20*time.Second, func() bool {
		return !slices.ContainsFunc(parts, func(part int) bool {
			r, _ := m.MustPeer("n4").Node.Replica(part)
			return !slices.Equal(r.Voters, []string{"n3"}) || !slices.Contains(r.Learners, "n4")
		})
	}) {
		t.Fatal("n4 never became a learner of n3's recovered partitions")
	}
	if got := m.MustPeer("n4").Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("n4 recovered %d partitions; want none", got)
	}
	checkGroups(t, m, before, "after n3 recovered")
}

// Three learners survive, and one (n4) lagged behind the change adding
// another (n5): n4 names n3 alone beside itself, n3 and n5 name all
// three. Each waited for the others' claims naming the same survivors,
// which never came: n4's named two, theirs three (found by the
// simulator's --kill-select voters on 5 peers). A learner that hears a
// claim naming it takes the survivors it names as rivals too: every claim
// then names the three, and the most up to date one recovers every
// partition, once.
func TestUnsafeRecoverLearnersPartlyAware(t *testing.T) {
	m := nodetest.NewMeshWith(t, 2, 8, func(_ *nodetest.Peer, cfg *node.NodeConfig) { cfg.Replicas = 5 })
	m.Run(15 * time.Second)
	before := submitEach(t, m, "a", 2)
	m.Run(2 * time.Second)
	muteAcks(m.AddPeer("n3"))
	muteAcks(m.AddPeer("n4"))
	parts := waitLearners(t, m, "n3", "n4")
	m.Hold("n1", "n4", node.MsgRaft)
	m.Hold("n2", "n4", node.MsgRaft)
	muteAcks(m.AddPeer("n5"))
	waitLearners(t, m, "n3", "n5")
	for _, part := range parts {
		if r, _ := m.MustPeer("n4").Node.Replica(part); !slices.Equal(slices.Sorted(slices.Values(r.Learners)), []string{"n3", "n4"}) {
			t.Fatalf("partition %d on n4: %+v; want learners n3 and n4 (it never heard of n5)", part, r)
		}
		if r, _ := m.MustPeer("n3").Node.Replica(part); !slices.Equal(slices.Sorted(slices.Values(r.Learners)), []string{"n3", "n4", "n5"}) {
			t.Fatalf("partition %d on n3: %+v; want learners n3, n4 and n5", part, r)
		}
	}
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.DropHeld("n1", "n4")
	m.DropHeld("n2", "n4")
	m.Run(10 * time.Second)
	declareLost(m, "n3", "n4", "n5")
	if !m.RunUntil(10*time.Second, servedBy(m, parts, "")) {
		for _, id := range []string{"n3", "n4", "n5"} {
			r, _ := m.MustPeer(id).Node.Replica(parts[0])
			t.Logf("partition %d on %s: %+v", parts[0], id, r)
		}
		t.Fatalf("partitions %v: servers %v; want each served", parts, leaders(m))
	}
	m.Run(2 * time.Second)
	recovered := 0
	for _, id := range []string{"n3", "n4", "n5"} {
		recovered += m.MustPeer(id).Node.Counters().UnsafeRecoveries
	}
	if recovered != len(parts) || m.MustPeer("n4").Node.Counters().UnsafeRecoveries != 0 {
		t.Fatalf("%d recoveries (n4 %d) for %d partitions; want one each, none by n4 (it lags)", recovered,
			m.MustPeer("n4").Node.Counters().UnsafeRecoveries, len(parts))
	}
	checkGroups(t, m, before, "after the recovery")
}

// The last voter lagged behind a learner: the two lost voters committed
// groups the learner took and the survivor voter did not. The voter
// recovered alone at once, and the learner, which had applied those
// entries, held a state the recovered partition's log never had: two
// replicas at one index disagreeing (found by the simulator's
// --kill-select voters on 5 peers, placement seed 2). With learners
// surviving, the last voter claims the partition with them: the most up
// to date (here n4, the learner) recovers, keeping those groups, and
// makes the voter follow it.
func TestUnsafeRecoverVoterBehindLearner(t *testing.T) {
	m := nodetest.NewMeshWith(t, 3, 8, func(_ *nodetest.Peer, cfg *node.NodeConfig) { cfg.Replicas = 4 })
	m.Run(15 * time.Second)
	before := submitEach(t, m, "a", 2)
	m.Run(2 * time.Second)
	muteAcks(m.AddPeer("n4"))
	parts := waitLearners(t, m, "n4")
	// n3 hears nothing more: what is acknowledged now reaches n1, n2
	// and the learner n4 only.
	m.Hold("n1", "n3", node.MsgRaft)
	m.Hold("n2", "n3", node.MsgRaft)
	if !m.RunUntil(20*time.Second, func() bool {
		return !slices.ContainsFunc(parts, func(part int) bool { srv := m.Server(part); return srv != "n1" && srv != "n2" })
	}) {
		t.Fatalf("servers %v; want n1 and n2 serving every partition (n3 hears nothing)", leaders(m))
	}
	late := submitIn(t, m, "c", parts, 1)
	m.Run(5 * time.Second)
	// (A quiesced partition sends n4 nothing more: it never acks, so its
	// last entries may not reach it; the partitions where they did show
	// the case.)
	caught := learnerParts(m, "n4")
	if len(caught) == 0 {
		t.Fatalf("n4 caught up on none of %v", parts)
	}
	m.Crash("n1", true)
	m.Crash("n2", true)
	m.MustPeer("n4").Mute = nil // its answers count again once it is a voter
	m.DropHeld("n1", "n3")
	m.DropHeld("n2", "n3")
	m.Run(10 * time.Second)
	declareLost(m, "n3", "n4")
	if !m.RunUntil(20*time.Second, servedBy(m, parts, "")) {
		r3, _ := m.MustPeer("n3").Node.Replica(parts[0])
		r4, _ := m.MustPeer("n4").Node.Replica(parts[0])
		t.Fatalf("partitions %v: servers %v; want each served (partition %d: n3 %+v, n4 %+v)", parts, leaders(m), parts[0], r3, r4)
	}
	m.Run(5 * time.Second)
	if got := m.MustPeer("n3").Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("n3, the voter behind, recovered %d partitions; want none (n4's log is longer)", got)
	}
	for _, part := range parts {
		r3, _ := m.MustPeer("n3").Node.Replica(part)
		r4, _ := m.MustPeer("n4").Node.Replica(part)
		if r3.Applied != r4.Applied {
			t.Fatalf("partition %d: n3 applied %d, n4 %d; want n3 caught up", part, r3.Applied, r4.Applied)
		}
	}
	var kept []shard.GroupID
	for _, g := range append(before, late...) {
		if slices.Contains(caught, m.PartitionOf(g)) {
			kept = append(kept, g)
		}
	}
	checkGroups(t, m, kept, "after the recovery")
}

// learnerMesh is the start the learner tests share: two voters of 4
// replicas a partition, groups "a" acknowledged on them, then n3 added
// and a learner (its acks muted) of every partition. It returns the
// groups and n3's partitions.
func learnerMesh(t *testing.T) (*nodetest.Mesh, []shard.GroupID, []int) {
	t.Helper()
	m := nodetest.NewMeshWith(t, 2, 8, func(_ *nodetest.Peer, cfg *node.NodeConfig) { cfg.Replicas = 4 })
	m.Run(15 * time.Second)
	before := submitEach(t, m, "a", 2)
	m.Run(2 * time.Second)
	muteAcks(m.AddPeer("n3"))
	return m, before, waitLearners(t, m, "n3")
}
