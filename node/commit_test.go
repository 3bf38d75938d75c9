package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	pb "go.etcd.io/raft/v3/raftpb"
)

// A commit index rides the next message a leader sends its follower (an
// append with entries, the heartbeat that quiesces the partition) instead
// of an empty append of its own: a settled 3-peer mesh running one task
// after another sends almost no commit-only appends, where Raft sends one
// per follower per entry, and every follower ends knowing the leader's
// commit index.
func TestCommitRidesNextMessage(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(40 * time.Second)
	var withEntries, commitOnly int
	c.trace = func(id string, d Duty, rd *Ready) {
		if d != DutySendEarly {
			return
		}
		for _, e := range rd.Early {
			for _, rm := range e.Msg.Raft {
				if rm.Msg.Type != pb.MsgApp {
					continue
				}
				if len(rm.Msg.Entries) > 0 {
					withEntries++
				} else {
					commitOnly++
				}
			}
		}
	}
	for i := range 40 {
		if r := c.submit(shard.GroupSpec{ID: shard.GroupID(fmt.Sprint("c", i)), Mode: shard.ModeSingle, Tasks: echoTasks(1)}); r.Err != nil {
			t.Fatal(r.Err)
		}
		if i%10 == 9 {
			c.run(2 * time.Second) // quiesce now and then
		}
	}
	c.run(2 * time.Second)
	t.Logf("%d appends with entries, %d commit-only", withEntries, commitOnly)
	if withEntries < 80 {
		t.Fatalf("%d appends with entries for 40 tasks; want at least one per follower per task", withEntries)
	}
	if commitOnly*4 > withEntries {
		t.Errorf("%d commit-only appends for %d appends with entries; want at most a quarter", commitOnly, withEntries)
	}
	for part := range parts {
		var commits []uint64
		for _, cn := range c.nodes {
			if p := cn.n.parts[part]; p != nil {
				commits = append(commits, p.rn.BasicStatus().Commit)
			}
		}
		for _, ci := range commits[1:] {
			if ci != commits[0] {
				t.Errorf("partition %d: commit indexes %v; want the leader's on every replica", part, commits)
				break
			}
		}
	}
}
