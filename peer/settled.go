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
	var forgottenBy string
	if err := p.read(ctx, func(n *node.Node) error { missing, forgottenBy = n.Unsettled(), n.ForgottenBy(); return nil }); err != nil {
		return err
	}
	if forgottenBy != "" {
		return fmt.Errorf("%s; peer %s says so", forgottenHelp, forgottenBy)
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d partitions have no reachable owner yet", missing, p.node.Partitions())
	}
	return nil
}
