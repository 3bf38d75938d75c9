package peer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// lostMajorityHelp is the way out of a partition that lost the majority of
// its voters, as /healthz and a request's 503 say it.
const lostMajorityHelp = "restart them on their data dirs, or, their disks lost for good, " +
	"needle forget ID --unsafe-recover each (docs/operations.md, A partition that lost its majority)"

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
			"(dead: %s) and take no writes until enough of them return: %s",
			missing, p.node.Partitions(), lost, strings.Join(dead, ", "), lostMajorityHelp)
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

// whyUnavailable returns err, the last answer to a request about group g
// that found no owner, with why (unavailable.go). A reason an operator
// acts on comes first: the partition lost the majority of its voters
// (node.LostMajorityOf), and no retry helps until they return or are
// forgotten with --unsafe-recover. Else the answer's own reason (this
// node's, or the owner's), else what this peer knows of the partition
// now. It stays a 503 unavailable, which clients retry; its message was
// "api: unavailable; peer: unavailable". Any other error is returned as
// it is.
func (p *Peer) whyUnavailable(g shard.GroupID, err error) error {
	if !errors.Is(err, api.ErrUnavailable) {
		return err
	}
	ctx, cancel := contextWithTimeout(p.runCtx)
	defer cancel()
	var part int
	var dead []string
	var now *node.UnavailableError
	if p.read(ctx, func(n *node.Node) error { part, dead = n.LostMajorityOf(g); now = n.Unavailable(g); return nil }) != nil {
		if saysWhy(err) {
			return withGroup(err, p.node.PartitionOf(g), g)
		}
		return api.NewError(api.CodeUnavailable, "", unavailableMessage(p.node.PartitionOf(g), g, "this peer is stopping, or too busy to say why"))
	}
	switch {
	case len(dead) > 0:
		return api.NewError(api.CodeUnavailable, "", fmt.Sprintf("partition %d has no leader: it lost the majority of its voters "+
			"(dead: %s) and serves no request until enough of them return: %s", part, strings.Join(dead, ", "), lostMajorityHelp))
	case saysWhy(err):
		return withGroup(err, part, g)
	}
	return api.NewError(api.CodeUnavailable, "", unavailableMessage(part, g, now.Reason))
}
