package node

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
)

// memberIDs returns the ids n counts as members.
func memberIDs(n *Node) []string {
	var ids []string
	for _, m := range n.Members() {
		ids = append(ids, m.ID)
	}
	return ids
}

// A host holding the swarm key but never heartbeating sent Raft messages,
// and the first one made it a member: the ring then gave it partitions it
// never served, and the mesh stopped running tasks (needle hostile
// --wire-types raft). Raft from a non-member is refused like any other
// message, and adds no one.
func TestRaftFromNonMemberRefused(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	n1 := c.node("n1").n
	m := Message{Type: MsgRaft, From: "intruder", Raft: []RaftMsg{{Partition: 0, Msg: &pb.Message{
		Type: pb.MsgHeartbeat, To: n1.raftID, From: RaftID("intruder"), Term: uint64(1)}}}}
	if err := n1.Step("intruder", m); !errors.Is(err, ErrNotMember) || !errors.Is(err, ErrUnheard) {
		t.Fatalf("Step(raft from a non-member) = %v; want ErrNotMember, not heard yet (ErrUnheard)", err)
	}
	if got := memberIDs(n1); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("members after raft from a non-member = %v; want [n1 n2 n3]", got)
	}
}

// A heartbeat's Forgotten list made every peer forget live peers: one keyed
// host could remove the whole mesh. A forget heard second-hand applies once
// the peer is dead here too.
func TestGossipedForgetOfLivePeerWaitsUntilDead(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	n1 := c.node("n1").n
	forged := Message{Type: MsgHeartbeat, From: "n2", Heartbeat: &Heartbeat{Boot: "1", Partitions: 4,
		Members: []string{"n1", "n2", "n3"}, Forgotten: []string{"n3"}}}
	if err := n1.Step("n2", forged); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(n1); !slices.Contains(got, "n3") {
		t.Fatalf("n1 forgot n3, alive, on a heartbeat's word: members %v", got)
	}
	c.node("n3").down = true
	c.run(5 * time.Second) // past DeadAfter
	if err := n1.Step("n2", forged); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(n1); slices.Contains(got, "n3") {
		t.Fatalf("n1 kept n3, dead, after a heartbeat that forgot it: members %v", got)
	}
}

// needle forget right after a kill, before the failure detector declared
// the peer dead, removed it without expiring its leases: its tasks stayed
// RUNNING until their timeouts.
func TestForgetBeforeDeadExpiresLeases(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	part, _ := c.ledBy("n1", parts)
	g := groupIn(t, c.node("n1").n, part)
	tasks := echoTasks(1)
	tasks[0].Pin = "n3"
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: tasks}); r.Err != nil {
		t.Fatal(r.Err)
	}
	victim := c.node("n3")
	for i := 0; len(c.runs["n3"]) == 0; i++ {
		if i > 500 {
			t.Fatal("n3 never got its pinned task")
		}
		c.step(10 * time.Millisecond)
	}
	victim.down = true // killed with the lease
	for _, id := range []string{"n1", "n2"} {
		c.node(id).n.Forget("n3")
	}
	c.run(time.Second) // well inside DeadAfter (3 s): only the forget can free it
	if st := c.groupState(g); st != shard.GroupFailed {
		t.Fatalf("group = %v a second after n3 was forgotten holding its lease; want FAILED (pinned to a forgotten peer)", st)
	}
}

// Members named second-hand must be well-formed ids (the daemon: libp2p
// peer ids), or a heartbeat fills the membership with junk.
func TestLearnedMembersMustBeValidIDs(t *testing.T) {
	cfg := DefaultNodeConfig("n1", "1")
	cfg.Partitions = 4
	cfg.ValidID = func(id string) bool { return strings.HasPrefix(id, "n") }
	n, err := NewNode(cfg, nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	hb := Message{Type: MsgHeartbeat, From: "n2", Heartbeat: &Heartbeat{Boot: "1", Partitions: 4,
		Members: []string{"\x00", "n1", "n2", "n9", "junk"}}}
	if err := n.Step("n2", hb); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(n); !slices.Equal(got, []string{"n1", "n2", "n9"}) {
		t.Fatalf("members = %v; want [n1 n2 n9]", got)
	}
}

// A peer forgotten while it runs on (needle forget --force, or restarted
// on its old data after the forget) is told so by the peers it still
// sends to, now and then: it could never become ready, and only their
// logs said why.
func TestForgottenPeerIsTold(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n3 := c.node("n3").n
	if by := n3.ForgottenBy(); by != "" {
		t.Fatalf("ForgottenBy = %q before any forget", by)
	}
	for _, id := range []string{"n1", "n2"} {
		c.node(id).n.Forget("n3")
	}
	for i := 0; n3.ForgottenBy() == ""; i++ {
		if i > 3000 {
			t.Fatal("n3 was not told it was forgotten within 30 s of running on")
		}
		c.step(10 * time.Millisecond)
	}
	if by := n3.ForgottenBy(); by != "n1" && by != "n2" {
		t.Fatalf("ForgottenBy = %q; want n1 or n2", by)
	}
	// Told now and then, not at every message it sends.
	told := 0
	for _, id := range []string{"n1", "n2"} {
		told += len(c.node(id).n.mesh.toldForgotten)
	}
	if told == 0 {
		t.Fatal("no peer recorded telling n3")
	}
}
