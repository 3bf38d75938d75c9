package peer

import (
	"fmt"
	"strings"

	"github.com/needle-mesh/needle/node"
)

// readiness is /healthz's check: the loop answers, and every partition has
// an owner to route to.
func (p *Peer) readiness() error {
	ctx, cancel := contextWithTimeout(p.runCtx)
	defer cancel()
	var missing, stalled, lost int
	var forgottenBy string
	var dead []string
	if err := p.read(ctx, func(n *node.Node) error {
		missing, stalled, forgottenBy = n.Unsettled(), n.Stalled(), n.ForgottenBy()
		lost, dead = n.LostMajority()
		return nil
	}); err != nil {
		return err
	}
	if forgottenBy != "" {
		return fmt.Errorf("%s; peer %s says so", forgottenHelp, forgottenBy)
	}
	if missing > 0 && lost > 0 {
		// Counted whether led here and stalled (two voters, one dead) or
		// abdicated (two of three dead together), or led by a dead peer.
		return fmt.Errorf("%d of %d partitions have no reachable owner: %d held here lost the majority of their voters "+
			"(dead: %s) and take no writes until enough of them return: restart them on their data dirs, or, their disks "+
			"lost for good, needle forget ID --unsafe-recover each (docs/operations.md, A partition that lost its majority)",
			missing, p.node.Partitions(), lost, strings.Join(dead, ", "))
	}
	if stalled > 0 {
		return fmt.Errorf("%d of %d partitions have no reachable owner: %d led here lost the majority of their voters "+
			"(a peer they need is dead) and take no writes until it returns (docs/operations.md, A partition that lost its majority)",
			missing, p.node.Partitions(), stalled)
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d partitions have no reachable owner yet", missing, p.node.Partitions())
	}
	return nil
}
