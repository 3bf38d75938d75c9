package peer

import (
	"fmt"

	"github.com/needle-mesh/needle/node"
)

// readiness is /healthz's check: the loop answers, and every partition has
// an owner to route to.
func (p *Peer) readiness() error {
	ctx, cancel := contextWithTimeout(p.runCtx)
	defer cancel()
	var missing int
	if err := p.read(ctx, func(n *node.Node) error { missing = n.Unsettled(); return nil }); err != nil {
		return err
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d partitions have no reachable owner yet", missing, p.node.Partitions())
	}
	return nil
}
