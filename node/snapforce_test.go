package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// A replica change takes a snapshot only when it adds a replica (the
// newcomer catches up from one, which must name it): a promotion, a
// joint configuration's leave or a removal takes none, so a partition
// moving from the founder's lone voter to the ring's three encodes its
// whole state twice (one per learner), not at every one of its steps.
// Every replica ends with the state and the ring's voters.
func TestSnapshotOnlyForNewReplicas(t *testing.T) {
	const parts = 4
	c := newCluster(t, 1, parts)
	c.run(2 * time.Second)
	for i := range 60 {
		if r := c.submit(shard.GroupSpec{ID: shard.GroupID(fmt.Sprint("g", i)), Mode: shard.ModeSingle, Tasks: echoTasks(1)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	c.run(2 * time.Second)
	// prev is, per node and partition, the configuration of the last
	// snapshot that node persisted (nil before its first).
	prev := map[string]map[uint32]*pb.ConfState{}
	snaps, useless := 0, 0
	c.trace = func(id string, d Duty, rd *Ready) {
		if d != DutyPersist {
			return
		}
		for _, u := range rd.Persist.Updates {
			if raft.IsEmptySnap(u.Snapshot) {
				continue
			}
			if prev[id] == nil {
				prev[id] = map[uint32]*pb.ConfState{}
			}
			cs := &u.Snapshot.Metadata.ConfState
			if old := prev[id][u.Partition]; old != nil && !addsReplica(old, cs) {
				useless++
				t.Errorf("%s persisted a snapshot of partition %d at %d naming no new replica: %v after %v",
					id, u.Partition, u.Snapshot.Metadata.Index, cs, old)
			}
			prev[id][u.Partition] = cs
			snaps++
		}
	}
	for _, id := range []string{"n2", "n3", "n4"} {
		cn := &cnode{id: id, log: wal.NewMemory()}
		c.nodes = append(c.nodes, cn)
		c.start(cn, parts)
	}
	c.run(30 * time.Second)
	if snaps == 0 {
		t.Fatal("no snapshot persisted while the partitions grew")
	}
	for part := range parts {
		var servers []string
		for _, cn := range c.nodes {
			p := cn.n.parts[part]
			if p == nil {
				continue
			}
			if got := len(p.conf.Voters); got != 3 || len(p.conf.Learners) != 0 || len(p.conf.VotersOutgoing) != 0 {
				t.Errorf("%s: partition %d configuration %v, want 3 voters", cn.id, part, p.conf)
			}
			servers = append(servers, cn.id)
		}
		if len(servers) != 3 {
			t.Errorf("partition %d held by %v, want 3 replicas", part, servers)
		}
	}
	// Every replica holds every task, moved by the snapshots and the log.
	for _, cn := range c.nodes {
		tasks := 0
		for _, p := range cn.n.parts {
			if p != nil {
				ts, _ := p.shard.ListTasks(&shard.Filter{Limit: 1000})
				tasks += len(ts)
			}
		}
		if held := len(cn.n.held); held > 0 && tasks == 0 {
			t.Errorf("%s holds %d partitions and no task", cn.id, held)
		}
	}
	total := 0
	for part := range parts {
		for _, cn := range c.nodes {
			if p := cn.n.parts[part]; p != nil && p.leader {
				ts, _ := p.shard.ListTasks(&shard.Filter{Limit: 1000})
				total += len(ts)
			}
		}
	}
	if total != 60 {
		t.Errorf("the leaders hold %d tasks, want 60", total)
	}
	t.Logf("%d snapshots persisted, %d naming no new replica", snaps, useless)
}

// A snapshot decoded at the edge is installed by the Ready that takes it,
// recognised in Raft's copy by index, term and bytes; another snapshot, or
// one a Ready already passed, is decoded again.
func TestDecodedSnapshotKept(t *testing.T) {
	s, _ := shard.New(shard.DefaultConfig())
	data := s.Snapshot()
	snap := &pb.Snapshot{Data: data, Metadata: pb.SnapshotMetadata{Index: uint64(7), Term: uint64(2)}}
	var p partition
	keep := func() *shard.Restored {
		r, err := shard.DecodeSnapshot(data)
		if err != nil {
			t.Fatal(err)
		}
		p.keepDecoded(snap, r)
		return r
	}
	r := keep()
	if got := p.takeDecoded(new(wal.CloneSnapshot(*snap))); got != r {
		t.Fatalf("Raft's copy of the kept snapshot: got %p, want %p", got, r)
	}
	if p.decoded.r != nil || p.takeDecoded(snap) != nil {
		t.Fatal("the decoded state is kept after it was taken")
	}
	for name, other := range map[string]*pb.Snapshot{
		"index": {Data: data, Metadata: pb.SnapshotMetadata{Index: uint64(8), Term: uint64(2)}},
		"term":  {Data: data, Metadata: pb.SnapshotMetadata{Index: uint64(7), Term: uint64(3)}},
		"bytes": {Data: append(slices.Clone(data), 0), Metadata: pb.SnapshotMetadata{Index: uint64(7), Term: uint64(2)}},
	} {
		keep()
		if p.takeDecoded(other) != nil {
			t.Errorf("a snapshot of another %s took the kept state", name)
		}
	}
}

// No decoded snapshot outlives the Ready after it: the partitions a mesh
// grew into keep none.
func TestDecodedSnapshotNotKept(t *testing.T) {
	c := newCluster(t, 4, 8)
	c.run(30 * time.Second)
	installed := 0
	for _, cn := range c.nodes {
		for _, p := range cn.n.parts {
			if p == nil {
				continue
			}
			if p.decoded.r != nil {
				t.Errorf("%s: partition %d keeps a decoded snapshot at %d", cn.id, p.id, p.decoded.index)
			}
			if !cn.founder && p.snapIndex > 1 {
				installed++
			}
		}
	}
	if installed == 0 {
		t.Fatal("no joiner installed a snapshot")
	}
}
