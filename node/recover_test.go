package node

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// A partition in a joint configuration whose halves both lost their
// majority is recovered by its last voter: it leaves the joint
// configuration first (Raft takes no other change in one), then removes
// the lost voters of the incoming half. Here n1 leads two partitions
// caught in a joint change when n2 and n3 are lost: one leaving to
// {n1, n2}, recovered to n1 alone with its group kept (every entry
// committed in the joint configuration needed both voters of {n1, n2}),
// and one leaving to {n2, n3}: n1 leaves with the joint configuration, so
// cannot recover it, and refuses (logged). The other partitions recover.
func TestUnsafeRecoverJoint(t *testing.T) {
	c := newCluster(t, 3, 8)
	c.run(15 * time.Second)
	n1 := c.node("n1")
	var led []int
	for _, i := range n1.n.held {
		if p := n1.n.parts[i]; p.serving && len(p.conf.Voters) == 3 {
			led = append(led, i)
		}
	}
	if len(led) < 2 {
		t.Fatalf("n1 serves %v of the 3-voter partitions; want two (leaders %v)", led, c.leaders())
	}
	joint, leaving := led[0], led[1]
	g := groupIn(t, n1.n, joint)
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(2)}); r.Err != nil {
		t.Fatalf("submit %s: %v", g, r.Err)
	}
	// An explicit joint change stays joint until told to leave.
	for part, remove := range map[int][]string{joint: {"n3"}, leaving: {"n1"}} {
		cc := &pb.ConfChangeV2{Transition: pb.ConfChangeTransitionJointExplicit}
		for _, id := range remove {
			cc.Changes = append(cc.Changes, pb.ConfChangeSingle{Type: pb.ConfChangeRemoveNode, NodeID: RaftID(id)})
		}
		if err := n1.n.parts[part].rn.ProposeConfChange(cc); err != nil {
			t.Fatal(err)
		}
		n1.n.markDirty(part)
	}
	c.run(time.Second)
	for _, part := range led[:2] {
		if out := n1.n.parts[part].conf.VotersOutgoing; len(out) != 3 {
			t.Fatalf("partition %d conf %v; want a joint configuration", part, n1.n.parts[part].conf)
		}
	}
	for _, id := range []string{"n2", "n3"} {
		c.node(id).down = true
	}
	c.run(10 * time.Second)
	n1.n.ForgetUnsafeRecover("n2")
	n1.n.ForgetUnsafeRecover("n3")
	c.run(10 * time.Second)
	if p := n1.n.parts[leaving]; p.recoverTo != 0 || !p.recoverRefused || len(p.conf.VotersOutgoing) == 0 {
		t.Fatalf("partition %d leaving n1: recovering to %d, refused %v, conf %v; want it refused and left as it was", leaving, p.recoverTo, p.recoverRefused, p.conf)
	}
	for _, i := range n1.n.held {
		if p := n1.n.parts[i]; i != leaving && (!p.serving || !slices.Equal(p.conf.Voters, []uint64{n1.n.raftID}) || len(p.conf.VotersOutgoing) != 0) {
			t.Fatalf("partition %d: serving %v conf %v; want recovered on n1 alone", i, p.serving, p.conf)
		}
	}
	if got, want := n1.n.Counters().UnsafeRecoveries, len(n1.n.held)-1; got != want {
		t.Fatalf("UnsafeRecoveries = %d; want %d (every partition but the one leaving n1)", got, want)
	}
	if st, err := n1.n.GroupState(g); err != nil || st == 0 {
		t.Fatalf("group %s of the joint partition after the recovery: %v, %v; want it kept", g, st, err)
	}
	// Nothing left to recover: the scan of the held partitions stops
	// (until a mark, a forget, a claim or a recovery asks again).
	if n1.n.mesh.recoverScan {
		t.Fatal("the recovery scan still runs at every tick with nothing left to recover")
	}
}

