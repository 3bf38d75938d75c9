package node

import (
	"slices"
	"strconv"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/needle-mesh/needle/ring"
)

func (m *mesh) rebuildRing() {
	ids := m.memberIDs()
	peers := make([]ring.PeerID, len(ids))
	for i, id := range ids {
		peers[i] = ring.PeerID(id)
	}
	cfg := ring.DefaultConfig()
	cfg.Partitions, cfg.Replicas, cfg.Placement = m.n.cfg.Partitions, m.n.cfg.Replicas, m.n.cfg.Placement
	r, err := m.n.cfg.Rings.build(cfg, m.epoch+1, peers)
	if err != nil {
		m.n.log.Error("ring rebuild refused; keeping the previous ring", keyErr, err, "members", len(ids))
		m.ringSet, m.ringVersion = ids, m.version
		return
	}
	m.epoch++
	m.ring, m.ringSet, m.ringVersion = r, ids, m.version
	m.prefDirty = true
	m.n.log.Info("ring rebuilt", "epoch", m.epoch, "members", len(ids))
}

// placedHere reports whether the ring places this node among partition
// p's replicas; true without a ring.
func (m *mesh) placedHere(p int) bool {
	if m.ring == nil {
		return true
	}
	if m.mineOf != m.ring {
		m.mine, m.mineOf = m.ring.PartitionsOf(ring.PeerID(m.n.cfg.ID)), m.ring
	}
	_, ok := slices.BinarySearch(m.mine, p)
	return ok
}

func (m *mesh) computePreferred() {
	m.prefDirty = false
	m.n.wakeAll() // a membership event: quiesced partitions look again
	if m.ring == nil {
		m.preferred = nil
		return
	}
	m.preferred = m.n.cfg.Rings.preferredOwners(m.ring, func(id ring.PeerID) bool { return m.eligible(string(id)) })
}

// expireHolders proposes the expiry of leases matching in every partition
// this node serves.
func (m *mesh) expireHolders(match func(holder string) bool) {
	for _, i := range m.n.held {
		if p := m.n.parts[i]; p.serving {
			if evs := p.shard.ExpireHolders(m.n.now, match); len(evs) > 0 {
				p.propose(evs)
				m.n.markDirty(p.id)
			}
		}
	}
}

