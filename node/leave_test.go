package node

import (
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// join adds a new, empty, non-founder node to the cluster.
func (c *cluster) join(id string, partitions int) *cnode {
	cn := &cnode{id: id, log: wal.NewMemory()}
	c.nodes = append(c.nodes, cn)
	c.start(cn, partitions)
	return cn
}

// latestConfs returns each partition's configuration as the up replica
// that applied the most has it.
func (c *cluster) latestConfs(parts int) []ReplicaInfo {
	out := make([]ReplicaInfo, parts)
	applied := make([]uint64, parts)
	for _, cn := range c.nodes {
		if cn.down {
			continue
		}
		for _, p := range cn.n.Held() {
			if r, ok := cn.n.Replica(p); ok && r.Applied >= applied[p] {
				out[p], applied[p] = r, r.Applied
			}
		}
	}
	return out
}

// checkHeld fails unless every partition settled on replicas voters, and
// every up node holds, in memory and in its WAL, exactly the partitions
// whose latest configuration names it.
func (c *cluster) checkHeld(parts, replicas int) {
	c.tb.Helper()
	confs := c.latestConfs(parts)
	for p, r := range confs {
		if len(r.Voters) != replicas || len(r.Learners) > 0 || len(r.Outgoing) > 0 {
			c.tb.Fatalf("partition %d did not settle: voters %v learners %v outgoing %v", p, r.Voters, r.Learners, r.Outgoing)
		}
	}
	for _, cn := range c.nodes {
		if cn.down {
			continue
		}
		var want []int
		for p, r := range confs {
			if slices.Contains(r.Voters, cn.id) {
				want = append(want, p)
			}
		}
		if got := cn.n.Held(); !slices.Equal(got, want) {
			c.tb.Errorf("%s holds %v; its partitions are %v (left %d, asked %d times)", cn.id, got, want, cn.n.stats.Left, cn.n.stats.ReplicaAsks)
		}
		stored, _ := cn.log.Partitions()
		if !slices.Equal(ints(stored), want) {
			c.tb.Errorf("%s's WAL holds %v; its partitions are %v", cn.id, stored, want)
		}
	}
}

func ints(ps []uint32) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = int(p)
	}
	return out
}

// A mesh that grows from 3 to 5 peers and shrinks back to 4 ends with
// every peer holding exactly the partitions whose configuration names it,
// the founder too (it held all of them), in memory and in its WAL. Before
// leaving existed, every peer kept every partition it ever held: the
// founder all 16.
func TestLeaveGrowShrink(t *testing.T) {
	const parts = 16
	c := newCluster(t, 3, parts)
	c.run(30 * time.Second)
	c.checkHeld(parts, 3)
	c.join("n4", parts)
	c.join("n5", parts)
	c.run(60 * time.Second)
	c.checkHeld(parts, 3)
	if held := len(c.node("n1").n.Held()); held >= parts {
		t.Fatalf("the founder holds %d of %d partitions in a mesh of 5", held, parts)
	}
	c.node("n5").down = true
	for _, cn := range c.nodes[:4] {
		cn.n.Forget("n5")
	}
	c.run(60 * time.Second)
	c.checkHeld(parts, 3)
	left := 0
	for _, cn := range c.nodes {
		left += cn.n.stats.Left
	}
	if left == 0 {
		t.Fatal("no peer left a partition")
	}
}

// A replica removed while it was down never applies its removal (its
// leader no longer sends to it): back up, it finds its partitions
// leaderless, asks their owners (MsgReplicaAsk) and leaves those it was
// removed from once a leader says so.
func TestLeaveRemovedWhileDown(t *testing.T) {
	const parts = 16
	c := newCluster(t, 4, parts)
	c.run(30 * time.Second)
	c.checkHeld(parts, 3)
	x := c.node("n2")
	before := x.n.Held()
	x.down = true
	c.join("n5", parts)
	c.run(60 * time.Second)
	x.down = false
	c.run(30 * time.Second)
	c.checkHeld(parts, 3)
	after := x.n.Held()
	if len(after) >= len(before) || x.n.stats.Left == 0 {
		t.Fatalf("n2 held %v before the join and %v after it (left %d): it was removed from none", before, after, x.n.stats.Left)
	}
	if x.n.stats.ReplicaAsks == 0 {
		t.Fatalf("n2 left %d partitions without asking", x.n.stats.Left)
	}
}

// settledLeft settles a mesh of 4 peers over parts partitions and returns
// it, its founder n1 and a partition n1 left.
func settledLeft(t *testing.T, parts int) (*cluster, *cnode, int) {
	t.Helper()
	c := newCluster(t, 4, parts)
	c.run(40 * time.Second)
	c.checkHeld(parts, 3)
	n1 := c.node("n1")
	for p := range parts {
		if n1.n.parts[p] == nil {
			return c, n1, p
		}
	}
	t.Fatal("the founder left no partition")
	return nil, nil, 0
}

