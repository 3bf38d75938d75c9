package node_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/shard"
)

// submitEach submits one group of n echo tasks in every partition and
// returns their ids; each is acknowledged (committed) when it returns.
func submitEach(t *testing.T, m *nodetest.Mesh, prefix string, n int) []shard.GroupID {
	t.Helper()
	var groups []shard.GroupID
	for part := range m.Partitions {
		g := m.GroupIn(prefix, part)
		r, ok := m.Submit(echoGroup(g, n))
		// Unavailable, it is asked again, as a client does: leadership
		// may be moving to the ring's preferred owner after a recovery.
		for try := 0; ok && errors.Is(r.Err, node.ErrUnavailable) && try < 20; try++ {
			m.Run(250 * time.Millisecond)
			r, ok = m.Submit(echoGroup(g, n))
		}
		if !ok || r.Err != nil || !r.Submit.Created {
			t.Fatalf("submit %s (partition %d): %+v, replied %v (servers %v)", g, part, r, ok, leaders(m))
		}
		groups = append(groups, g)
	}
	return groups
}

// unserved returns the partitions no live peer serves.
func unserved(m *nodetest.Mesh) []int {
	var out []int
	for part := range m.Partitions {
		if m.Server(part) == "" {
			out = append(out, part)
		}
	}
	return out
}

// checkGroups fails unless every group is known to its partition's server
// (acknowledged before: it must still be there), in a final state, within
// 5 s (a server answers reads once its voters renewed its lease).
func checkGroups(t *testing.T, m *nodetest.Mesh, groups []shard.GroupID, when string) {
	t.Helper()
	m.RunUntil(5*time.Second, func() bool {
		return !slices.ContainsFunc(groups, func(g shard.GroupID) bool { return groupState(m, g) != shard.GroupSucceeded })
	})
	for _, g := range groups {
		if st := groupState(m, g); st != shard.GroupSucceeded {
			for _, pr := range m.Peers {
				st, err := pr.Node.GroupState(g)
				r, _ := pr.Node.Replica(m.PartitionOf(g))
				t.Logf("%s: %v %v %+v", pr.ID, st, err, r)
			}
			t.Fatalf("%s: %s (partition %d) = %v; want SUCCEEDED (servers %v)", when, g, m.PartitionOf(g), st, m.Serving(m.PartitionOf(g)))
		}
	}
}

