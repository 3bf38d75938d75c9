package node

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/wal"
)

// Unsafe recovery (needle forget ID --unsafe-recover). A partition whose
// other voters are lost for good cannot commit again: removing a voter is
// itself an entry that needs a majority, so a 2-voter partition whose
// other voter's disk is gone, or a 3-voter one that lost two, stayed
// unavailable forever. The operator declares such a loss final; every
// peer then holds the mark (persisted like the forgotten set, spread with
// heartbeats), and a peer that is the only voter of a partition not
// forgotten with it recovers the partition alone, as etcd's
// --force-new-cluster does:
//
//   - its state at its applied index becomes a snapshot (its ConfState is
//     then the configuration the new RawNode starts from);
//   - one entry per lost voter removes it (single changes, never a joint
//     configuration: a joint one would need the lost voters to leave it),
//     at the last index + 1, in term + 1;
//   - the hard state becomes {term + 1, vote self, commit: the last new
//     entry}, so that every entry of its log commits, those it held
//     beyond its commit index included (an entry the lost voter's
//     leader had acknowledged may be one it had not learned committed);
//   - all of it is persisted, synced, through the next Ready; the
//     partition's RawNode is built again from that storage and, once it
//     applied the removals, campaigns alone.
//
// With two voters every committed entry was on both, so the survivor holds
// every acknowledged one: nothing is lost. With three voters and two lost,
// an entry the two lost ones committed without the survivor is lost: hence
// the operator's explicit flag.
//
// A joint configuration commits, and elects, only with a majority of each
// half: it is stuck as soon as either half lost its majority (the ring's
// repair promoting two learners of a lone voter, {Y} -> {Y, a, b}, with Y
// lost). Its survivors, of either half and its learners, claim it as
// below, and the one that recovers leaves the joint configuration first
// (an empty ConfChangeV2: Raft takes no other change in one), then goes
// on as above with the incoming half's voters. While the incoming half
// keeps a majority nothing committed is lost: every entry committed since
// the joint configuration took effect is on a majority of that half, so
// on a survivor, and the claims pick the survivor whose log is the most
// up to date; what came before it is on every replica that applied it.
// A replica the leaving would remove (a voter of the outgoing half only)
// refuses (logged).
//
// When other members survive (learners, or voters fewer than a majority,
// as while the ring's repair has promoted a replica and not yet removed
// the one it replaces), the survivors claim the partition as learners
// do (below), and the one whose log is the most up to date recovers it,
// removing the lost voters only: the surviving voters stay, vote for it
// and follow it. A last voter that recovered alone while a learner held
// entries it lacked left that learner with a state the recovered log
// never had.
//
// A partition whose every voter is lost may still have a learner: a
// replica the ring's repair was adding, not promoted yet. A learner
// recovers it the same way, with one more entry before the removals: one
// making it a voter (removing the voters first would leave none, which
// Raft refuses). A learner may lag: the entries it had not received when
// the voters were lost are gone, committed and acknowledged ones included.
// With several learners surviving, exactly one may recover the partition,
// or two copies would take writes: the one whose log is the most up to
// date (Raft's order: the last entry's term, then its index), the lower
// peer id on a tie. Each tells the others its claim (the term and index
// of its last entry, and the surviving learners it sees) in its
// heartbeats (Heartbeat.Claims); each recovers only once it heard a claim
// from every other survivor naming the same survivors, and its own beats
// every one (claimWins). A learner that had not applied the change adding
// another sees itself alone; it waits recoverGrace (two heartbeats) from
// the mark for claims naming it, and one that hears one takes its names
// and claims with it (heardRivals), so that the most up to date of them
// recovers: had it recovered alone, the other, which had applied entries
// it lacked, would hold a state the recovered log never had at the same
// index. One that hears none (the other was down or cut off) recovers
// alone; the other waits for a claim naming both, which never comes: a
// stale copy, not a second partition. Once the recovered partition's
// leader sends it an append or a snapshot that disagrees with an entry it
// applied (recoveredElsewhere), it drops the copy and is sent a snapshot
// of the recovered one (rebuild). A learner that knows fewer survivors
// than another's claim names (it lagged behind a change adding a third)
// takes those names too, so that every claim ends naming the same
// survivors. A survivor named in a claim but holding no copy (a learner
// whose snapshot never came) answers with an empty one (emptyClaims):
// it never recovers, and the others no longer wait for it. A voter that
// counts a surviving majority but knows of no leader asks the voters it
// counts so (a question: a claim naming them, not itself, which makes no
// one a rival): one may have left the partition by a change the voter
// lagged behind, and holds no copy. Once those without a copy leave no
// majority, it goes on as a last replica; the recovery removes them as it
// does the lost. A voter that sees its majority survive but is named in
// another survivor's claim (their configurations disagree, and Raft
// elects neither) claims with it. A claim carries the log the recovery
// would keep: a change removing the claimant, not applied, is cut with
// what follows it, so a survivor that applied entries beyond it is the
// more up to date. Before it recovers, a survivor asks the ring's
// replicas of the partition whether it lives on without it (livesOn): a
// replica removed that never learned it may see itself the last voter
// while the partition, moved to other peers, has a leader. One told so
// recovers nothing. A survivor that is dead and not marked is waited
// for. A replica removed that never learned of its removal may still see
// itself the last voter, beside the last voter of the configuration that
// removed it: each sees itself alone. Alone, a survivor claims within
// recoverGrace too, and one that hears a claim not naming it takes its
// claimant for a rival for good (heardRivals): the most up to date of
// them recovers, and the other waits, its copy named by no
// configuration. A change removing the
// recovering replica itself, in its log and not known committed, is cut
// from it rather than committed (the last copy would leave).
//
// Without a mark nothing here runs: recoverScan stays false.

