package node

import (
	"fmt"

	"github.com/needle-mesh/needle/shard"
)

// Features a peer gossips in its heartbeats: the committed events it can
// apply beyond those every needle could. An older peer would refuse an
// entry holding one of them (it does not decode) and so diverge from its
// replicas; a leader proposes one only when every replica has the feature.
const (
	FeatureRetry = 1 << iota // the retried event (shard.EvRetried)
	// FeatureScheduleToWorkers: a schedule whose broadcast template goes
	// to external workers (shard.WorkersTemplate), which an older peer
	// refuses to apply.
	FeatureScheduleToWorkers
	// FeatureQuiesce: the heartbeat that quiesces a partition
	// (quiesce.go), which an older follower takes for a plain one.
	FeatureQuiesce
	// FeaturePlacementSpread: the peer can place replicas with
	// ring.PlacementSpread. A peer that does refuses the heartbeats of
	// one that cannot (an older release), which would place with the
	// circle and disagree on every replica set (docs/decisions.md).
	FeaturePlacementSpread

	Features = FeatureRetry | FeatureScheduleToWorkers | FeatureQuiesce | FeaturePlacementSpread | FeatureLeave | FeatureProbe | FeatureSendLease | FeatureSubmitSpec | FeatureGroupBin | FeatureShortPromise | FeatureWorkerDeath | FeatureScheduleUpdate | FeatureGroupConcurrency | FeaturePeerAudit // what this build applies
)

// FeatureSubmitSpec is not an event: the peer serves a forwarded
// submission whose spec comes in the log's binary form
// (shard.AppendGroupSpec) rather than JSON (package peer, opSubmitSpec). A
// peer forwards that form only to an owner that advertises it.
const FeatureSubmitSpec = FeatureSendLease << 1

// FeatureGroupBin is not an event either: the peer answers a forwarded
// read of a group with its task views in binary (shard.AppendTaskViews;
// package peer, opGroupBin). A peer asks for that form only of an owner
// that advertises it.
const FeatureGroupBin = FeatureSubmitSpec << 1

// MemberFeatures returns the features peer id last advertised (its
// heartbeats and probes), 0 for a peer that is not a member.
func (n *Node) MemberFeatures(id string) uint64 {
	if mb := n.mesh.members[id]; mb != nil {
		return mb.features
	}
	return 0
}

// lacking returns a replica of p (voter or learner) that has not
// advertised feature f, or "", and whether this peer cannot tell: it has
// not heard from that replica yet (a peer of a mesh started together
// that is not up yet), or the replica is no longer a member (forgotten,
// its replacement on the way). A request that needs f is then
// unavailable for now, not refused.
func (n *Node) lacking(p *partition, f uint64) (who string, unsure bool) {
	for _, ids := range [2][]uint64{p.conf.Voters, p.conf.Learners} {
		for _, r := range ids {
			id, ok := n.mesh.peerOf(r)
			if !ok {
				return fmt.Sprint(r), true
			}
			if id == n.cfg.ID {
				continue
			}
			if mb := n.mesh.members[id]; mb == nil || mb.features&f == 0 {
				return id, mb != nil && !mb.featured
			}
		}
	}
	return "", false
}

// Retry proposes running FAILED and CANCELED tasks again: task, or every
// one of group g when task is "" (see shard.Retry). The reply comes once the
// retry is applied, at once when there is nothing to do (a repeated key)
// or it is refused.
func (n *Node) Retry(req uint64, g shard.GroupID, task shard.TaskID, by, key string) {
	p := n.parts[n.PartitionOf(g)]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(g))})
		return
	}
	if who, notKnown := n.lacking(p, FeatureRetry); notKnown {
		n.reply(Reply{Req: req, Err: unsure(p.id, "a retry")})
		return
	} else if who != "" {
		n.reply(Reply{Req: req, Err: fmt.Errorf(
			"%w: peer %s, a replica of this group's partition, runs a needle that cannot apply a retry: upgrade it first", shard.ErrNotRetryable, who)})
		return
	}
	evs, err := p.shard.Retry(n.now, g, task, by, key)
	if err != nil || len(evs) == 0 {
		// No events and no error: the key was seen, a repeat.
		n.reply(Reply{Req: req, Err: err, Repeat: err == nil})
		return
	}
	n.proposeRequest(p, req, reqCancel, evs)
}
