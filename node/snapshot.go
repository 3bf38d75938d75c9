package node

import (
	"bytes"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// installSnapshot replaces a partition's state with a snapshot received from
// its leader.
func (n *Node) installSnapshot(p *partition, snap pb.Snapshot) {
	if err := p.storage.Apply(wal.Update{Snapshot: snap}); err != nil {
		panic(fmt.Sprintf("peer: partition %d: in-memory raft storage refused snapshot: %v", p.id, err))
	}
	if r := p.takeDecoded(&snap); r != nil {
		p.shard.Install(r)
	} else if err := p.shard.Restore(snap.Data); err != nil {
		// The leader encoded it and Raft checked nothing of its content: a
		// bug, never bad input from outside (messages are decoded and
		// checked at the edge).
		panic(fmt.Sprintf("peer: partition %d: restore snapshot %d: %v", p.id, snap.Metadata.Index, err))
	}
	p.applied = snap.Metadata.Index
	p.snapIndex, p.snapBytes, p.logBytes = p.applied, len(snap.Data), 0
	cs := snap.Metadata.ConfState
	p.conf = &cs
	if p.serving {
		p.shard.SetLeader(true, n.now)
	}
}

// decodedSnap is a snapshot received from a leader, checked at the edge
// (checkRaft) and decoded there, kept until the partition's next Ready
// installs it: decoded once, not twice. Raft installs a copy of the
// message's snapshot (its unstable log clones it), told apart from
// another by index, term and bytes.
type decodedSnap struct {
	index, term uint64
	data        []byte
	r           *shard.Restored
}

// keepDecoded keeps snap's decoded state r for installSnapshot.
func (p *partition) keepDecoded(snap *pb.Snapshot, r *shard.Restored) {
	md := snap.Metadata
	p.decoded = decodedSnap{index: md.Index, term: md.Term, data: snap.Data, r: r}
}

// takeDecoded returns the decoded state kept for snap, nil when none is
// (then snap is decoded again), and forgets what was kept.
func (p *partition) takeDecoded(snap *pb.Snapshot) *shard.Restored {
	d := p.decoded
	p.decoded = decodedSnap{}
	md := snap.Metadata
	if d.r == nil || d.index != md.Index || d.term != md.Term || !bytes.Equal(d.data, snap.Data) {
		return nil
	}
	return d.r
}

// startSnapshotLeases starts the committed leases held by this run of the
// peer that a snapshot brought in. A replica that catches up by snapshot
// (every new replica does: adding it forces one) applies none of
// the lease entries it covers, and a lease does not expire while its
// holder lives: one granted to this node while it was no replica yet,
// whose grant it refused (a young mesh's leader is often not the owner a
// non-replica expects, grantable) or never got, would stay RUNNING for
// good. Leases it started already (from a grant or the log, running or
// done) or whose outcome waits in the outbox are left alone; external ones are the workers' (their lease
// expiry is not in the snapshot's view) and wait for the owner. Called
// once the entries committed with the snapshot are applied (readyPartition):
// a lease they end is not started.
func (n *Node) startSnapshotLeases(p *partition) {
	f := &shard.Filter{States: []shard.State{shard.Running}, Peer: n.cfg.ID, Limit: 256}
	for {
		ts, keys := p.shard.ListTasks(f)
		for _, t := range ts {
			if t.Holder != n.holder || n.External(t.Handler) {
				continue
			}
			if c, ok := n.started[t.ID]; ok && c.round >= t.Round {
				continue // started here already, from a grant or the log
			}
			if _, sent := n.mesh.outbox[outboxKey(t.ID, t.Round)]; sent {
				continue
			}
			ev := shard.Event{Type: shard.EvLeased, Task: t.ID, Round: t.Round, Holder: t.Holder}
			n.applyLease(p, &ev, "")
		}
		if len(ts) < f.Limit || len(keys) == 0 {
			return
		}
		f.After = &keys[len(keys)-1]
	}
}

// maybeSnapshot snapshots a partition's state and compacts its log once
// SnapshotEvery entries, or snapshotLogBytes of entries, were applied
// since the last snapshot and those entries hold at least half as many
// bytes as that snapshot did. The second bound keeps a big partition from
// re-encoding its whole state every SnapshotEvery small entries (a
// 10,000-task group snapshotted 48 times in the simulator): the bytes
// encoded by snapshots stay within twice the bytes appended to the log,
// and the log kept between two snapshots stays within about half the
// state. The byte bound keeps big entries from piling up: under W1 an
// entry carries hundreds of tasks, a partition took a few hundred entries
// in ten minutes, and the log kept in memory grew with everything ever
// submitted (900 MB a peer after 8 minutes). The snapshot is persisted
// with the next Ready; a change that adds a replica forces one (forceSnap).
func (n *Node) maybeSnapshot(p *partition) {
	due := (p.applied-p.snapIndex >= n.cfg.SnapshotEvery || p.logBytes >= snapshotLogBytes) && p.logBytes >= p.snapBytes/2
	if !due && !(p.forceSnap && p.applied > p.snapIndex) {
		return
	}
	p.forceSnap = false
	snap, err := p.storage.CreateSnapshot(p.applied, p.conf, p.shard.SnapshotGrown(p.logBytes))
	if err != nil {
		if err == raft.ErrSnapOutOfDate {
			return
		}
		panic(fmt.Sprintf("peer: partition %d: snapshot at %d: %v", p.id, p.applied, err))
	}
	if err := p.storage.Compact(p.applied); err != nil && err != raft.ErrCompacted {
		panic(fmt.Sprintf("peer: partition %d: compact at %d: %v", p.id, p.applied, err))
	}
	p.snapIndex, p.snapBytes, p.logBytes = p.applied, len(snap.Data), 0
	n.rd.Persist.Updates = append(n.rd.Persist.Updates, wal.Update{Partition: uint32(p.id), Snapshot: snap})
	n.rd.MustSync = true
	n.markDirty(p.id)
}

// snapshotLogBytes is how many bytes of entries a partition's log takes
// before a snapshot is due whatever their number (maybeSnapshot): with
// 256 partitions, at most about 256 MB of log held in memory between
// snapshots, where the state does not call for more.
const snapshotLogBytes = 1 << 20