// RecoverMetaKey is the WAL meta record of the forgotten peers an operator
// declared lost for good (NodeConfig.Recover): their ids, sorted, one per
// line, as ForgottenMetaKey.
const RecoverMetaKey = "forgotten-recover"

// ForgetUnsafeRecover forgets a peer as Forget does, and marks its loss
// final: the partitions whose every other voter is so marked are
// recovered by their last voter (needle forget --unsafe-recover).
func (n *Node) ForgetUnsafeRecover(id string) {
	n.mesh.forget(id, n.now)
	n.mesh.markRecover(id)
}

// IsForgotten reports whether peer id was forgotten for good here.
func (n *Node) IsForgotten(id string) bool { return n.mesh.isForgotten(id) }

// UnsafeRecover returns the peers marked lost for good, sorted.
func (n *Node) UnsafeRecover() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for id := range n.mesh.recover {
			if !yield(id) {
				return
			}
		}
	})
}

// markRecover records that the loss of peer id is final, from the operator
// or from a heartbeat. The mark acts only once the peer is forgotten here
// too (a forget heard second-hand waits for the peer's death: forgetLater).
func (m *mesh) markRecover(id string) {
	if id == "" || id == m.n.cfg.ID || m.recover[id] || m.n.cfg.ValidID != nil && !m.n.cfg.ValidID(id) {
		return
	}
	m.recover[id], m.recoverNew, m.recoverScan = true, true, true
	if m.forgotten[id] {
		m.recoverAt = m.n.now
	}
	m.n.log.Warn("peer marked lost for good: partitions whose other voters are all lost will be recovered from this peer's copy", keyPeer, id)
}

// flushRecover puts the record of recover marks in the Ready being built
// when it changed since the last one, synced.
func (n *Node) flushRecover() {
	if !n.mesh.recoverNew {
		return
	}
	n.mesh.recoverNew = false
	n.rd.MustSync = true
	n.putMeta(RecoverMetaKey, encodeForgotten(n.mesh.recover))
}

// lostRaft returns the Raft ids of the peers forgotten here and marked
// lost for good.
func (m *mesh) lostRaft() map[uint64]string {
	lost := map[uint64]string{}
	for id := range m.recover {
		if m.forgotten[id] {
			lost[RaftID(id)] = id
		}
	}
	return lost
}

// recoverPartitions recovers every partition this node holds whose other
// voters are all lost for good, or whose every voter is, this node being
// the learner that recovers it (lastReplica, claimWins). A partition with
// committed entries not applied yet waits for them (its configuration may
// change): the scan runs again at the next tick. It also makes this
// node's recover claims, sent with its heartbeats.
func (n *Node) recoverPartitions() {
	m := &n.mesh
	m.recoverScan = false
	lost := m.lostRaft()
	var claims []RecoverClaim
	asks := map[string][]uint32{}
	defer func() {
		m.setClaims(claims)
		n.sendAsks(asks)
	}()
	if len(lost) == 0 {
		return
	}
	for _, i := range n.held {
		p := n.parts[i]
		if p.recoverTo != 0 {
			continue
		}
		last, rivals := n.lastReplica(p, lost)
		if last || len(rivals) > 0 {
			if n.livesOn(p, lost, asks) {
				continue
			}
		}
		if !last {
			p.claimedBy = nil    // a leader, or nothing to recover: a later loss starts afresh
			if len(rivals) > 0 { // a voter with no leader asks the others whether they hold a copy
				claims = append(claims, n.question(p, rivals))
				m.recoverScan = true // withdrawn once a leader is known
				continue
			}
			p.askedAt, p.askAgain = time.Time{}, time.Time{} // asked once a heartbeat, whatever the scans
			continue
		}
		if n.leavesWithJoint(p) {
			if !p.recoverRefused {
				p.recoverRefused = true
				n.log.Warn("unsafe recovery refused: the partition is in a joint configuration whose leaving removes this replica",
					keyPart, p.id, "voters", len(p.conf.Voters), "outgoing", len(p.conf.VotersOutgoing))
			}
			continue
		}
		// A survivor that knows of no other takes the names of the
		// claims naming it too, and hears them for recoverGrace first: it
		// may lag behind the change adding another survivor, whose log
		// holds entries it lacks (and whose state, had it recovered
		// alone, would disagree with the recovered log). A voter of one or
		// two voters does not wait: every committed entry needed it, so
		// it knows of every survivor a committed change added.
		rivals = n.heardRivals(p, rivals, lost)
		if !n.inEveryQuorum(p) && n.now.Before(m.recoverAt.Add(n.recoverGrace())) {
			// Every survivor claims and hears the others' claims for the
			// grace before one decides: one that knows of fewer (it
			// lagged behind a change adding a third) would otherwise win
			// against those it knows before it heard the claim of one
			// more up to date (6 peers, circle placement, seed 4088).
			// Alone, its claim tells another survivor that sees itself
			// alone too (a replica removed that never learned it, beside
			// the last voter of the configuration that removed it).
			claims = append(claims, n.claim(p, rivals))
			m.recoverScan = true // at a later tick
			continue
		}
		if len(rivals) > 0 {
			c := n.claim(p, rivals)
			claims = append(claims, c)
			if !n.claimWins(p, c, rivals, lost) {
				if !p.recoverRefused {
					p.recoverRefused = true
					n.log.Warn("unsafe recovery waits: every voter is lost and other learners survive; the one whose log is the most up to date recovers the partition once each heard the others' claims",
						keyPart, p.id, "learners", m.peerNames(rivals), "term", c.Term, "index", c.Index)
				}
				continue
			}
		}
		if len(n.advRds) > 0 || p.applied < p.rn.BasicStatus().Commit {
			m.recoverScan = true // after the committed entries apply
			continue
		}
		if !p.askedAt.IsZero() && !n.inEveryQuorum(p) && n.now.Before(p.askedAt.Add(n.cfg.HeartbeatEvery)) {
			// The answers to livesOn have a heartbeat to come. The last
			// voter of one or two does not wait, as it waits no grace: a
			// forget's audit entry, routed at once, found its partition
			// unserved (TestForgetUnsafeRecoverRealPeers).
			m.recoverScan = true
			continue
		}
		n.recoverPartition(p, n.withoutCopy(p, rivals, lost))
		if len(rivals) > 0 {
			m.recoverScan = true // the next scan withdraws the claim
		}
	}
	claims = append(claims, n.emptyClaims()...)
}

