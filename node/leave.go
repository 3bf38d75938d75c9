package node

import (
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// Leaving a partition (docs/design.md, "Replica lifecycle").
//
// A peer holds a partition from when it opens it (the founder: all of
// them; a restart: what its WAL holds; a Raft message from the
// partition's leader, when the ring places the peer among its replicas)
// until it is certain that a committed configuration excludes it. Then it
// drops the partition from memory and from its WAL (wal.Update.Drop):
//
//   - it applied such a configuration itself (confApplied; a leader
//     first hands its leadership over, and leaves once it follows);
//   - or it holds a partition the ring does not place on it and has heard
//     nothing from a leader of it for DeadAfter: a removed follower
//     usually never applies its own removal, because its leader stops
//     sending to it once the removal applies. Every DeadAfter or so
//     (jittered) it asks, in turn, the voters of its applied
//     configuration, all of one voter's partitions in one MsgReplicaAsk
//     (askLeave); a peer that leads the partition and holds its read
//     lease, or follows a leader it heard within DeadAfter, answers, when
//     its applied (so committed) configuration names the asker in no
//     role, with a MsgReplicaGone carrying its applied index; the asker
//     drops the partition if the answer comes from a voter of its own
//     applied configuration, its own log ends at or before that index (it
//     acknowledged nothing a later configuration could count on), it does
//     not lead it, the ring still does not place it there, and no leader
//     sends to it (or the answer is from the leader it follows). A leader
//     that applies the removal of a peer tells it at once the same way.
//
// A dropped partition comes back only as any other: a Raft message opens
// one only when the ring places this peer among its replicas, or a
// snapshot's configuration names it (mayOpen), so a stale message from
// the former leader does not resurrect it.

// FeatureLeave (a Heartbeat feature): the peer answers MsgReplicaAsk. An
// older peer refuses the message type; asks go only to peers with it.
const FeatureLeave = FeaturePlacementSpread << 1

// names reports whether conf names raft id rid in any role: voter,
// learner, outgoing voter of a joint configuration, or learner to be.
func names(conf *pb.ConfState, rid uint64) bool {
	return slices.Contains(conf.Voters, rid) || slices.Contains(conf.Learners, rid) ||
		slices.Contains(conf.VotersOutgoing, rid) || slices.Contains(conf.LearnersNext, rid)
}

// confApplied follows partition p's applying configuration p.conf in
// place of old: this node leaves p at Advance if the configuration
// excludes it, and, leading p, tells the peers it removed.
func (n *Node) confApplied(p *partition, old *pb.ConfState) {
	if !names(p.conf, n.raftID) {
		n.queueLeave(p)
	}
	if !n.leaseHeld(p) {
		return
	}
	for _, rid := range append(append(slices.Clone(old.Voters), old.Learners...), old.VotersOutgoing...) {
		if rid == n.raftID || names(p.conf, rid) {
			continue
		}
		if id, ok := n.mesh.peerOf(rid); ok && n.mesh.leaves(id) {
			n.goneOut[id] = append(n.goneOut[id], GoneMsg{Partition: uint32(p.id), Index: p.applied})
		}
	}
}

// leaves reports whether id is a live member that answers and heeds the
// messages of leaving (FeatureLeave).
func (m *mesh) leaves(id string) bool {
	return id != m.n.cfg.ID && m.live(id) && m.members[id].features&FeatureLeave != 0
}

// queueLeave marks p to be dropped at the next Advance (after its Ready
// is handled) if its configuration still excludes this node then.
func (n *Node) queueLeave(p *partition) {
	if !slices.Contains(n.leaving, p.id) {
		n.leaving = append(n.leaving, p.id)
	}
}

// mustLeave reports whether this node leaves p now on its own applied
// configuration: p has one (a partition opened by a message has none
// until its first snapshot), it excludes this node, and this node does
// not lead p (a leader removed by an earlier leader's proposal hands over
// first: owner() no longer names it).
func (n *Node) mustLeave(p *partition) bool {
	return p != nil && !p.leader && len(p.conf.Voters) > 0 && !names(p.conf, n.raftID)
}

// leaveQueued drops the queued partitions that must be left (Advance).
func (n *Node) leaveQueued() {
	for _, i := range n.leaving {
		if p := n.parts[i]; n.mustLeave(p) {
			n.dropPartition(p, "configuration applied", p.applied)
		}
	}
	n.leaving = n.leaving[:0]
}

// dropPartition forgets partition p: its pending requests fail, it leaves
// every index of held partitions, and the next Ready deletes its state
// from the WAL.
func (n *Node) dropPartition(p *partition, why string, index uint64) {
	n.stopServing(p) // a follower: fails what waits on it, drops buffered events
	n.bury(p)
	n.parts[p.id] = nil
	n.readyParts.set(p.id, false)
	n.loud.set(p.id, false)
	n.dueParts.set(p.id, false)
	n.holdParts.set(p.id, false)
	if i, ok := slices.BinarySearch(n.held, p.id); ok {
		n.held = slices.Delete(n.held, i, i+1)
	}
	n.rd.Persist.Updates = append(n.rd.Persist.Updates, wal.Update{Partition: uint32(p.id), Drop: true})
	n.rd.MustSync = true // rare; and a restart after it must not find the partition again
	n.stats.Left++
	n.log.Info("partition left", keyPart, p.id, "why", why, "index", index)
}

// mayOpen reports whether a Raft message for partition part, which this
// node does not hold, may open it: the ring places this node among the
// partition's replicas, or the message is a snapshot whose configuration
// names it. Anything else is stale (from before this node left it).
func (n *Node) mayOpen(part int, m *pb.Message) bool {
	if n.mesh.placedHere(part) {
		return true
	}
	return m.Type == pb.MsgSnap && m.Snapshot != nil && names(&m.Snapshot.Metadata.ConfState, n.raftID)
}

// orphan reports whether p is a partition to ask about: held, not led,
// not placed here by the ring, and no leader heard of it for DeadAfter.
func (n *Node) orphan(p *partition) bool {
	if p.leader || n.mesh.placedHere(p.id) {
		return false
	}
	return n.now.Sub(p.leaderMsgAt) >= n.cfg.DeadAfter
}

// askLeave asks, once per period, about every orphan partition: one
// MsgReplicaAsk per owner, with all the partitions asked of it. The
// period is DeadAfter, and after asks up to twice that, jittered with the
// node's rand (drawn only then, so that a mesh without orphans draws the
// same randomness as before leaving existed).
func (n *Node) askLeave() {
	m := &n.mesh
	if n.now.Before(n.leaveAt) {
		return
	}
	n.leaveAt = n.now.Add(n.cfg.DeadAfter)
	if m.ring == nil || m.ringVersion != m.version {
		return // a ring from an older membership may not place this node where it should
	}
	var asks map[string][]uint32 // made for the first orphan: most periods find none
	for _, i := range n.held {
		p := n.parts[i]
		if !n.orphan(p) {
			continue
		}
		if to := n.askTarget(p); to != "" {
			if asks == nil {
				asks = map[string][]uint32{}
			}
			asks[to] = append(asks[to], uint32(p.id))
		}
	}
	if len(asks) > 0 {
		n.leaveAt = n.leaveAt.Add(time.Duration(n.cfg.Rand.Int64N(int64(n.cfg.DeadAfter))))
	}
	n.sendAsks(asks)
}

// sendAsks sends one MsgReplicaAsk per peer of asks (to, partitions), in
// the order of the peers' ids.
func (n *Node) sendAsks(asks map[string][]uint32) {
	for _, to := range sortedKeys(asks) {
		n.stats.ReplicaAsks++
		n.rd.Messages = append(n.rd.Messages, Envelope{To: to, Msg: Message{Type: MsgReplicaAsk, From: n.cfg.ID, Asks: asks[to]}})
	}
}

// askTarget picks whom to ask about p: in turn, each voter of p's
// configuration as this node applied it. Only a voter of it is heeded
// (stepReplicaGone); the ring's owner may be a member the configuration
// never named.
func (n *Node) askTarget(p *partition) string {
	var cands []string
	for _, id := range n.mesh.voters(p) {
		if n.mesh.leaves(id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	p.leaveAsks++
	return cands[(p.leaveAsks-1)%len(cands)]
}

// stepReplicaAsk answers a MsgReplicaAsk: for each partition asked whose
// configuration, as this node applied it (so committed), names the asker
// in no role, a GoneMsg. A leader answers while it holds its read lease; a
// follower while it hears from its leader (within DeadAfter), so that an
// asker whose configuration names none of the present leaders still
// hears from a voter it knows.
func (n *Node) stepReplicaAsk(from string, asks []uint32) {
	rid := RaftID(from)
	var gone []GoneMsg
	for _, part := range asks {
		if int(part) >= len(n.parts) {
			continue
		}
		if p := n.parts[part]; p != nil && n.confCurrent(p) && !names(p.conf, rid) {
			gone = append(gone, GoneMsg{Partition: part, Index: p.applied})
		}
	}
	if len(gone) > 0 {
		n.rd.Messages = append(n.rd.Messages, Envelope{To: from, Msg: Message{Type: MsgReplicaGone, From: n.cfg.ID, Gone: gone}})
	}
}

// confCurrent reports whether p's applied configuration is recent enough
// to answer a MsgReplicaAsk from: a leader holding its read lease, or a
// follower that heard from a leader within DeadAfter.
func (n *Node) confCurrent(p *partition) bool {
	if p.leader {
		return n.leaseHeld(p)
	}
	return !p.leaderHeard.IsZero() && n.now.Sub(p.leaderHeard) < n.cfg.DeadAfter
}

// stepReplicaGone drops each partition a MsgReplicaGone names, if the
// sender is a voter of the partition's configuration as this node applied
// it, this node does not lead it, the ring does not place it here, it
// follows the sender or has heard from no leader for DeadAfter, and this
// node's log ends at or before the answer's index.
//
// Not on the word of any member the ring places: a host holding the swarm
// key joins the ring, and the members its heartbeats name second-hand can
// push two of a partition's three replicas off it; each dropping its copy
// on that host's word would lose what only they held. A voter of a
// configuration this node applied was a replica the partition's leaders
// replicated to.
func (n *Node) stepReplicaGone(from string, gone []GoneMsg) {
	for _, g := range gone {
		if int(g.Partition) >= len(n.parts) {
			continue
		}
		p := n.parts[g.Partition]
		if p != nil && !n.mesh.isForgotten(from) {
			// Whoever says it, the partition lives on without this
			// node: it is not to recover it (livesOn).
			p.goneAt, p.goneFrom = n.now, from
		}
		if p == nil || p.leader || !slices.Contains(n.mesh.voters(p), from) {
			continue
		}
		if n.mesh.placedHere(p.id) {
			continue // about to be added again: keep what it holds
		}
		if !n.orphan(p) && p.rn.BasicStatus().Lead != RaftID(from) {
			continue // a leader still sends to it: a replica after all
		}
		if last, _ := p.storage.LastIndex(); last > g.Index {
			continue // it holds entries the answer does not cover
		}
		n.dropPartition(p, "removed, as "+from+" says", g.Index)
	}
}

// flushGone sends the GoneMsgs leaders queued for the peers they removed.
func (n *Node) flushGone() {
	for _, to := range sortedKeys(n.goneOut) {
		n.rd.Messages = append(n.rd.Messages, Envelope{To: to, Msg: Message{Type: MsgReplicaGone, From: n.cfg.ID, Gone: n.goneOut[to]}})
	}
	clear(n.goneOut)
}

// Held returns the partitions this node holds a replica of, sorted.
func (n *Node) Held() []int { return slices.Clone(n.held) }
