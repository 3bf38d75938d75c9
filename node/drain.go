package node

import (
	"slices"
)

// Drain makes the node hand its work over before the peer stops: it takes no
// new leases and steals nothing, gossips that it drains so no peer hands it
// leadership, and transfers the leadership of every partition it leads to
// another live replica (tickPartition). Running tasks finish and report as
// usual. Drained tells when it is done.
func (n *Node) Drain() {
	if n.draining {
		return
	}
	n.draining = true
	n.mesh.prefDirty = true
	n.mesh.lastBeat = n.now.Add(-n.cfg.HeartbeatEvery) // gossip it at the next tick
	// The runtime logs the drain at Info, with its timeout.
	n.log.Debug("draining")
}

// Draining reports whether Drain was called.
func (n *Node) Draining() bool { return n.draining }

// Drained reports whether a draining node is done: it leads no partition
// that another live replica could take over, no partition it holds is in
// a joint configuration that needs its vote to leave it, it runs no task
// (its own, or one its external workers run through it), and every
// outcome it reported elsewhere was acknowledged. what says
// what it still waits for.
//
// A joint configuration commits nothing without a majority of its
// outgoing voters too: a mesh founded by one peer moves its partitions
// from that peer alone to three replicas through one, and a founder that
// stopped before the partition left it took the partition down for good
// (cmd/needled TestMeshJoinByName, under load: 503 for 30 s after the
// founder drained).
//
// Leaving it here is not enough: this node, leading, may have committed
// the entry that leaves it and handed the leadership over before the
// others heard of the commit. The new leader still counts the joint
// configuration, and commits its first entry, and with it the one that
// leaves, only with this node's vote (TestMeshJoinByName again: the
// founder drained in 61 ms and both others abdicated, their configuration
// still joint). So a voter is drained only once the partition's leader
// has committed an entry of its own term, which commits all before it.
func (n *Node) Drained() (done bool, what string) {
	if !n.draining {
		return false, "not draining"
	}
	for _, i := range n.held {
		p := n.parts[i]
		if p != nil && p.leader && n.mesh.owner(p) != "" {
			return false, "handing over leadership"
		}
	}
	for _, i := range n.held {
		p := n.parts[i]
		switch {
		case p == nil:
		case slices.Contains(p.conf.VotersOutgoing, n.raftID):
			return false, "a configuration change needs its vote"
		case slices.Contains(p.conf.Voters, n.raftID) && !p.committedInTerm():
			return false, "the leader has not committed in its term"
		}
	}
	switch {
	case n.busy > 0:
		return false, "running tasks"
	case len(n.ext.run) > 0:
		// Leased to this peer for its external workers: their outcomes
		// come back through this peer's hub, which is gone once it stops.
		return false, "external workers running tasks"
	case len(n.mesh.outbox) > 0:
		return false, "outcomes not yet acknowledged"
	}
	return true, ""
}

// committedInTerm reports whether p's commit index is at an entry of the
// current term: the term's leader has committed, and with it every entry
// before.
func (p *partition) committedInTerm() bool {
	st := p.rn.BasicStatus()
	t, err := p.storage.Term(st.Commit)
	return err == nil && t == st.Term
}
