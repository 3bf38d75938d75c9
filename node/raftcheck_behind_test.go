package node

import (
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A current leader's heartbeat that commits past a follower's log says the
// follower lost entries it acknowledged (its data dir restored from an
// older copy): refused as a bad message, and named as such (ErrLogBehind)
// so that the peer can say what to do. A deposed leader's is let through.
func TestHeartbeatPastTheLogIsLogBehind(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(40 * time.Second)
	var leader string
	for id := range c.leaders() {
		leader = id
		break
	}
	part, follower := c.ledBy(leader, 4)
	p := c.node(follower).n.parts[part]
	last, _ := p.storage.LastIndex()
	term := p.rn.BasicStatus().Term
	commit := last + 3
	hb := &pb.Message{Type: pb.MsgHeartbeat, Term: term, Commit: commit}
	_, err := c.node(follower).n.checkRaft(p, hb)
	if !errors.Is(err, ErrBadRaft) || !errors.Is(err, ErrLogBehind) {
		t.Fatalf("heartbeat committing %d past last index %d: %v; want ErrBadRaft and ErrLogBehind", last+3, last, err)
	}
	hb.Commit = last
	if _, err := c.node(follower).n.checkRaft(p, hb); err != nil {
		t.Fatalf("heartbeat committing the last index: %v", err)
	}
}
