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
	if stalled > 0 {
		need := "a peer they need is dead"
		if len(dead) > 0 {
			need += ": " + strings.Join(dead, ", ")
		}
		return fmt.Errorf("%d of %d partitions have no reachable owner: %d led here lost the majority of their voters "+
			"(%s) and take no writes until it returns (docs/operations.md, A partition that lost its majority)",
			missing, p.node.Partitions(), stalled, need)
	}
	if missing > 0 && lost > 0 {
		// Two of three voters dead: the leader abdicated rather than
		// stalled, and the partitions are only unowned here.
		return fmt.Errorf("%d of %d partitions have no reachable owner: %d held here lost the majority of their voters "+
			"(dead: %s) and take no writes until enough of them return: restart them on their data dirs, or, their disks "+
			"lost for good, needle forget ID --unsafe-recover each (docs/operations.md, A partition that lost its majority)",
			missing, p.node.Partitions(), lost, strings.Join(dead, ", "))
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d partitions have no reachable owner yet", missing, p.node.Partitions())
	}
	return nil
}