// livesOn asks the ring's replicas of p (not lost, not this node) whether
// p lives on without this node, once a heartbeat while this node may
// recover it or asks a question about it: a MsgReplicaAsk, which a peer
// whose partition has a leader and whose committed configuration names
// this node in no role answers with a MsgReplicaGone (stepReplicaAsk). It
// reports whether such an answer came within DeadAfter: then this node's
// copy is a stale one (a replica removed that never learned it, whose
// configuration's other voters are lost or left), and recovering it would
// make a second partition beside the live one (10 peers, circle
// placement, seed 9028). It claims nothing, and says so once. The asks
// are collected in asks (to, partitions).
//
// Anyone's answer is heeded, not only a voter's of this node's
// configuration (the rule for dropping a copy, stepReplicaGone): it only
// keeps an unsafe recovery from being made, and a peer that lied could at
// worst hold one up.
func (n *Node) livesOn(p *partition, lost map[uint64]string, asks map[string][]uint32) bool {
	if !p.goneAt.IsZero() && n.now.Sub(p.goneAt) < n.cfg.DeadAfter {
		if !p.recoverRefused {
			p.recoverRefused = true
			n.log.Warn("unsafe recovery refused: the partition lives on without this replica", keyPart, p.id, keyPeer, p.goneFrom)
		}
		return true
	}
	if m := &n.mesh; m.ring != nil && !n.now.Before(p.askAgain) {
		if p.askedAt.IsZero() {
			p.askedAt = n.now
		}
		p.askAgain = n.now.Add(n.cfg.HeartbeatEvery)
		for _, id := range m.ring.Replicas(p.id) {
			if to := string(id); lost[RaftID(to)] == "" && m.leaves(to) {
				asks[to] = append(asks[to], uint32(p.id))
			}
		}
	}
	return false
}

// leavesWithJoint reports whether p is in a joint configuration that
// removes this node when it is left: a voter of the outgoing half only,
// not to become a learner. The recovery leaves the joint configuration
// first, so such a node cannot recover the partition.
func (n *Node) leavesWithJoint(p *partition) bool {
	c := p.conf
	return len(c.VotersOutgoing) > 0 && !slices.Contains(c.Voters, n.raftID) &&
		!slices.Contains(c.Learners, n.raftID) && !slices.Contains(c.LearnersNext, n.raftID)
}

// recoverGrace is how long a survivor that knows of no other waits, after
// a loss became final here, before it recovers a partition alone: two
// heartbeats, in which every other survivor heard the mark (spread with
// heartbeats) and sent its claim.
func (n *Node) recoverGrace() time.Duration { return 2 * n.cfg.HeartbeatEvery }

// inEveryQuorum reports whether this node is a voter of p in every
// majority of its voters (one or two of them).
func (n *Node) inEveryQuorum(p *partition) bool {
	voters := p.conf.Voters
	return len(voters) <= 2 && slices.Contains(voters, n.raftID)
}

