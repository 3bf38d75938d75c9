package node

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A follower asked for its vote by a candidate whose log is behind its
// own campaigns at its next tick (refusedBehind), but only for a voter
// of its configuration. A replica removed while it was paused kept the
// old configuration and campaigned every few ticks with its stale log;
// each of its requests sent a voter into the preferred owner's campaigns
// at the same tick, round after round, and the two split the vote for
// good (simulate: seed 500206, --peers 5 --start join --workers 1).
func TestRefusedBehindOnlyForVoters(t *testing.T) {
	c, ld, led := leaderMesh(t, 4)
	var f, other *cnode
	for _, cn := range c.nodes {
		switch {
		case cn == ld:
		case f == nil:
			f = cn
		default:
			other = cn
		}
	}
	p := f.n.parts[led[0]]
	if p == nil || !f.n.inConf(p) {
		t.Fatalf("%s holds no replica of partition %d", f.id, led[0])
	}
	behind := func(from uint64) *pb.Message {
		return &pb.Message{Type: pb.MsgPreVote, From: from, Term: p.rn.BasicStatus().Term + 1, LogTerm: uint64(0), Index: uint64(0)}
	}
	f.n.refusedBehind(p, behind(RaftID("n9")))
	if !p.campaignAt.IsZero() {
		t.Fatalf("a behind pre-vote from a peer that is no voter of partition %d made %s campaign at %v", led[0], f.id, p.campaignAt)
	}
	f.n.refusedBehind(p, behind(RaftID(other.id)))
	if period := f.n.heartbeatPeriod(); p.campaignAt.IsZero() || p.campaignAt.Sub(f.n.now) >= period {
		t.Fatalf("a behind pre-vote from voter %s of partition %d made %s campaign at %v, %v from now; want within %v", other.id, led[0], f.id, p.campaignAt, p.campaignAt.Sub(f.n.now), period)
	}
}
