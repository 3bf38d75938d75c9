package node

import (
	"reflect"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A partition in a joint configuration is not recovered: which voters
// committed its entries is not known, and leaving the joint configuration
// needs the outgoing voters. Its last voter refuses, the other partitions
// recover.
func TestUnsafeRecoverRefusesJoint(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	n1 := c.node("n1")
	joint := -1
	for _, i := range n1.n.held {
		if p := n1.n.parts[i]; p.serving && len(p.conf.GetVoters()) == 3 {
			joint = i
			break
		}
	}
	if joint < 0 {
		t.Fatalf("n1 serves no 3-voter partition (leaders %v)", c.leaders())
	}
	// An explicit joint change stays joint until told to leave.
	p := n1.n.parts[joint]
	cc := &pb.ConfChangeV2{Transition: pb.ConfChangeTransition_ConfChangeTransitionJointExplicit.Enum(),
		Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(RaftID("n3"))}}}
	if err := p.rn.ProposeConfChange(cc); err != nil {
		t.Fatal(err)
	}
	n1.n.markDirty(joint)
	c.run(time.Second)
	if out := p.conf.GetVotersOutgoing(); len(out) != 3 {
		t.Fatalf("partition %d conf %v; want a joint configuration", joint, p.conf)
	}
	for _, id := range []string{"n2", "n3"} {
		c.node(id).down = true
	}
	c.run(10 * time.Second)
	n1.n.ForgetUnsafeRecover("n2")
	n1.n.ForgetUnsafeRecover("n3")
	c.run(10 * time.Second)
	if p := n1.n.parts[joint]; p.recoverTo != 0 || !p.recoverRefused || len(p.conf.GetVotersOutgoing()) == 0 {
		t.Fatalf("joint partition %d: recovering to %d, refused %v, conf %v; want it refused and left as it was", joint, p.recoverTo, p.recoverRefused, p.conf)
	}
	for _, i := range n1.n.held {
		if p := n1.n.parts[i]; i != joint && (!p.serving || !slices.Equal(p.conf.GetVoters(), []uint64{n1.n.raftID})) {
			t.Fatalf("partition %d: serving %v voters %v; want recovered on n1 alone", i, p.serving, p.conf.GetVoters())
		}
	}
	if got, want := n1.n.Counters().UnsafeRecoveries, len(n1.n.held)-1; got != want {
		t.Fatalf("UnsafeRecoveries = %d; want %d (every partition but the joint one)", got, want)
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
		if p := n1.n.parts[i]; p.serving && len(p.conf.GetVoters()) == 3 && slices.Contains(p.conf.GetVoters(), n2.n.raftID) {
			part = i
			break
		}
	}
	if part < 0 {
		t.Fatalf("n1 serves no 3-voter partition of n2's (leaders %v)", c.leaders())
	}
	p := n1.n.parts[part]
	last, _ := p.storage.LastIndex()
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(n2.n.raftID)}}}
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
		if l, _ := q.storage.LastIndex(); l > last && q.rn.BasicStatus().GetCommit() <= last {
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
	if q == nil || !q.serving || !slices.Equal(q.conf.GetVoters(), []uint64{n2.n.raftID}) {
		t.Fatalf("partition %d on n2: %+v; want it recovered, n2 its only voter", part, q)
	}
}