// emptyClaims answers the claims of other survivors that name this node
// among the surviving learners of a partition it holds no copy of: a
// learner the ring's repair added whose snapshot never came (no replica
// here, or one that never applied a configuration naming this node).
// Such a survivor never recovers the partition, and without an answer
// the others would wait for its claim for good. Its claim says its log
// is empty (term and index 0) and names the survivors of the claim it
// answers (of the most up to date one when several name it), so that a
// learner holding a copy beats it. It never recovers, so at most one
// survivor still does.
func (n *Node) emptyClaims() []RecoverClaim {
	best := map[uint32]RecoverClaim{}
	bestFrom := map[uint32]string{}
	for _, from := range slices.Sorted(maps.Keys(n.mesh.claims)) {
		for _, c := range n.mesh.claims[from] {
			if int(c.Partition) >= len(n.parts) || !slices.Contains(c.Survivors, n.cfg.ID) || n.member(n.parts[c.Partition]) {
				continue
			}
			if b, ok := best[c.Partition]; ok && !ahead(c, from, b, bestFrom[c.Partition]) {
				continue
			}
			best[c.Partition], bestFrom[c.Partition] = c, from
		}
	}
	var out []RecoverClaim
	for _, part := range slices.Sorted(maps.Keys(best)) {
		out = append(out, RecoverClaim{Partition: part, Survivors: slices.Clone(best[part].Survivors)})
	}
	return out
}

// member reports whether p is a replica whose configuration names this
// node (a voter of either half, or a learner); false for nil.
func (n *Node) member(p *partition) bool {
	return p != nil && (slices.Contains(p.conf.Voters, n.raftID) || slices.Contains(p.conf.VotersOutgoing, n.raftID) ||
		slices.Contains(p.conf.Learners, n.raftID))
}

// ahead reports whether peer self's claim c is more up to date than
// peer other's claim oc (the last entry's term, then its index, then the
// lower id), whatever survivors they name.
func ahead(c RecoverClaim, self string, oc RecoverClaim, other string) bool {
	switch {
	case c.Term != oc.Term:
		return c.Term > oc.Term
	case c.Index != oc.Index:
		return c.Index > oc.Index
	}
	return self < other
}

// lastReplica reports whether this node may be the replica of p that
// recovers it, and the survivors it must claim it against (rivals): the
// other members of p's configuration not lost. It may when some voters
// are lost for good and those that survive are fewer than a majority (of
// either half of a joint configuration), and it is a voter or a learner.
// Without rivals (the last voter, or a learner whose every voter is lost
// and no other learner survives) it recovers alone (after recoverGrace, unless a claim naming it comes:
// heardRivals); with rivals, the one of them all whose log is the
// most up to date does (claimWins): a surviving learner may hold entries
// the last voter lacks (committed by the lost ones), and had it recovered
// alone the learner's state would be one the recovered log never held.
// A joint configuration is stuck when either half lost its majority; its
// survivors of both halves are rivals. Not last, a voter that knows of no
// leader gets the surviving voters it counts in a majority as rivals: it
// asks them (question) which hold no copy.
func (n *Node) lastReplica(p *partition, lost map[uint64]string) (last bool, rivals []uint64) {
	voters, outgoing := p.conf.Voters, p.conf.VotersOutgoing
	self, others := false, 0
	for _, set := range [][]uint64{voters, outgoing} {
		for _, rid := range set {
			switch {
			case rid == n.raftID:
				self = true
			case lost[rid] == "":
				if !slices.Contains(rivals, rid) {
					rivals = append(rivals, rid)
				}
			default:
				others++
			}
		}
	}
	switch {
	case others == 0 || !self && !slices.Contains(p.conf.Learners, n.raftID):
		return false, nil
	case n.quorumSurvives(voters, lost) && (len(outgoing) == 0 || n.quorumSurvives(outgoing, lost)):
		// A majority of each half survives: Raft goes on, one of them
		// elected. A learner that knows of no leader claims all the same:
		// the surviving voters may lag behind the change that made them
		// voters (this learner applied it, or its recovery committed it
		// first), see themselves learners and never campaign. It
		// recovers only once each of them claimed too, its own
		// configuration stuck; one that can be elected claims nothing,
		// and Raft elects it (5 peers, seed 172).
		if lead := p.rn.BasicStatus().Lead; lead != raft.None && lost[lead] == "" {
			return false, nil
		}
		// A voter that knows of no leader may lag behind a change that
		// removed a surviving voter, which left the partition and holds
		// no copy: it counts a majority that cannot vote, and would
		// campaign in vain for good (6 peers, circle placement, seed
		// 4119). It asks the surviving voters (claims against them;
		// those holding no copy answer with an empty claim, emptyClaims)
		// and goes on as a last replica only once those without a copy
		// leave no majority. Those with a copy vote: Raft elects.
		// A survivor whose configuration differs (it lost its majority)
		// may claim the partition naming this voter, which then claims
		// with it: Raft elects neither when the one that sees its
		// majority has the less up-to-date log (8 peers, circle
		// placement, seed 6002).
		if self {
			nc := n.withoutCopy(p, rivals, lost)
			if n.quorumSurvives(voters, nc) && (len(outgoing) == 0 || n.quorumSurvives(outgoing, nc)) && !n.namedInClaim(p, lost) {
				return false, rivals
			}
		}
	}
	for _, rid := range p.conf.Learners {
		if rid != n.raftID && lost[rid] == "" {
			rivals = append(rivals, rid)
		}
	}
	return true, rivals
}

