package node

import (
	"fmt"

	"go.etcd.io/raft/v3"

	"github.com/needle-mesh/needle/shard"
)

// UnavailableError is ErrUnavailable with the partition of the request and
// why this node cannot serve it now, for the 503 its client reads (an
// election under way, leadership moving, the mesh still forming).
// errors.Is(err, ErrUnavailable) holds. The reason is state read when the
// request was answered; a retry may find it gone.
type UnavailableError struct {
	Partition int    // the partition of the request's group
	Reason    string // lower case, no trailing period: "no leader is known yet: an election is under way"
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("peer: unavailable: partition %d: %s", e.Partition, e.Reason)
}

// Unwrap makes the error ErrUnavailable to errors.Is.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// unavailable is the error of a request about partition part that this
// node does not serve now (it does not lead it, or not yet, or no more).
func (n *Node) unavailable(part int) error {
	return &UnavailableError{Partition: part, Reason: n.notServing(part)}
}

// unsure is the error of a request that needs feature what of every
// replica of partition part while a replica's features are not known yet.
func unsure(part int, what string) error {
	return &UnavailableError{Partition: part, Reason: fmt.Sprintf(
		"whether every replica can apply %s is not known yet (a replica not heard from since it started)", what)}
}

// Unavailable returns why this node would neither serve nor route a
// request about group g now: the error a request for g answers when no
// owner is known (Owner is ""), or when this node leads g's partition but
// does not serve it yet.
func (n *Node) Unavailable(g shard.GroupID) *UnavailableError {
	part := n.PartitionOf(g)
	return &UnavailableError{Partition: part, Reason: n.notServing(part)}
}

// notServing says why this node does not serve partition part now, as a
// client should read it.
func (n *Node) notServing(part int) string {
	p := n.parts[part]
	switch {
	case n.mesh.ring == nil || n.alone():
		return "this peer has not joined a mesh yet (it holds no partition and knows no live peer): the mesh is still forming"
	case p == nil || !n.replica(p):
		if owner := n.ownerOf(part); owner != "" {
			return "this peer holds no replica of it now (it moved); its owner is " + owner
		}
		return "this peer holds no replica of it and knows of no live replica that does"
	case p.stalled:
		return "its leader here lost the majority of its voters and takes no writes until they return"
	case p.abdicated:
		return "its leader here heard no majority of its voters and stepped down: an election is under way"
	case p.thawed:
		return "its leader here is confirming its leadership after a gap in its clock"
	case p.leader && !p.serving:
		return "its leader was just elected here and has not committed the first entry of its term"
	case p.serving && p.rn.BasicStatus().LeadTransferee != raft.None:
		return "its leadership is being handed over to its preferred owner"
	case p.serving:
		return "its leader here is confirming its leadership (its read lease lapsed)"
	}
	if id, ok := n.mesh.peerOf(p.rn.BasicStatus().Lead); ok && id != n.cfg.ID {
		return "this peer does not lead it; its leader is " + id
	}
	return "no leader is known yet: an election is under way"
}

// alone reports whether this node holds no partition and knows no other
// live peer: it has not joined a mesh (yet).
func (n *Node) alone() bool {
	for _, p := range n.parts {
		if p != nil {
			return false
		}
	}
	for id := range n.mesh.members {
		if id != n.cfg.ID && n.mesh.live(id) {
			return false
		}
	}
	return true
}
