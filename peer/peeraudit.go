package peer

import (
	"context"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// A drain or a forget through the API is recorded in the audit trail
// (GET /v1/audit) like a cancel: committed in the log of the partition
// the peer's id maps to (node.AuditPeer), so the drained peer's own
// entry outlives it. The recording is best effort: the drain or the
// forget is the operator's remedy and goes on if it fails (an older
// replica, no owner within auditPeerTimeout), and the answer says
// whether it was recorded ("audited").

// opPeerAudit records a drain or a forget (sent only to an owner with
// node.FeaturePeerAudit).
const opPeerAudit = "peer_audit"

// auditPeerTimeout bounds the wait for the audit entry before a drain
// starts or a forget is answered.
const auditPeerTimeout = 5 * time.Second

// peerAuditReq records Type (shard.EvPeerDrained or EvPeerForgotten)
// done to Peer by By.
type peerAuditReq struct {
	rpcHeader
	Type shard.EventType `json:"type,omitempty"`
	Peer string          `json:"peer,omitempty"`
	By   string          `json:"by,omitempty"`
}

func (*peerAuditReq) op() string { return opPeerAudit }
func (*peerAuditReq) feature() (uint64, string) {
	return node.FeaturePeerAudit, "a peer's drain or removal in the audit trail"
}
func (r *peerAuditReq) serve(ctx context.Context, p *Peer) (rpcError, error) {
	_, err := p.call(ctx, func(n *node.Node, req uint64) { n.AuditPeer(req, r.Type, r.Peer, r.By) })
	return rpcError{}, err
}

// auditPeer records typ done to peer by by, and reports whether it was
// recorded; a failure is logged.
func (p *Peer) auditPeer(ctx context.Context, typ shard.EventType, peer, by string) bool {
	ctx, cancel := context.WithTimeout(ctx, auditPeerTimeout)
	defer cancel()
	_, err := routed[rpcError](ctx, p, shard.GroupID(peer), &peerAuditReq{Type: typ, Peer: peer, By: by})
	if err != nil {
		p.log.Warn("not recorded in the audit trail", "action", typ.String(), keyPeer, peer, "by", by, "err", err)
		return false
	}
	return true
}