// quorumSurvives reports whether a majority of voters are not lost (this
// node counting as a survivor).
func (n *Node) quorumSurvives(voters []uint64, lost map[uint64]string) bool {
	alive := 0
	for _, rid := range voters {
		if rid == n.raftID || lost[rid] == "" {
			alive++
		}
	}
	return alive >= len(voters)/2+1
}

// heardRivals adds to rivals, this node's surviving learners of p, the
// survivors named by the claims on p it heard that name it: a learner
// that lagged behind the change adding another knows fewer survivors
// than the others, whose claims, naming more, never matched its own
// (each waited for the others for good). Taking their names, it claims
// with the same survivors as they do, and waits for the claims of those
// it learned of. Names only ever add up, so every claim ends naming the
// same survivors. A survivor with no rival (lone) takes the names too,
// within recoverGrace of the mark: it defers to a claim naming it. Any
// survivor takes as a rival one whose claim does not name it (each saw
// itself alone, or each knew only its own set of survivors). Rivals so
// heard stay rivals (partition.claimedBy) once their claims are
// withdrawn: the winner, recovered, claims no more, and a loser that
// forgot it would recover alone.
func (n *Node) heardRivals(p *partition, rivals []uint64, lost map[uint64]string) []uint64 {
	for _, from := range slices.Sorted(maps.Keys(n.mesh.claims)) {
		for _, c := range n.mesh.claims[from] {
			switch {
			case int(c.Partition) != p.id || isQuestion(c, from):
			case slices.Contains(c.Survivors, n.cfg.ID):
				for _, id := range c.Survivors {
					if id != n.cfg.ID {
						p.heardClaimant(RaftID(id))
					}
				}
			default:
				// A claim not naming this node: two copies each see
				// themselves the last one (a voter removed that never
				// learned it, the last voter of the configuration
				// that removed it), or two sets of survivors each
				// claim it, knowing nothing of the other (learners a
				// configuration removed that never learned it, and the
				// learners that replaced them: 6 peers, circle
				// placement, seed 4101 once the asks of livesOn
				// changed its run). Its claimant is a rival; this
				// node's claim then names it, and the claimant takes
				// its names in turn.
				p.heardClaimant(RaftID(from))
			}
		}
	}
	// Rivals for good: the most up to date recovers, and the others,
	// once its claim is withdrawn, must not recover alone (their copies
	// lack what it held); they wait for its appends, or for good when its
	// configuration does not name them.
	for _, rid := range p.claimedBy {
		if lost[rid] == "" && !slices.Contains(rivals, rid) {
			rivals = append(rivals, rid)
		}
	}
	return rivals
}

// namedInClaim reports whether a survivor's claim on p (not a question)
// names this node.
func (n *Node) namedInClaim(p *partition, lost map[uint64]string) bool {
	for from, cs := range n.mesh.claims {
		if lost[RaftID(from)] != "" {
			continue
		}
		for _, c := range cs {
			if int(c.Partition) == p.id && !isQuestion(c, from) && slices.Contains(c.Survivors, n.cfg.ID) {
				return true
			}
		}
	}
	return false
}

// heardClaimant records rid among the survivors heard claiming p.
func (p *partition) heardClaimant(rid uint64) {
	if !slices.Contains(p.claimedBy, rid) {
		p.claimedBy = append(p.claimedBy, rid)
	}
}

// claim returns this node's recover claim for p, a learner whose voters
// are all lost and whose other surviving learners are rivals.
func (n *Node) claim(p *partition, rivals []uint64) RecoverClaim {
	last := n.keptLast(p)
	term, err := p.storage.Term(last)
	if err != nil {
		panic(fmt.Sprintf("peer: partition %d: term of the last index %d: %v", p.id, last, err))
	}
	survivors := append(n.mesh.peerNames(rivals), n.cfg.ID)
	slices.Sort(survivors)
	return RecoverClaim{Partition: uint32(p.id), Term: term, Index: last, Survivors: survivors}
}

// question returns this node's question to the voters of p it counts in
// a surviving majority (rivals), knowing of no leader: a claim naming them
// but not this node, which asks those holding no copy for an empty claim
// (emptyClaims) and claims nothing itself (isQuestion).
func (n *Node) question(p *partition, rivals []uint64) RecoverClaim {
	c := n.claim(p, rivals)
	c.Survivors = slices.DeleteFunc(c.Survivors, func(id string) bool { return id == n.cfg.ID })
	return c
}

// isQuestion reports whether c, peer from's claim, is a question
// (question): every claim names its sender among the survivors, an empty
// one included. A question makes no one a rival, and says nothing of its
// sender's copy.
func isQuestion(c RecoverClaim, from string) bool { return !slices.Contains(c.Survivors, from) }