// A Raft message for a partition a peer left, from that partition's
// leader (late, or the leader's view of an older configuration), does
// not open it again: the ring does not place the peer there. A snapshot
// whose configuration names the peer does.
func TestLeaveStaleMessageDoesNotReopen(t *testing.T) {
	const parts = 16
	c, n1, part := settledLeft(t, parts)
	lead := c.servers(part)
	if len(lead) != 1 {
		t.Fatalf("partition %d served by %v", part, lead)
	}
	l := c.node(lead[0]).n
	term := l.parts[part].rn.BasicStatus().Term
	stale := []pb.Message{
		{Type: pb.MsgHeartbeat, To: n1.n.raftID, From: l.raftID, Term: term},
		{Type: pb.MsgApp, To: n1.n.raftID, From: l.raftID, Term: term, Index: uint64(1), LogTerm: uint64(1)},
		{Type: pb.MsgVote, To: n1.n.raftID, From: l.raftID, Term: term + 1},
		{Type: pb.MsgSnap, To: n1.n.raftID, From: l.raftID, Term: term, Snapshot: &pb.Snapshot{
			Data: l.parts[part].shard.Snapshot(), Metadata: pb.SnapshotMetadata{Index: uint64(5), Term: term, ConfState: pb.ConfState{Voters: []uint64{l.raftID}}}}},
	}
	for _, m := range stale {
		if err := n1.n.Step(l.cfg.ID, Message{Type: MsgRaft, From: l.cfg.ID, Raft: []RaftMsg{{Partition: uint32(part), Msg: &m}}}); err != nil {
			t.Fatalf("step %v: %v", m.Type, err)
		}
		c.drain(n1)
		if n1.n.parts[part] != nil {
			t.Fatalf("a stale %v from %s opened partition %d again", m.Type, l.cfg.ID, part)
		}
	}
	if n1.n.stats.StaleRaft != len(stale) {
		t.Errorf("StaleRaft = %d; want %d", n1.n.stats.StaleRaft, len(stale))
	}
	// A snapshot naming n1 is how a leader that adds it again starts it.
	snap := &pb.Message{Type: pb.MsgSnap, To: n1.n.raftID, From: l.raftID, Term: term, Snapshot: &pb.Snapshot{
		Metadata: pb.SnapshotMetadata{Index: uint64(5), Term: term, ConfState: pb.ConfState{Voters: []uint64{l.raftID}, Learners: []uint64{n1.n.raftID}}}}}
	if !n1.n.mayOpen(part, snap) {
		t.Errorf("a snapshot naming n1 may not open partition %d", part)
	}
}

// A peer restarted after leaving partitions loads only what its WAL
// holds: the partitions it left stay left, and the mesh stays settled.
func TestLeaveRestartKeepsLeft(t *testing.T) {
	const parts = 16
	c := newCluster(t, 4, parts)
	c.run(40 * time.Second)
	c.checkHeld(parts, 3)
	n1 := c.node("n1")
	held := n1.n.Held()
	if len(held) >= parts {
		t.Fatalf("the founder holds all %d partitions", parts)
	}
	n1.log.Crash() // only what was synced survives
	c.start(n1, parts)
	if got := n1.n.Held(); !slices.Equal(got, held) {
		t.Fatalf("restarted, n1 holds %v; it held %v", got, held)
	}
	c.run(20 * time.Second)
	c.checkHeld(parts, 3)
}

// A peer asks only peers that advertise FeatureLeave: an older release
// refuses the message type.
func TestLeaveAsksOnlyPeersThatLeave(t *testing.T) {
	c := newCluster(t, 4, 16)
	c.run(30 * time.Second)
	n := c.node("n1").n
	p := n.parts[n.held[0]]
	if to := n.askTarget(p); to == "" || to == n.cfg.ID {
		t.Fatalf("askTarget = %q; want another peer", to)
	}
	for _, mb := range n.mesh.members {
		mb.features &^= FeatureLeave
	}
	if to := n.askTarget(p); to != "" {
		t.Fatalf("askTarget = %q, which lacks FeatureLeave; want none", to)
	}
}

// A replica heeds a MsgReplicaGone only from a voter of the configuration
// it applied. A member the ring places (a host with the swarm key that
// joined, and pushed this peer off the ring) is not one: its word, with an
// index past anything logged, drops nothing. The voter's word does.
func TestLeaveGoneOnlyFromVoters(t *testing.T) {
	const parts = 16
	c := newCluster(t, 4, parts)
	c.run(30 * time.Second)
	c.checkHeld(parts, 3)
	x := c.node("n2")
	x.down = true
	c.join("n5", parts)
	c.run(60 * time.Second)
	x.down = false
	// n2 hears the mesh (and learns n5) but says nothing, so it asks
	// no one and leaves nothing by itself.
	c.link = func(from, _ *cnode, _ bool) bool { return from != x }
	c.run(10 * time.Second)
	part, voter := -1, ""
	for _, p := range x.n.Held() {
		xp := x.n.parts[p]
		voters := x.n.mesh.voters(xp)
		if !x.n.orphan(xp) || slices.Contains(voters, "n5") {
			continue
		}
		for _, v := range voters {
			if v != x.id {
				part, voter = p, v
			}
		}
		break
	}
	if part < 0 {
		t.Fatal("n2 holds no orphan partition whose configuration it applied lacks n5")
	}
	gone := func(from string) {
		t.Helper()
		m := Message{Type: MsgReplicaGone, From: from, Gone: []GoneMsg{{Partition: uint32(part), Index: ^uint64(0)}}}
		if err := x.n.Step(from, m); err != nil {
			t.Fatal(err)
		}
		c.drain(x)
	}
	gone("n5")
	if x.n.parts[part] == nil {
		t.Fatalf("n2 dropped partition %d on the word of n5, which its configuration does not name", part)
	}
	gone(voter)
	if x.n.parts[part] != nil {
		t.Fatalf("n2 kept partition %d, which its voter %s says excludes it", part, voter)
	}
}
