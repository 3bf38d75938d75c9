package node

import (
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
	// (until a mark, a forget or a recovery asks again).
	if n1.n.mesh.recoverScan {
		t.Fatal("the recovery scan still runs at every tick with nothing left to recover")
	}
}