// keptLast returns the last index of p's log that a recovery from this
// node keeps: the last, or the one before a change removing this node
// among the entries not applied (recoverPartition cuts it and what
// follows). A claim is made with it: claimed with the whole log, a
// survivor whose tail held its own removal beat a learner that had
// applied the entries after it, committed by the lost voters, and its
// recovery cut them (8 peers, circle placement, seed 6078).
func (n *Node) keptLast(p *partition) uint64 {
	last, _ := p.storage.LastIndex()
	if last <= p.applied {
		return last
	}
	es, err := p.storage.Entries(p.applied+1, last+1, 1<<62)
	if err != nil {
		panic(fmt.Sprintf("peer: partition %d: entries %d-%d: %v", p.id, p.applied+1, last, err))
	}
	if i := slices.IndexFunc(es, n.removesSelf); i >= 0 {
		return es[i].Index - 1
	}
	return last
}

// claimWins reports whether this node, a learner of p whose every voter is
// lost, recovers p rather than one of its rivals (the other learners not
// lost): each rival's last heartbeat claimed p with the same survivors,
// and this node's log is more up to date than each of theirs (Raft's
// order: the last entry's term, then its index), or as much and its peer
// id is lower. Each survivor decides so from the others' claims: at most
// one recovers.
//
// A survivor that sees another survivor its rival may not know of (a
// lagging learner that had not applied the change adding the other) sees
// other survivors, so the claims differ and it waits: the lagging one,
// seeing none, recovers alone. A survivor whose log changed since it
// claimed (the winner, leading, sent it entries) has a leader not lost:
// it waits too, and the winner's configuration, once applied, makes it a
// plain learner again.
func (n *Node) claimWins(p *partition, c RecoverClaim, rivals []uint64, lost map[uint64]string) bool {
	// A leader of a term whose other voters are lost (this node, or a
	// rival still claiming in the term this node is in) commits nothing:
	// only a leader of a later term, a recovered one, is waited for.
	st := p.rn.BasicStatus()
	if lead := st.Lead; lead != raft.None && lead != n.raftID && lost[lead] == "" && !n.stalledLeader(c.Partition, lead, st.HardState.Term) {
		return false
	}
	for _, rid := range rivals {
		id, ok := n.mesh.peerOf(rid)
		if !ok {
			return false
		}
		i := slices.IndexFunc(n.mesh.claims[id], func(rc RecoverClaim) bool { return rc.Partition == c.Partition })
		if i < 0 {
			return false
		}
		if !beats(c, n.cfg.ID, n.mesh.claims[id][i], id) {
			return false
		}
	}
	return true
}

// withoutCopy returns lost with the voters of p among rivals whose claim
// says they hold no copy of it (an empty one: emptyClaims) added: a voter
// that left the partition (it applied its removal, which this node, a
// lagging survivor, had not received) can never vote for the recovered
// partition, and kept among its voters it would leave it without a
// majority for good. The recovery removes it as it does a lost voter;
// the ring's repair adds it back as a new replica.
func (n *Node) withoutCopy(p *partition, rivals []uint64, lost map[uint64]string) map[uint64]string {
	out := lost
	for _, rid := range rivals {
		id, ok := n.mesh.peerOf(rid)
		if !ok || !slices.Contains(p.conf.Voters, rid) {
			continue
		}
		i := slices.IndexFunc(n.mesh.claims[id], func(rc RecoverClaim) bool { return int(rc.Partition) == p.id && !isQuestion(rc, id) })
		if i < 0 || n.mesh.claims[id][i].Term != 0 || n.mesh.claims[id][i].Index != 0 {
			continue
		}
		if len(out) == len(lost) {
			out = maps.Clone(lost)
		}
		out[rid] = id
	}
	return out
}

// stalledLeader reports whether lead, the leader this node knows of
// partition part, claims it in term, this node's: a leader that lost its
// other voters, not one a recovery made (that one leads in a later term
// than any claim made before it).
func (n *Node) stalledLeader(part uint32, lead, term uint64) bool {
	id, ok := n.mesh.peerOf(lead)
	return ok && slices.ContainsFunc(n.mesh.claims[id], func(rc RecoverClaim) bool { return rc.Partition == part && rc.Term == term })
}

// beats reports whether peer self's claim c wins over peer other's claim
// oc for the same partition: they name the same survivors, and c's log is
// more up to date (its last entry's term, then its index), or as much and
// self's id is lower.
func beats(c RecoverClaim, self string, oc RecoverClaim, other string) bool {
	return slices.Equal(c.Survivors, oc.Survivors) && ahead(c, self, oc, other)
}

// heardClaims records the recover claims of peer from's heartbeat; a
// change makes the partitions be looked at again.
func (m *mesh) heardClaims(from string, claims []RecoverClaim) {
	if len(claims) == 0 && m.claims[from] == nil || m.forgotten[from] {
		return
	}
	if len(claims) == 0 {
		delete(m.claims, from)
	} else {
		if m.claims == nil {
			m.claims = map[string][]RecoverClaim{}
		}
		m.claims[from] = claims
	}
	m.recoverScan = m.recoverScan || len(m.recover) > 0
}

