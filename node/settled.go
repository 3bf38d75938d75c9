package node

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