// Of two learners' claims to recover a partition, exactly one wins when
// they name the same survivors: the later last term, then the higher last
// index, then the lower peer id. Claims naming other survivors win over
// nothing (a survivor that does not know of the other waits).
func TestRecoverClaimBeats(t *testing.T) {
	both := []string{"a", "b"}
	for _, tc := range []struct {
		a, b RecoverClaim
		want string // the winner: "a", "b" or "" (none)
	}{
		{RecoverClaim{Term: 3, Index: 5, Survivors: both}, RecoverClaim{Term: 2, Index: 9, Survivors: both}, "a"},
		{RecoverClaim{Term: 2, Index: 5, Survivors: both}, RecoverClaim{Term: 2, Index: 9, Survivors: both}, "b"},
		{RecoverClaim{Term: 2, Index: 9, Survivors: both}, RecoverClaim{Term: 2, Index: 9, Survivors: both}, "a"},
		{RecoverClaim{Term: 2, Index: 9, Survivors: []string{"a"}}, RecoverClaim{Term: 2, Index: 5, Survivors: both}, ""},
		{RecoverClaim{Term: 2, Index: 5, Survivors: both}, RecoverClaim{Term: 2, Index: 9, Survivors: []string{"a", "b", "c"}}, ""},
	} {
		aWins, bWins := beats(tc.a, "a", tc.b, "b"), beats(tc.b, "b", tc.a, "a")
		got := ""
		switch {
		case aWins && bWins:
			t.Fatalf("%+v and %+v: both win", tc.a, tc.b)
		case aWins:
			got = "a"
		case bWins:
			got = "b"
		}
		if got != tc.want {
			t.Errorf("%+v against %+v: winner %q; want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// A heartbeat's recover claims are kept per sender until its next
// heartbeat, which replaces them (none: forgotten), and make the
// partitions be looked at again; a forgotten sender's are dropped. A
// heartbeat from before Claims decodes with none.
func TestHeartbeatClaims(t *testing.T) {
	m, err := DecodeMessage(unclaimingHeartbeat(t))
	if err != nil {
		t.Fatalf("heartbeat without Claims: %v", err)
	}
	if h := m.Heartbeat; h.Claims != nil || !slices.Equal(h.Recover, []string{"z"}) {
		t.Fatalf("heartbeat without Claims decoded as %+v", h)
	}
	n, err := NewNode(DefaultNodeConfig("p1", "1"), nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	n.mesh.markRecover("z")
	hb := *m.Heartbeat
	hb.Claims = []RecoverClaim{{Partition: 1, Term: 2, Index: 9, Survivors: []string{"a", "p1"}}}
	b, _ := AppendMessage(nil, &Message{Type: MsgHeartbeat, From: "a", Heartbeat: &hb})
	if m, err = DecodeMessage(b); err != nil || !reflect.DeepEqual(m.Heartbeat.Claims, hb.Claims) {
		t.Fatalf("heartbeat with Claims decoded as %+v, %v", m.Heartbeat, err)
	}
	n.mesh.recoverScan = false
	if err := n.Step("a", m); err != nil {
		t.Fatal(err)
	}
	if got := n.mesh.claims["a"]; !reflect.DeepEqual(got, hb.Claims) || !n.mesh.recoverScan {
		t.Fatalf("claims of a = %+v (scan %v); want %+v and a scan", got, n.mesh.recoverScan, hb.Claims)
	}
	hb.Claims = nil
	if err := n.Step("a", Message{Type: MsgHeartbeat, From: "a", Heartbeat: &hb}); err != nil {
		t.Fatal(err)
	}
	if got, ok := n.mesh.claims["a"]; ok {
		t.Fatalf("claims of a after a heartbeat without = %+v; want none", got)
	}
	n.mesh.heardClaims("a", []RecoverClaim{{Partition: 1}})
	n.Forget("a")
	if got, ok := n.mesh.claims["a"]; ok {
		t.Fatalf("claims of a forgotten peer = %+v; want none", got)
	}
}

// A survivor whose log ends with a configuration change removing it (the
// ring was moving the replica away), not known committed when the other
// voters were lost, committed it by recovering and left the partition:
// the last copy was gone (found by the simulator's --kill-select voters).
// The recovery drops its log from that entry on and keeps the partition.
func TestUnsafeRecoverKeepsSelfRemoval(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	n1, n2 := c.node("n1"), c.node("n2")
	part := -1
	for _, i := range n1.n.held {
		if p := n1.n.parts[i]; p.serving && len(p.conf.Voters) == 3 && slices.Contains(p.conf.Voters, n2.n.raftID) {
			part = i
			break
		}
	}
	if part < 0 {
		t.Fatalf("n1 serves no 3-voter partition of n2's (leaders %v)", c.leaders())
	}
	p := n1.n.parts[part]
	last, _ := p.storage.LastIndex()
	cc := &pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode, NodeID: n2.n.raftID}}}
	if err := p.rn.ProposeConfChange(cc); err != nil {
		t.Fatal(err)
	}
	n1.n.markDirty(part)
	// n2 holds the removal, the others are lost before it learns it
	// committed.
	caught := false
	c.check = func() {
		q := n2.n.parts[part]
		if caught || q == nil {
			return
		}
		if l, _ := q.storage.LastIndex(); l > last && q.rn.BasicStatus().Commit <= last {
			caught = true
			c.node("n1").down, c.node("n3").down = true, true
		}
	}
	c.run(2 * time.Second)
	c.check = nil
	if !caught {
		t.Fatal("n2 never held the removal uncommitted: the test shows nothing")
	}
	c.run(10 * time.Second)
	n2.n.ForgetUnsafeRecover("n1")
	n2.n.ForgetUnsafeRecover("n3")
	c.run(10 * time.Second)
	q := n2.n.parts[part]
	if q == nil || !q.serving || !slices.Equal(q.conf.Voters, []uint64{n2.n.raftID}) {
		t.Fatalf("partition %d on n2: %+v; want it recovered, n2 its only voter", part, q)
	}
}

// A partition in a joint configuration whose outgoing half lost its
// majority while the incoming half kept one: its survivors claim it and
// the most up to date recovers it, leaving the joint configuration and
// removing the lost voter, and the other votes for it. Nothing committed
// is lost: every entry committed in the joint configuration is on a
// majority of the incoming half, of which the winner's log is the most up
// to date. Here n1 leads {n1, y, z} into {n1, z, x} (x a new voter), and
// n1 and y are lost; a group acknowledged before the change and one
// acknowledged in the joint configuration are both there after.
func TestUnsafeRecoverJointSurvivors(t *testing.T) {
	c := newCluster(t, 4, 8)
	c.run(15 * time.Second)
	n1 := c.node("n1")
	part, x, y, z := -1, "", "", ""
	for _, i := range n1.n.held {
		p := n1.n.parts[i]
		if !p.serving || len(p.conf.Voters) != 3 {
			continue
		}
		part = i
		for _, id := range []string{"n2", "n3", "n4"} {
			switch {
			case !slices.Contains(p.conf.Voters, RaftID(id)):
				x = id
			case y == "":
				y = id
			default:
				z = id
			}
		}
		break
	}
	if part < 0 || x == "" {
		t.Fatalf("n1 leads no 3-voter partition (leaders %v)", c.leaders())
	}
	before := groupIn(t, n1.n, part)
	if r := c.submit(shard.GroupSpec{ID: before, Mode: shard.ModeParallel, Tasks: echoTasks(2)}); r.Err != nil {
		t.Fatalf("submit %s: %v", before, r.Err)
	}
	// x opens an empty replica, as one the ring places there does, for
	// the leader's snapshot.
	xn := c.node(x).n
	np, err := xn.openPartition(part, wal.PartitionState{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	xn.hold(np)
	cc := &pb.ConfChangeV2{Transition: pb.ConfChangeTransitionJointExplicit,
		Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode, NodeID: RaftID(x)}, {Type: pb.ConfChangeRemoveNode, NodeID: RaftID(y)}}}
	if err := n1.n.parts[part].rn.ProposeConfChange(cc); err != nil {
		t.Fatal(err)
	}
	n1.n.markDirty(part)
	c.run(2 * time.Second)
	for _, id := range []string{"n1", x, z} {
		if p := c.node(id).n.parts[part]; p == nil || len(p.conf.VotersOutgoing) != 3 || !slices.Contains(p.conf.Voters, RaftID(x)) {
			t.Fatalf("%s: partition %d not in the joint configuration (n1: %v)", id, part, n1.n.parts[part].conf)
		}
	}
	var during shard.GroupID
	for i := 0; during == ""; i++ {
		if g := shard.GroupID(fmt.Sprint("j", i)); n1.n.PartitionOf(g) == part {
			during = g
		}
	}
	if r := c.submit(shard.GroupSpec{ID: during, Mode: shard.ModeParallel, Tasks: echoTasks(2)}); r.Err != nil {
		t.Fatalf("submit %s: %v", during, r.Err)
	}
	c.run(time.Second)
	n1.down, c.node(y).down = true, true
	c.run(10 * time.Second)
	if srv := c.servers(part); len(srv) != 0 {
		t.Fatalf("partition %d served by %v with its outgoing half's majority lost", part, srv)
	}
	for _, id := range []string{x, z} {
		c.node(id).n.ForgetUnsafeRecover("n1")
		c.node(id).n.ForgetUnsafeRecover(y)
	}
	c.run(10 * time.Second)
	srv := c.servers(part)
	if len(srv) != 1 {
		t.Fatalf("partition %d served by %v after the declaration; want one of %s, %s", part, srv, x, z)
	}
	want := []uint64{RaftID(x), RaftID(z)}
	slices.Sort(want)
	for _, id := range []string{x, z} {
		p := c.node(id).n.parts[part]
		voters := slices.Sorted(slices.Values(p.conf.Voters))
		if !slices.Equal(voters, want) || len(p.conf.VotersOutgoing) != 0 {
			t.Fatalf("%s: partition %d conf %v after the recovery; want voters %s and %s", id, part, p.conf, x, z)
		}
	}
	for _, g := range []shard.GroupID{before, during} {
		if st, err := c.node(srv[0]).n.GroupState(g); err != nil || st == 0 {
			t.Fatalf("group %s after the recovery: %v, %v; want it kept", g, st, err)
		}
	}
}