// setClaims makes claims this node's recover claims; a change goes out
// with the next heartbeat (beatSig).
func (m *mesh) setClaims(claims []RecoverClaim) {
	if slices.EqualFunc(claims, m.ownClaims, func(a, b RecoverClaim) bool {
		return a.Partition == b.Partition && a.Term == b.Term && a.Index == b.Index && slices.Equal(a.Survivors, b.Survivors)
	}) {
		return
	}
	m.ownClaims, m.claimSig = claims, 0
	if len(claims) > 0 {
		h := fnv.New64a()
		h.Write(appendClaims(nil, claims))
		m.claimSig = h.Sum64() | 1
	}
}

// recoverPartition recovers p as its last voter (see the top of the file).
func (n *Node) recoverPartition(p *partition, lost map[uint64]string) {
	hs, _, _ := p.storage.InitialState()
	term := max(p.rn.BasicStatus().Term, hs.Term)
	last, _ := p.storage.LastIndex()
	u := wal.Update{Partition: uint32(p.id)}
	if p.applied > p.snapIndex {
		snap, err := p.storage.CreateSnapshot(p.applied, p.conf, p.shard.Snapshot())
		if err != nil {
			panic(fmt.Sprintf("peer: partition %d: recovery snapshot at %d: %v", p.id, p.applied, err))
		}
		if err := p.storage.Compact(p.applied); err != nil && err != raft.ErrCompacted {
			panic(fmt.Sprintf("peer: partition %d: recovery compact at %d: %v", p.id, p.applied, err))
		}
		p.snapIndex, p.snapBytes, p.logBytes = p.applied, len(snap.Data), 0
		u.Snapshot = snap
	}
	// A configuration change among the entries not applied yet changes
	// the voters: those entries commit first, alone, and the next scan
	// looks at the configuration they leave. One removing this node (the
	// ring was moving the replica away, and the lost voters may have
	// committed it) would take the last copy with it: the log is cut
	// before it, the recovery's entries overwriting it and what follows
	// (lost like any entry only the lost voters held).
	pending, cut := false, uint64(0)
	if last > p.applied {
		es, err := p.storage.Entries(p.applied+1, last+1, 1<<62)
		if err != nil {
			panic(fmt.Sprintf("peer: partition %d: recovery entries %d-%d: %v", p.id, p.applied+1, last, err))
		}
		if i := slices.IndexFunc(es, n.removesSelf); i >= 0 {
			cut, last, es = last, es[i].Index-1, es[:i]
		}
		pending = slices.ContainsFunc(es, func(e pb.Entry) bool {
			return e.Type == pb.EntryConfChange || e.Type == pb.EntryConfChangeV2
		})
	}
	var removed []string
	learner := !slices.Contains(p.conf.Voters, n.raftID)
	if pending && cut > 0 {
		// The entries before the cut commit first, alone; an empty
		// entry overwrites the one removing this node (a leader of the
		// next term would commit it).
		u.Entries = append(u.Entries, pb.Entry{Type: pb.EntryNormal, Term: term + 1, Index: last + 1})
	}
	joint := len(p.conf.VotersOutgoing) > 0
	if !pending {
		// A joint configuration is left first (Raft takes no other
		// change in one): its incoming voters become the voters, the
		// outgoing half's lost voters leave with it. A learner then
		// makes itself a voter: removing the lost voters before would
		// leave none, which Raft refuses.
		var changes []*pb.ConfChangeV2
		if joint {
			changes = append(changes, &pb.ConfChangeV2{})
		}
		if learner {
			changes = append(changes, &pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode, NodeID: n.raftID}}})
		}
		for _, rid := range slices.Sorted(func(yield func(uint64) bool) {
			for _, rid := range p.conf.Voters {
				if rid != n.raftID && lost[rid] != "" && !yield(rid) {
					return
				}
			}
		}) {
			changes = append(changes, &pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode, NodeID: rid}}})
			removed = append(removed, lost[rid])
		}
		for _, c := range changes {
			data, err := c.Marshal()
			if err != nil {
				panic(fmt.Sprintf("peer: partition %d: recovery conf change: %v", p.id, err))
			}
			idx := last + uint64(len(u.Entries)) + 1
			u.Entries = append(u.Entries, pb.Entry{Type: pb.EntryConfChangeV2, Term: term + 1, Index: idx, Data: data})
		}
	}
	commit := last + uint64(len(u.Entries))
	u.HardState = pb.HardState{Term: term + 1, Vote: n.raftID, Commit: commit}
	if err := p.storage.Apply(wal.Update{HardState: u.HardState, Entries: u.Entries}); err != nil {
		panic(fmt.Sprintf("peer: partition %d: recovery: in-memory raft storage refused: %v", p.id, err))
	}
	n.rd.Persist.Updates = append(n.rd.Persist.Updates, u)
	n.rd.MustSync = true
	if p.leader {
		n.softState(p, &raft.SoftState{RaftState: raft.StateFollower}) // a stalled leader of the old term
	}
	rn, err := raft.NewRawNode(n.raftConfig(p.id, p.storage, p.applied))
	if err != nil {
		panic(fmt.Sprintf("peer: partition %d: recovery: raft: %v", p.id, err))
	}
	p.rn = rn
	p.recoverTo = commit
	p.campaignAt, p.confAt, p.leaderHeard, p.promise = time.Time{}, time.Time{}, time.Time{}, 0
	n.wake(p, false)
	n.markDirty(p.id)
	if !pending {
		n.stats.UnsafeRecoveries++
	}
	n.log.Warn("partition recovered from this peer's copy alone (unsafe recovery): entries only the lost voters held are gone",
		keyPart, p.id, "applied", p.applied, "last", last, "term", term+1, "removed", removed, "learner", learner, "joint", joint, "pending_conf", pending, "cut_from", cut)
}

