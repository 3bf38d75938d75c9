package peer

import "github.com/needle-mesh/needle/node"

// forgottenOf returns those of ids this peer's node knows were forgotten
// (needle forget, or ForgetAfter of silence): api.Limits.Forgotten, one
// loop round trip per request. A read that fails (the peer stopping)
// forgets none: the owner still fails such a task at its next timer pass.
func (p *Peer) forgottenOf(ids []string) []string {
	ctx, cancel := contextWithTimeout(p.runCtx)
	defer cancel()
	var gone []string
	if err := p.read(ctx, func(n *node.Node) error {
		for _, id := range ids {
			if n.IsForgotten(id) {
				gone = append(gone, id)
			}
		}
		return nil
	}); err != nil {
		return nil
	}
	return gone
}
