package simulate

import (
	"fmt"

	"github.com/needle-mesh/needle/peer"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// This file holds the plug points between the simulator and the mesh:
// routing, message delivery, gossip and replica agreement. n0 founds the
// mesh (bootstraps every partition); the others join by gossip and get
// replicas through Raft configuration changes.

// route returns the node a request for group g goes to: the owner (Raft
// leader, serving) as the first live node that knows one says, else the
// ring's preferred owner over the full membership (the client's guess, as
// a client that submits to any peer and lets it forward).
func (s *sim) route(g shard.GroupID) int {
	for _, nd := range s.nodes {
		if !nd.up || nd.paused {
			continue
		}
		if nd.n.Serving(g) {
			return nd.idx
		}
		if o := nd.n.Owner(g); o != "" {
			if i := s.peerIndex(o); i >= 0 {
				return i
			}
		}
	}
	return s.owners[ring.PartitionOf(shard.RouteKey(string(g)), s.cfg.Partitions)]
}

// serving returns a live node that serves g's partition, or nil.
func (s *sim) serving(g shard.GroupID) *simNode {
	for _, nd := range s.nodes {
		if nd.up && !nd.paused && nd.n.Serving(g) {
			return nd
		}
	}
	return nil
}

// peerIndex maps a peer id to a node index; -1 when it names no node (the
// network counts the message undeliverable).
func (s *sim) peerIndex(id string) int {
	if i, ok := s.byID[id]; ok {
		return i
	}
	return -1
}

// step hands a message from another node to nd (inside nd.input, so the
// node has ticked to its own now). A refused message is the sender's
// problem, as on a real stream; the count shows in the report.
func (s *sim) step(nd *simNode, from int, m *peer.Message) {
	if err := nd.n.Step(s.nodes[from].id, *m); err != nil {
		s.st.refusedMsgs++
	}
}

// gossip sends a best-effort message to every other node.
func (s *sim) gossip(from int, m peer.Message) {
	for to := range s.nodes {
		if to != from {
			s.net.send(from, to, message{env: &peer.Envelope{To: s.nodes[to].id, Msg: m}})
		}
	}
}

// checkReplicas is invariant 5: every replica of a partition on a running
// node that applied the same Raft index holds the same state
// (Node.Digest). It runs at the end of the run and, for runs small enough
// that encoding every replica is cheap, every few virtual seconds once the
// faults have healed.
func (s *sim) checkReplicas() {
	type seen struct {
		node string
		sum  uint64
	}
	for part := range s.cfg.Partitions {
		byIndex := map[uint64]seen{}
		for _, nd := range s.nodes {
			if !nd.up || nd.n == nil {
				continue
			}
			applied, sum, ok := nd.n.Digest(part)
			if !ok {
				continue
			}
			first, dup := byIndex[applied]
			if dup {
				s.replicaPairs++
			}
			if dup && first.sum != sum {
				s.fail(invReplicas, fmt.Sprintf("partition %d: %s and %s applied index %d but hold different state (%016x vs %016x)",
					part, first.node, nd.id, applied, first.sum, sum))
				return
			}
			byIndex[applied] = seen{nd.id, sum}
		}
	}
}

// replicaCheckEvery is how often checkReplicas runs after the faults heal,
// in periodic ticks (virtual seconds), for runs of at most
// replicaCheckTasks tasks.
const (
	replicaCheckEvery = 5
	replicaCheckTasks = 20_000
)

// newDisk returns a node's disk.
func newDisk() *wal.Memory { return wal.NewMemory() }