// removesSelf reports whether e is a configuration change removing this
// node.
func (n *Node) removesSelf(e pb.Entry) bool {
	var cc pb.ConfChangeI
	switch e.Type {
	case pb.EntryConfChange:
		v := &pb.ConfChange{}
		if v.Unmarshal(e.Data) != nil {
			return false
		}
		cc = v
	case pb.EntryConfChangeV2:
		v := &pb.ConfChangeV2{}
		if v.Unmarshal(e.Data) != nil {
			return false
		}
		cc = v
	default:
		return false
	}
	return slices.ContainsFunc(cc.AsV2().Changes, func(c pb.ConfChangeSingle) bool {
		return c.Type == pb.ConfChangeRemoveNode && c.NodeID == n.raftID
	})
}

// recovered is called once p's Ready was advanced while a recovery of it
// is under way: when the recovery's entries applied, the partition
// campaigns if this node is its only voter, or is looked at again (the
// entries held a configuration change).
func (n *Node) recovered(p *partition) {
	if p.applied < p.recoverTo {
		return
	}
	p.recoverTo = 0
	// Once no lost voter is left, it campaigns: alone, or with the
	// surviving voters a claim was won against (its log is the most up
	// to date: they vote for it).
	lost := n.mesh.lostRaft()
	if voters := p.conf.Voters; slices.Contains(voters, n.raftID) && !p.leader &&
		!slices.ContainsFunc(voters, func(rid uint64) bool { return lost[rid] != "" }) {
		if err := p.rn.Campaign(); err == nil {
			n.markDirty(p.id)
		}
		return
	}
	n.mesh.recoverScan = true
}

// recoveredElsewhere reports whether m, an append or a snapshot from a
// leader of p in this replica's term or a later one, disagrees with an
// entry this replica applied: the entry's term there differs from this
// log's at the same index. A leader holds every committed entry (Raft's
// leader completeness), so only an unsafe recovery by another survivor
// makes one disagree: this replica lagged behind the change naming that
// survivor (or that survivor lagged behind entries this one applied) and
// it recovered the partition without this copy, whose state at the same
// index the recovered log never held. Raft would answer such an append
// below its commit index with that index, which the leader takes as
// matched (the copies diverge for good), or panic on a conflict with a
// committed entry.
func (n *Node) recoveredElsewhere(p *partition, m *pb.Message) bool {
	if t := m.Type; t != pb.MsgApp && t != pb.MsgSnap || p.applied == 0 || m.Term < p.rn.BasicStatus().Term {
		return false
	}
	differs := func(index, term uint64) bool {
		if index == 0 || index > p.applied {
			return false
		}
		if t, err := p.storage.Term(index); err == nil {
			return t != term
		}
		// Compacted: every entry before the snapshot has a term no later
		// than the snapshot's.
		st, err := p.storage.Term(p.snapIndex)
		return err == nil && index < p.snapIndex && term > st
	}
	switch m.Type {
	case pb.MsgApp:
		return differs(m.Index, m.LogTerm) ||
			slices.ContainsFunc(m.Entries, func(e pb.Entry) bool { return differs(e.Index, e.Term) })
	case pb.MsgSnap:
		if m.Snapshot == nil {
			return false
		}
		md := m.Snapshot.Metadata
		return differs(md.Index, md.Term)
	}
	return false
}

// rebuild drops p, a copy the partition's recovery by another survivor
// left behind (recoveredElsewhere), and opens it again empty, for m's
// leader to send it a snapshot of the recovered log: it returns the new
// replica, or nil while a Ready of p is out (Advance would act on the
// copy dropped; m is dropped, and the leader sends again). It keeps the
// tombstone of the copy (bury), as a replica that left does.
func (n *Node) rebuild(p *partition, from string, m *pb.Message) *partition {
	if slices.ContainsFunc(n.advRds, func(a pending) bool { return a.p == p }) {
		return nil
	}
	applied := p.applied
	n.dropPartition(p, "the partition was recovered by another survivor (unsafe recovery): this copy disagrees with its log", applied)
	np, err := n.openPartition(p.id, wal.PartitionState{}, nil)
	if err != nil {
		panic(fmt.Sprintf("peer: partition %d: reopen after a recovery elsewhere: %v", p.id, err))
	}
	n.hold(np)
	n.stats.RecoveredElsewhere++
	n.log.Warn("replica dropped and rebuilt: another survivor recovered the partition (unsafe recovery) and its leader's log disagrees with entries this copy applied",
		keyPart, p.id, "leader", from, "applied", applied, "term", m.Term)
	return np
}
