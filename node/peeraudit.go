package node

import (
	"fmt"

	"github.com/needle-mesh/needle/shard"
)

// FeaturePeerAudit (a Heartbeat feature): the peer applies
// shard.EvPeerDrained and shard.EvPeerForgotten, event types an older peer
// refuses.
const FeaturePeerAudit = FeatureGroupConcurrency << 1

// maxPeerIDLen bounds the peer id of an audit entry (a libp2p peer id is
// about 52 characters; a forget of any id the API took is recorded).
const maxPeerIDLen = 256

// AuditPeer records an operator's action on a peer in the audit trail:
// typ is shard.EvPeerDrained or shard.EvPeerForgotten, peer the peer it
// was done to, by who asked. A drain or a forget is the peer's own, not a
// partition's, so the entry goes to the partition that the peer's id maps
// to (PartitionOf), like a group of that id: every replica holds it, and
// it outlives the drained peer. The reply comes once it is applied;
// ErrUnavailable (with an *UpgradeError) while a replica of that
// partition cannot apply it.
func (n *Node) AuditPeer(req uint64, typ shard.EventType, peer, by string) {
	if !typ.PeerAction() || peer == "" || len(peer) > maxPeerIDLen {
		n.reply(Reply{Req: req, Err: fmt.Errorf("node: AuditPeer(%v, %q): not a peer action", typ, peer)})
		return
	}
	p := n.parts[n.PartitionOf(shard.GroupID(peer))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(shard.GroupID(peer)))})
		return
	}
	if n.refuseLacking(req, p, FeaturePeerAudit, "a peer's drain or removal in the audit trail") {
		return
	}
	n.proposeRequest(p, req, reqCancel, []shard.Event{{Type: typ, At: n.now, Group: shard.GroupID(peer), By: by}})
}