// A 2-peer mesh whose second peer's disk is lost for good: every
// partition has two voters and none can commit again; a plain forget
// cannot remove the lost voter (that takes a majority). With
// --unsafe-recover the survivor recovers every partition from its own
// copy: each commits again, every group acknowledged before is still
// there (with two voters every committed entry was on both), and the
// recovered partitions reopen from the survivor's disk after a crash.
func TestUnsafeRecoverTwoVoters(t *testing.T) {
	m := nodetest.NewMesh(t, 2, 8)
	m.Run(15 * time.Second)
	for part := range 8 {
		if r, _ := m.MustPeer("n1").Node.Replica(part); len(r.Voters) != 2 {
			t.Fatalf("partition %d has voters %v; want n1 and n2", part, r.Voters)
		}
	}
	before := submitEach(t, m, "a", 3)
	m.Run(2 * time.Second)
	checkGroups(t, m, before, "before the loss")

	m.Crash("n2", true) // and never comes back
	m.Run(10 * time.Second)
	if got := unserved(m); len(got) != 8 {
		t.Fatalf("partitions unserved with n2 lost = %v; want all 8 (no majority)", got)
	}
	n1 := m.MustPeer("n1")
	n1.Node.Forget("n2") // a plain forget changes nothing
	m.Run(10 * time.Second)
	if got := unserved(m); len(got) != 8 {
		t.Fatalf("partitions unserved after a plain forget = %v; want all 8", got)
	}

	n1.Node.ForgetUnsafeRecover("n2")
	if !m.RunUntil(10*time.Second, func() bool { return len(unserved(m)) == 0 }) {
		t.Fatalf("partitions unserved after forget --unsafe-recover: %v", unserved(m))
	}
	if got := n1.Node.Counters().UnsafeRecoveries; got != 8 {
		t.Fatalf("UnsafeRecoveries = %d; want 8", got)
	}
	for part := range 8 {
		if r, _ := n1.Node.Replica(part); !slices.Equal(r.Voters, []string{"n1"}) || len(r.Outgoing) != 0 {
			t.Fatalf("partition %d after recovery: voters %v outgoing %v; want n1 alone", part, r.Voters, r.Outgoing)
		}
	}
	checkGroups(t, m, before, "after the recovery")
	after := submitEach(t, m, "b", 2)
	m.Run(2 * time.Second)
	checkGroups(t, m, after, "submitted after the recovery")

	// Its disk holds the recovery: a crash losing what was not synced,
	// and every partition reopens with n1 alone, everything there.
	m.Crash("n1", true)
	m.Restart("n1")
	if !m.RunUntil(10*time.Second, func() bool { return len(unserved(m)) == 0 }) {
		t.Fatalf("partitions unserved after n1 restarted: %v", unserved(m))
	}
	checkGroups(t, m, append(before, after...), "after n1 restarted")
	if got := n1.Node.UnsafeRecover(); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("recover marks after the restart = %v; want n2 (persisted)", got)
	}
	if got := m.MustPeer("n1").Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("UnsafeRecoveries after the restart = %d; want 0 (nothing left to recover)", got)
	}

	// A new peer joins: the ring's replica repair makes it a voter again.
	m.AddPeer("n3")
	if !m.RunUntil(60*time.Second, func() bool {
		for part := range 8 {
			srv := m.Server(part)
			if srv == "" {
				return false
			}
			if r, _ := m.MustPeer(srv).Node.Replica(part); len(r.Voters) != 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("voters after n3 joined = %v; want two per partition", voterSets(m))
	}
	checkGroups(t, m, append(before, after...), "after n3 joined")
}

// A 3-voter partition that lost two voters recovers only once both are
// marked lost for good: one mark leaves it as it is (the other may come
// back), the second recovers it on the last voter.
func TestUnsafeRecoverThreeVotersTwoLost(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 8)
	m.Run(15 * time.Second)
	before := submitEach(t, m, "a", 3)
	m.Run(2 * time.Second)
	checkGroups(t, m, before, "before the loss")
	m.Crash("n2", true)
	m.Crash("n3", true)
	m.Run(10 * time.Second)
	n1 := m.MustPeer("n1")
	n1.Node.ForgetUnsafeRecover("n2")
	m.Run(10 * time.Second)
	if got := unserved(m); len(got) != 8 {
		t.Fatalf("partitions unserved with one of two lost voters marked = %v; want all 8", got)
	}
	if got := n1.Node.Counters().UnsafeRecoveries; got != 0 {
		t.Fatalf("UnsafeRecoveries with n3 not marked = %d; want 0", got)
	}
	n1.Node.ForgetUnsafeRecover("n3")
	if !m.RunUntil(10*time.Second, func() bool { return len(unserved(m)) == 0 }) {
		t.Fatalf("partitions unserved after both were marked: %v", unserved(m))
	}
	for part := range 8 {
		if r, _ := n1.Node.Replica(part); !slices.Equal(r.Voters, []string{"n1"}) {
			t.Fatalf("partition %d after recovery: voters %v; want n1 alone", part, r.Voters)
		}
	}
	// Here every acknowledged entry was on n1 (it took every append): in
	// general an entry n2 and n3 committed without n1 would be gone.
	checkGroups(t, m, before, "after the recovery")
	submitEach(t, m, "b", 1)
}

// The mark spreads: on a 3-peer mesh of 2-replica partitions, the operator
// tells n1 alone that n3 is lost; n2 learns it from n1's heartbeats and
// recovers the partitions it shared with n3 only.
func TestUnsafeRecoverSpreads(t *testing.T) {
	m := nodetest.NewMeshWith(t, 3, 12, func(_ *nodetest.Peer, cfg *node.NodeConfig) { cfg.Replicas = 2 })
	m.Run(20 * time.Second)
	shared := 0 // partitions whose voters are n2 and n3
	for part := range 12 {
		if r, _ := m.MustPeer("n2").Node.Replica(part); slices.Equal(slices.Sorted(slices.Values(r.Voters)), []string{"n2", "n3"}) {
			shared++
		}
	}
	if shared == 0 {
		t.Fatalf("no partition has voters n2 and n3 alone (%v): the test shows nothing", voterSets(m))
	}
	before := submitEach(t, m, "a", 2)
	m.Run(2 * time.Second)
	m.Crash("n3", true)
	m.Run(10 * time.Second)
	m.MustPeer("n1").Node.ForgetUnsafeRecover("n3")
	if !m.RunUntil(20*time.Second, func() bool { return len(unserved(m)) == 0 }) {
		for _, part := range unserved(m) {
			for _, id := range []string{"n1", "n2"} {
				r, ok := m.MustPeer(id).Node.Replica(part)
				t.Logf("%s part %d: %v %+v", id, part, ok, r)
			}
		}
		t.Logf("n2 marks %v recovered %d", m.MustPeer("n2").Node.UnsafeRecover(), m.MustPeer("n2").Node.Counters().UnsafeRecoveries)
		t.Fatalf("partitions unserved after n1 was told: %v", unserved(m))
	}
	if got := m.MustPeer("n2").Node.Counters().UnsafeRecoveries; got != shared {
		t.Fatalf("n2 recovered %d partitions; want the %d it shared with n3 alone", got, shared)
	}
	if got := m.MustPeer("n2").Node.UnsafeRecover(); !slices.Equal(got, []string{"n3"}) {
		t.Fatalf("n2's recover marks = %v; want n3", got)
	}
	checkGroups(t, m, before, "after the recovery")
	submitEach(t, m, "b", 1)
}