// voters returns the partition's voters as peer ids, sorted.
func (m *mesh) voters(p *partition) []string {
	if p.votersOf == p.conf && p.votersEpoch == m.version && p.voterIDs != nil {
		return p.voterIDs
	}
	var out []string
	for _, v := range p.conf.Voters {
		if id, ok := m.peerOf(v); ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	p.voterIDs, p.votersOf, p.votersEpoch = out, p.conf, m.version
	return out
}

func (m *mesh) peerOf(raftID uint64) (string, bool) {
	id, ok := m.byRaft[raftID]
	return id, ok
}

// peerNames returns the peer ids of Raft ids rids, for a log line an
// operator reads: a Raft id of no peer known here stays a number.
func (m *mesh) peerNames(rids []uint64) []string {
	out := make([]string, len(rids))
	for i, rid := range rids {
		if id, ok := m.peerOf(rid); ok {
			out[i] = id
		} else {
			out[i] = strconv.FormatUint(rid, 10)
		}
	}
	return out
}

func (m *mesh) add(mb *member) {
	h := RaftID(mb.id)
	if m.members[mb.id] == nil {
		m.sum += h
		if m.ids != nil {
			m.idsAdd = append(m.idsAdd, mb.id)
		}
		// A recover claim names its survivors by peer id: a survivor
		// learned of only now (a restart forgets the members until they
		// are heard again) can now be named, and claimed against.
		m.recoverScan = m.recoverScan || len(m.recover) > 0
	} else {
		m.members[mb.id].gone = true
		m.ids = nil // replaced: sorted again
	}
	m.version++
	m.members[mb.id] = mb
	m.bookMark(mb.id)
	m.noteAddrs(mb)
	m.byRaft[h] = mb.id
}

// lastIndex is the leader's own last log index.
func (m *mesh) lastIndex(st raft.Status) uint64 {
	return st.Progress[m.n.raftID].Match
}

// owner is the peer that should lead partition p now: the ring's preferred
// owner if it is a live voter, else the first live voter.
func (m *mesh) owner(p *partition) string {
	voters := m.voters(p)
	if len(m.preferred) > p.id {
		if pref := string(m.preferred[p.id]); pref != "" && slices.Contains(voters, pref) && m.eligible(pref) {
			return pref
		}
	}
	for _, v := range voters {
		if m.eligible(v) {
			return v
		}
	}
	return ""
}

// eligible reports whether a peer may lead partitions: alive and not
// draining.
func (m *mesh) eligible(id string) bool {
	if id == m.n.cfg.ID && m.n.draining {
		return false
	}
	mb := m.members[id]
	return m.live(id) && mb != nil && !mb.draining
}

// transferWait bounds a leadership transfer before it is aborted.
const transferWait = time.Second

// transferHold is how long a new leader keeps a partition before it hands
// it to the preferred owner. Peers that disagree on who is alive (a link
// cut between two of them, both reaching a third) disagree on the
// preferred owner, and each handed leadership to the other as soon as it
// got it, every few Raft ticks, for as long as the cut lasted: proposals
// refused and reads unavailable throughout.
const transferHold = 3 * time.Second

// confWait bounds the wait for a proposed replica change to apply (Raft
// may drop it) before the next is tried.
const confWait = 2 * time.Second

// tickPartition decides, once per Raft tick, whether to campaign for a
// partition whose leader is gone, hand leadership to its preferred owner,
// or change its replica set toward the ring's.
func (m *mesh) tickPartition(p *partition) {
	st := p.rn.BasicStatus()
	self := m.n.cfg.ID
	want := m.owner(p)
	if p.leader {
		if p.abdicated {
			if quiet := m.n.now.Sub(p.abdicatedAt) >= m.n.abdicateQuiet(); quiet || m.n.votersBack(p) {
				m.n.resumeLeading(p, quiet)
			}
			return
		}
		if m.n.abdicate(p) {
			return
		}
		if p.thawed && !p.serving && m.n.quorumAnswered(p) {
			m.n.maybeServe(p, p.term) // its voters answered it after the gap
		}
		if st.LeadTransferee != raft.None {
			// Raft refuses proposals while it transfers leadership, and its
			// own transfer timeout is the (disabled) election timeout: give
			// up on a transfer that does not finish (a target that died).
			if m.n.now.Sub(p.transferAt) > transferWait {
				p.rn.TransferLeader(m.n.raftID) // aborts the transfer
				m.n.markDirty(p.id)
			}
			return
		}
		if want != "" && want != self && m.transferable(p) && m.caughtUp(p, want) {
			p.transferAt = m.n.now
			m.n.voidLeases(p) // after an aborted transfer, the lease starts again
			p.rn.TransferLeader(RaftID(want))
			m.n.markDirty(p.id)
			return
		}
		if p.serving {
			m.reconfigure(p)
		}
		return
	}
	lead, known := m.peerOf(st.Lead)
	// A leader that is alive but silent to this replica for DeadAfter (it
	// cannot hear its voters and abdicated, or the link from it is cut)
	// is no leader here: its promise (leaderLease) has run out too.
	silent := !p.leaderHeard.IsZero() && m.n.now.Sub(p.leaderHeard) >= m.n.cfg.DeadAfter
	if silent && known {
		m.silentLeader(p, lead)
	}
	if st.Lead != raft.None && known && m.live(lead) && !silent {
		p.campaignAt = time.Time{}
		return
	}
	if !slices.Contains(p.conf.Voters, m.n.raftID) {
		return // a learner does not campaign
	}
	if m.n.draining && want != "" {
		return // a draining peer campaigns only when nobody else can
	}
	if !p.campaignAt.IsZero() && want == self && p.campaignAt.Sub(m.n.now) > campaignJitter {
		// This peer became the preferred owner while it waited as a
		// fallback (the leader was found dead meanwhile): it goes first.
		p.campaignAt = time.Time{}
	}
	if p.campaignAt.IsZero() {
		// The preferred owner goes first, after a seeded jitter so that
		// peers that briefly disagree do not duel. Any other voter follows
		// later: the preferred owner's log may be behind the others' (its
		// vote is then refused), and a partition must not stay leaderless.
		delay := time.Duration(m.n.cfg.Rand.Int64N(int64(campaignJitter)))
		if want != self {
			delay += campaignFallback + time.Duration(m.n.cfg.Rand.Int64N(int64(campaignFallback)))
		}
		if !p.campaigned.IsZero() && m.n.now.Sub(p.campaigned) < m.n.cfg.DeadAfter {
			// Its last campaign won nothing: voters that campaigned at the
			// same tick each voted for themselves. The jitter is under a
			// tick, so they would meet again at the next one, round after
			// round; a random tick of the next heartbeat period parts them.
			delay += m.n.campaignSpread()
		}
		// A restarted peer may have answered the leader's heartbeat just
		// before it died, and its vote for itself would break that
		// promise (see leaderLease): it waits out the lease window.
		p.campaignAt = later(m.n.now.Add(delay), m.n.votesFrom())
		return
	}
	if !m.n.now.Before(p.campaignAt) {
		if m.n.promised(p) {
			// Its vote for itself would break the promise the leader's
			// lease may count on (a leader found dead may live): it
			// campaigns when the promise ends, which is also when the
			// other voters, who heard the leader when it did, vote again.
			p.campaignAt = p.leaderHeard.Add(p.promise)
			return
		}
		p.campaignAt, p.campaigned = time.Time{}, m.n.now
		_ = p.rn.Campaign()
		m.n.markDirty(p.id)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// campaignSpread is a random wait of up to a heartbeatPeriod, for
// campaigns that voters would otherwise start at the same Raft tick: a
// retry after a split vote, and the voters a behind candidate asked
// (refusedBehind).
func (n *Node) campaignSpread() time.Duration {
	return time.Duration(n.cfg.Rand.Int64N(int64(n.heartbeatPeriod())))
}

// heartbeatPeriod is how often a leader heartbeats its followers: RaftTick
// x HeartbeatTicks, 500 ms by default.
func (n *Node) heartbeatPeriod() time.Duration {
	return n.cfg.RaftTick * time.Duration(n.cfg.HeartbeatTicks)
}

// campaignFallback is how long a voter that is not the preferred owner
// waits before campaigning for a leaderless partition.
const campaignFallback = 1500 * time.Millisecond

// campaignJitter bounds the preferred owner's seeded wait before it
// campaigns.
const campaignJitter = 100 * time.Millisecond

// transferable reports whether leader p may hand its leadership on now:
// it has held it for transferHold, and its last replica change applied a
// heartbeat period ago. The replica it promoted learns that the change
// committed with the leader's next message and applies it after; asked to
// campaign in between (the transfer goes out with that message), it is
// not a voter yet in its own view and does not ("is unpromotable"), and
// the leader refused proposals until it gave up on the transfer
// (transferWait): a peer joining a 4-peer mesh met it for 23 partitions.
func (m *mesh) transferable(p *partition) bool {
	settle := m.n.heartbeatPeriod()
	return m.n.now.Sub(p.leadSince) >= transferHold && m.n.now.Sub(p.confApplied) >= settle
}

func (m *mesh) caughtUp(p *partition, id string) bool {
	if !m.live(id) {
		return false
	}
	st := p.rn.Status()
	pr, ok := st.Progress[RaftID(id)]
	return ok && !pr.IsLearner && pr.State == tracker.StateReplicate && pr.Match+16 >= m.lastIndex(st)
}

// reconfigure moves the partition's replica set one step toward the ring's:
// add a missing replica as a learner, promote a caught-up learner, then
// remove a voter the ring no longer wants. One change at a time.
func (m *mesh) reconfigure(p *partition) {
	if m.ring == nil || (!p.confAt.IsZero() && m.n.now.Sub(p.confAt) < confWait) {
		return
	}
	voters, learners := p.conf.Voters, p.conf.Learners
	if len(p.conf.VotersOutgoing) > 0 {
		return // in a joint configuration: Raft leaves it by itself first
	}
	if m.ringVersion != m.version || !m.knowsAll(voters) || !m.knowsAll(learners) {
		// The ring is not built from this node's membership yet, or the
		// membership misses a replica (a restarted peer that knows only
		// itself until gossip arrives): a ring from such a view would
		// remove live replicas it has not heard of. Wait for the view.
		return
	}
	replicas := m.ring.Replicas(p.id)
	if len(learners) == 0 && len(voters) == len(replicas) && m.allVoters(replicas, voters) {
		return // the common case: nothing to change
	}
	want := map[uint64]string{}
	for _, id := range replicas {
		want[RaftID(string(id))] = string(id)
	}
	for _, rid := range sortedKeys(want) {
		if !slices.Contains(voters, rid) && !slices.Contains(learners, rid) && m.live(want[rid]) {
			m.confChange(p, pb.ConfChangeAddLearnerNode, rid)
			return
		}
	}
	if len(learners) > 0 && m.promoteLearners(p, voters, learners, want) {
		return
	}
	m.removeExtra(p, voters, learners, want, len(replicas))
}

// promoteLearners promotes a wanted learner that caught up, when the
// voters with it keep a live quorum; it reports whether it proposed a
// change (or must wait for a second learner).
func (m *mesh) promoteLearners(p *partition, voters, learners []uint64, want map[uint64]string) bool {
	// Status allocates: only when a learner may be promoted.
	st := p.rn.Status()
	var ready, behind []uint64 // wanted learners caught up, and live ones not yet
	for _, rid := range learners {
		if _, ok := want[rid]; !ok {
			continue
		}
		if pr, ok := st.Progress[rid]; ok && pr.State == tracker.StateReplicate && pr.Match+16 >= m.lastIndex(st) {
			ready = append(ready, rid)
		} else if m.live(want[rid]) {
			behind = append(behind, rid)
		}
	}
	// A lone voter promotes two learners at once (joint consensus,
	// left automatically): one at a time would pass through two
	// voters, which stop for good if either is lost before the third
	// joins. It waits for a second live learner to catch up.
	if len(voters) == 1 && len(want) >= 3 {
		switch {
		case len(ready) >= 2 && m.liveQuorum(append(slices.Clone(voters), ready[:2]...)):
			m.promote(p, ready[:2]...)
			return true
		case len(ready) == 1 && len(behind) > 0:
			return true
		}
	}
	for _, rid := range ready {
		if m.liveQuorum(append(slices.Clone(voters), rid)) {
			m.confChange(p, pb.ConfChangeAddNode, rid)
			return true
		}
	}
	return false
}

// removeExtra removes a replica the ring no longer wants: a learner at
// once, a voter only when the voters are more than the ring's nReplicas
// and the rest keep a live quorum.
func (m *mesh) removeExtra(p *partition, voters, learners []uint64, want map[uint64]string, nReplicas int) {
	for _, rid := range append(slices.Clone(voters), learners...) {
		if _, ok := want[rid]; ok || rid == m.n.raftID {
			continue // a leader that must leave hands over first (owner() no longer names it)
		}
		if slices.Contains(learners, rid) {
			m.confChange(p, pb.ConfChangeRemoveNode, rid)
			return
		}
		// A voter goes only when its replacement is a voter already
		// (there are more voters than the ring wants), and only if the
		// voters left still have a live quorum. Removing first would
		// shrink the set below the ring's size: a 2-voter partition stops
		// for good when either voter is lost, and removing a live voter
		// while another is dead leaves one that can never commit again.
		// A dead voter too, until its replacement votes (seed 939:
		// testdata/dead_voter_kept.txt shows it).
		if len(voters) <= nReplicas {
			continue
		}
		if rest := slices.DeleteFunc(slices.Clone(voters), func(v uint64) bool { return v == rid }); len(rest) > 0 && m.liveQuorum(rest) {
			m.confChange(p, pb.ConfChangeRemoveNode, rid)
			return
		}
	}
}

// knowsAll reports whether every replica in rids is this node, a member,
// or a peer forgotten for good: whether this node's membership accounts
// for the whole configuration.
func (m *mesh) knowsAll(rids []uint64) bool {
	for _, rid := range rids {
		if _, ok := m.byRaft[rid]; ok || rid == m.n.raftID {
			continue
		}
		if !m.forgottenRaft(rid) {
			return false
		}
	}
	return true
}

// forgottenRaft reports whether rid is the Raft id of a forgotten peer.
func (m *mesh) forgottenRaft(rid uint64) bool {
	for id := range m.forgotten {
		if RaftID(id) == rid {
			return true
		}
	}
	return false
}

// liveQuorum reports whether a majority of voters are live (this node
// counts as live): whether a configuration of them could commit now.
func (m *mesh) liveQuorum(voters []uint64) bool {
	live := 0
	for _, rid := range voters {
		if rid == m.n.raftID {
			live++
		} else if id, ok := m.peerOf(rid); ok && m.live(id) {
			live++
		}
	}
	return live >= len(voters)/2+1
}

func (m *mesh) allVoters(replicas []ring.PeerID, voters []uint64) bool {
	for _, id := range replicas {
		if !slices.Contains(voters, RaftID(string(id))) {
			return false
		}
	}
	return true
}

// promote makes learners voters in one joint configuration change, which
// Raft leaves by itself once it applies.
func (m *mesh) promote(p *partition, rids ...uint64) {
	cc := &pb.ConfChangeV2{Transition: pb.ConfChangeTransitionAuto}
	for _, rid := range rids {
		cc.Changes = append(cc.Changes, pb.ConfChangeSingle{Type: pb.ConfChangeAddNode, NodeID: rid})
	}
	if err := p.rn.ProposeConfChange(cc); err != nil {
		return
	}
	p.confAt = m.n.now
	m.n.markDirty(p.id)
	m.n.log.Debug("replica change proposed", keyPart, p.id, "change", "promote (joint)", "replicas", len(rids))
}

func (m *mesh) confChange(p *partition, t pb.ConfChangeType, rid uint64) {
	cc := &pb.ConfChange{Type: t, NodeID: rid}
	if err := p.rn.ProposeConfChange(cc); err != nil {
		return
	}
	p.confAt = m.n.now // cleared when a conf change applies
	m.n.markDirty(p.id)
	id, _ := m.peerOf(rid)
	m.n.log.Debug("replica change proposed", keyPart, p.id, "change", t.String(), keyPeer, id)
}
