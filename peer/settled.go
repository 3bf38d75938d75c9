package peer

import (
	"fmt"

	"go.etcd.io/raft/v3"
)

// Unsettled returns how many partitions have no owner this node can route
// to: not served here, and no live leader known (or, for a partition this
// node holds no replica of, no live replica in the ring). A peer reports
// itself ready (GET /healthz) only when this is zero.
func (n *Node) Unsettled() int {
	missing := 0
	for i, p := range n.parts {
		switch {
		case p != nil && p.serving:
		case p != nil:
			lead, ok := n.mesh.peerOf(p.rn.BasicStatus().Lead)
			if p.rn.BasicStatus().Lead == raft.None || !ok || lead == n.cfg.ID || !n.mesh.live(lead) {
				missing++
			}
		default:
			if n.mesh.ring == nil || !n.anyLiveReplica(i) {
				missing++
			}
		}
	}
	return missing
}

func (n *Node) anyLiveReplica(part int) bool {
	for _, id := range n.mesh.ring.Replicas(part) {
		if string(id) != n.cfg.ID && n.mesh.live(string(id)) {
			return true
		}
	}
	return false
}

// readiness is /healthz's check: the loop answers, and every partition has
// an owner to route to.
func (p *Peer) readiness() error {
	ctx, cancel := contextWithTimeout(p.runCtx)
	defer cancel()
	var missing int
	if err := p.read(ctx, func(n *Node) error { missing = n.Unsettled(); return nil }); err != nil {
		return err
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d partitions have no reachable owner yet", missing, p.node.cfg.Partitions)
	}
	return nil
}
