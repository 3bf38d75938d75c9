package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestProposalsOwnTheirBytes holds the node to what etcd raft v3.6
// requires: Raft keeps the bytes a proposal hands it (in its log and in
// the appends it sends), so the node must not propose the buffer it
// encodes every entry into. Groups are submitted one after another on a
// 3-replica partition, and every replica must apply each of them: an
// append that shared the buffer would carry whatever was encoded next.
func TestProposalsOwnTheirBytes(t *testing.T) {
	c, part, _ := raftTarget(t)
	var ids []shard.GroupID
	for i := 0; len(ids) < 3; i++ {
		if g := shard.GroupID(fmt.Sprintf("group-%03d", i)); c.node("n1").n.PartitionOf(g) == part {
			ids = append(ids, g)
		}
	}
	for _, id := range ids {
		if r := c.submit(shard.GroupSpec{ID: id, Mode: shard.ModeParallel, Tasks: echoTasks(3)}); r.Err != nil {
			t.Fatalf("submit %s: %v", id, r.Err)
		}
	}
	c.run(2 * time.Second)
	replicas := 0
	for _, cn := range c.nodes {
		p := cn.n.parts[part]
		if p == nil {
			continue
		}
		replicas++
		// The log as Raft keeps it (and sends it to a replica that lags).
		first, _ := p.storage.FirstIndex()
		last, _ := p.storage.LastIndex()
		ents, err := p.storage.Entries(first, last+1, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		submitted := map[shard.GroupID]int{}
		for _, e := range ents {
			if e.Type != pb.EntryNormal || len(e.Data) == 0 {
				continue
			}
			b, err := shard.DecodeBatch(e.Data)
			if err != nil {
				t.Fatalf("%s: entry %d: %v", cn.id, e.Index, err)
			}
			for _, ev := range b.Events {
				if ev.Type == shard.EvSubmitted {
					submitted[ev.Group]++
				}
			}
		}
		for _, id := range ids {
			if _, err := p.shard.GroupState(id); err != nil {
				t.Errorf("%s: group %s: %v", cn.id, id, err)
			}
			if submitted[id] != 1 {
				t.Errorf("%s: the log holds %d submissions of %s; want 1", cn.id, submitted[id], id)
			}
		}
	}
	if replicas != 3 {
		t.Fatalf("%d replicas of the partition; want 3", replicas)
	}
}
