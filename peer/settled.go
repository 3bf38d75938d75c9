package peer

import "fmt"

// Unsettled returns how many partitions have no owner this node can route
// to: not served here, and no live leader known (or, for a partition this
// node holds no replica of, no live replica in the ring). A peer reports
// itself ready (GET /healthz) only when this is zero.
func (n *Node) Unsettled() int {
	missing := 0
	for i := range n.parts {
		owner := n.ownerOf(i)
		if owner == "" || (owner != n.cfg.ID && !n.mesh.live(owner)) {
			missing++
		}
	}
	return missing
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
