package node

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

// PeerState is what the failure detector thinks of a peer.
type PeerState uint8

const (
	PeerAlive PeerState = iota + 1
	PeerSuspect
	PeerDead
)

func (s PeerState) String() string {
	switch s {
	case PeerAlive:
		return "alive"
	case PeerSuspect:
		return "suspect"
	case PeerDead:
		return "dead"
	}
	return "unknown"
}

// member is one peer of the membership, as this node sees it.
type member struct {
	id        string
	boot      string
	heard     time.Time // last message from it (or when we learned of it)
	load      Load
	addrs     []string
	state     PeerState
	deadSince time.Time
	draining  bool // it hands its work over and will leave: lead nothing

	// From its heartbeats: its placement labels (as a map, and as gossiped:
	// "key=value", sorted), and the READY tasks it cannot run itself.
	labels    map[string]string
	labelList []string
	stranded  int
	// strandedFor is the peers its stranded tasks wait for; nil: unnamed.
	strandedFor []string
	features    uint64 // what it can apply (Heartbeat.Features)
	// workers are its external workers' handlers and demand, from its
	// last heartbeat; offered counts the tasks this node leased to it
	// since, by WorkerAd key (scheduleExternal).
	workers []WorkerAd
	offered map[string]int
	// merged is the membership list of its last heartbeat that learn
	// merged (the sender's immutable slice; see learn).
	merged []string
}

// mesh is the Node's view of the other peers: membership (a grow-only set
// with tombstones, merged from every heartbeat, so every peer converges on
// the same set), liveness (heartbeats; dead after DeadAfter), the ring
// computed over a debounced membership, preferred owners, and the outbox of
// outcomes for owners elsewhere.
type mesh struct {
	n         *Node
	members   map[string]*member
	forgotten map[string]bool
	changedAt time.Time // membership last changed
	ring      *ring.Ring
	ringSet   []string // the members the ring was built over
	epoch     ring.Epoch
	preferred []ring.PeerID // per partition, over live members
	prefDirty bool
	lastBeat  time.Time
	lastReady int // READY count in the last heartbeat
	lastSend  time.Time
	outbox    map[string]OutcomeMsg // key task@round
	acks      map[string][]AckMsg   // acks to send after commit, by partition/task key
	pendAck   map[shard.TaskID]pendingAck
	byRaft    map[uint64]string // raft id -> peer id, over members
	ids       []string          // sorted member ids, nil when stale (memberIDs)
	version   int               // bumps on every membership change (caches)
	// ringVersion is the membership version last compared with ringSet:
	// the ring is up to date for it (tick skips the comparison).
	ringVersion int
	// detectAt is the earliest time a member's silence can cross a
	// threshold of the failure detector (suspect, dead, forget); tick skips
	// the pass over the members before it. Hearing from a member only moves
	// its thresholds later; a new member, a forget or a dead peer coming back
	// resets detectAt to zero (check at the next tick).
	detectAt time.Time
	// strandedPeers counts the members whose last heartbeat said they hold
	// READY tasks they cannot run themselves (see askStranded).
	strandedPeers int
	// granter is, per partition, the peer that last granted this node a
	// lease in it: it led the partition then. Outcomes go to it as well as
	// to the ring's owner, which may not lead yet (a young mesh, a move
	// in progress) and drops what it does not serve.
	granter map[int]string
}

type pendingAck struct {
	from  string
	round shard.Round
}

func newMesh(n *Node, now time.Time) mesh {
	m := mesh{n: n, members: map[string]*member{}, forgotten: map[string]bool{},
		outbox: map[string]OutcomeMsg{}, granter: map[int]string{}, pendAck: map[shard.TaskID]pendingAck{}, changedAt: now,
		byRaft: map[uint64]string{}}
	m.add(&member{id: n.cfg.ID, boot: n.cfg.Boot, heard: now, state: PeerAlive, addrs: n.cfg.Addrs,
		labels: n.placement.Labels, labelList: LabelList(n.placement.Labels)})
	m.rebuildRing()
	return m
}

// Members returns the membership, sorted, with each peer's state.
func (n *Node) Members() []MemberInfo {
	ids := slices.Sorted(maps.Keys(n.mesh.members))
	out := make([]MemberInfo, 0, len(ids))
	for _, id := range ids {
		m := n.mesh.members[id]
		out = append(out, MemberInfo{ID: id, State: m.state, Load: m.load, Addrs: m.addrs, LastSeen: m.heard,
			Labels: m.labelList, Stranded: m.stranded, StrandedFor: m.strandedFor})
	}
	return out
}

// MemberInfo describes one peer for /v1/peers.
type MemberInfo struct {
	ID       string
	State    PeerState
	Load     Load
	Addrs    []string
	LastSeen time.Time
	Labels   []string // placement labels, "key=value", sorted
	Stranded int      // READY tasks it cannot run itself (as last gossiped)
	// StrandedFor is the peers those tasks wait for, as gossiped (nil:
	// not named).
	StrandedFor []string
}

func (m *mesh) live(id string) bool {
	mb := m.members[id]
	return mb != nil && mb.state != PeerDead
}

// heard records a message from a peer: it is alive. A new boot nonce means
// the peer restarted: leases held by its former run are void.
func (m *mesh) heard(id, boot string, now time.Time) {
	if id == "" || m.forgotten[id] {
		return
	}
	mb := m.members[id]
	if mb == nil {
		mb = &member{id: id}
		m.add(mb)
		m.changedAt = now
	}
	wasDead := mb.state == PeerDead
	if mb.state != PeerAlive { // new, suspect or dead: its next threshold is earlier now
		m.detectAt = earliest(m.detectAt, now.Add(m.n.cfg.DeadAfter/2))
	}
	rebooted := boot != "" && mb.boot != "" && boot != mb.boot
	if boot != "" {
		mb.boot = boot
	}
	mb.heard = now
	mb.state = PeerAlive
	if wasDead || rebooted {
		m.prefDirty = true
	}
	if rebooted {
		m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == id && h != id+"#"+boot })
	}
}

// learn merges a heartbeat's membership view. Merging a list twice
// changes nothing (members leave only by forget, which learn respects), so
// the list last merged from each sender is remembered and a heartbeat that
// carries the very same list is skipped; one that names exactly the known
// membership is skipped without lookups.
func (m *mesh) learn(from string, hb *Heartbeat, now time.Time) {
	for _, id := range hb.Forgotten {
		// A forget heard second-hand applies to a peer this one does not
		// hear from any more: forget is for dead peers (needle forget),
		// and one keyed host must not be able to remove live peers from
		// the whole mesh. The list comes with every heartbeat, so the
		// forget applies here once the peer is dead here too.
		if mb := m.members[id]; mb != nil && mb.state == PeerAlive {
			continue
		}
		m.forget(id, now)
	}
	sender := m.members[from]
	if sender != nil && sameSlice(sender.merged, hb.Members) {
		return
	}
	if len(hb.Members) != len(m.members) || !slices.Equal(hb.Members, m.memberIDs()) {
		for _, id := range hb.Members {
			if m.members[id] == nil && !m.forgotten[id] && id != "" && (m.n.cfg.ValidID == nil || m.n.cfg.ValidID(id)) {
				m.add(&member{id: id, heard: now, state: PeerAlive})
				m.changedAt = now
				m.detectAt = earliest(m.detectAt, now.Add(m.n.cfg.DeadAfter/2))
			}
		}
	}
	if sender != nil {
		sender.merged = hb.Members
	}
}

// sameSlice reports whether a and b are the same slice (not merely equal).
func sameSlice(a, b []string) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// isForgotten reports whether id was removed from the membership for good:
// it will never run anything again, so the tasks pinned to it fail
// (shard.FailPinnedTo).
func (m *mesh) isForgotten(id string) bool { return m.forgotten[id] }

// forget removes a peer from the membership for good.
func (m *mesh) forget(id string, now time.Time) {
	if id == m.n.cfg.ID || m.forgotten[id] {
		return
	}
	m.forgotten[id] = true
	if mb := m.members[id]; mb != nil {
		if mb.stranded > 0 {
			m.strandedPeers--
		}
		delete(m.members, id)
		delete(m.byRaft, RaftID(id))
		m.ids = nil
		m.version++
		m.detectAt = time.Time{}
		m.changedAt = now
		m.prefDirty = true
		if mb.state != PeerDead {
			// Forgotten before the failure detector declared it dead
			// (needle forget right after a kill): its leases would
			// otherwise wait for their tasks' timeouts.
			m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == id })
		}
	}
}

// Forget removes a peer from the membership (needle forget): its replicas
// move to other peers.
func (n *Node) Forget(id string) { n.mesh.forget(id, n.now) }

// tick runs the failure detector, gossips a heartbeat, rebuilds the ring
// once the membership is stable, and re-sends unacknowledged outcomes.
func (m *mesh) tick(now time.Time) {
	cfg := &m.n.cfg
	if self := m.members[cfg.ID]; self != nil {
		self.heard, self.state = now, PeerAlive
	}
	if !now.Before(m.detectAt) {
		m.detect(now)
	}
	if m.ringVersion != m.version && now.Sub(m.changedAt) >= cfg.Debounce {
		if slices.Equal(m.ringSet, m.memberIDs()) {
			m.ringVersion = m.version
		} else {
			m.rebuildRing()
		}
	}
	if m.prefDirty {
		m.computePreferred()
	}
	if now.Sub(m.lastBeat) >= cfg.HeartbeatEvery || m.loadJumped(now) || m.n.ext.beatSoon && now.Sub(m.lastBeat) >= workerBeatEvery {
		m.lastBeat = now
		m.n.ext.beatSoon = false
		hb := m.heartbeat()
		m.lastReady = hb.Heartbeat.Load.Ready
		m.n.rd.Gossip = append(m.n.rd.Gossip, hb)
	}
	if len(m.outbox) > 0 && now.Sub(m.lastSend) >= cfg.HeartbeatEvery/2 {
		m.lastSend = now
		m.resend()
	}
}

// detect is the failure detector's pass over the members: suspect after
// DeadAfter/2 of silence, dead after DeadAfter, forgotten after
// ForgetAfter. It sets detectAt to the next time a threshold can be
// crossed, so that the per-input tick does not walk every member.
func (m *mesh) detect(now time.Time) {
	cfg := &m.n.cfg
	next := now.Add(cfg.ForgetAfter)
	for _, id := range m.memberIDs() {
		mb := m.members[id]
		if id == cfg.ID {
			continue
		}
		silent := now.Sub(mb.heard)
		switch {
		case silent >= cfg.ForgetAfter:
			m.forget(id, now)
			continue
		case silent >= cfg.DeadAfter && mb.state != PeerDead:
			mb.state, mb.deadSince = PeerDead, now
			m.prefDirty = true
			m.n.log.Warn("peer dead", keyPeer, id, "silent", silent)
			m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == id })
		case silent >= cfg.DeadAfter/2 && silent < cfg.DeadAfter && mb.state == PeerAlive:
			mb.state = PeerSuspect
		}
		next = earliest(next, mb.heard.Add(cfg.ForgetAfter))
		if mb.state != PeerDead {
			next = earliest(next, mb.heard.Add(cfg.DeadAfter))
		}
		if mb.state == PeerAlive {
			next = earliest(next, mb.heard.Add(cfg.DeadAfter/2))
		}
	}
	m.detectAt = next
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// loadJumped reports a large change of this node's READY count since the
// last heartbeat (work arrived, or ran out): idle peers should not wait a
// whole heartbeat interval to learn of it (docs/design.md, W3). Rate-limited.
func (m *mesh) loadJumped(now time.Time) bool {
	if now.Sub(m.lastBeat) < eagerBeatEvery {
		return false
	}
	ready := 0
	for _, i := range m.n.held {
		if p := m.n.parts[i]; p.serving {
			ready += p.shard.ReadyLen()
		}
	}
	jump := max(m.n.cfg.Slots, 4)
	return (ready > 0) != (m.lastReady > 0) || ready-m.lastReady > jump || m.lastReady-ready > jump*4
}

// eagerBeatEvery bounds the heartbeats sent on load changes.
const eagerBeatEvery = 50 * time.Millisecond

// memberIDs returns the member ids, sorted. The slice is cached until the
// membership changes: callers must not modify it.
func (m *mesh) memberIDs() []string {
	if m.ids == nil {
		m.ids = slices.Sorted(maps.Keys(m.members))
	}
	return m.ids
}

func (m *mesh) heartbeat() Message {
	st := m.n.Stats()
	hb := &Heartbeat{
		Boot: m.n.cfg.Boot, Partitions: m.n.cfg.Partitions, Addrs: m.n.cfg.Addrs,
		Load: Load{Ready: st.Ready, Running: st.Running, Slots: st.Slots}, Draining: m.n.draining,
		Members: m.memberIDs(), Forgotten: slices.Sorted(maps.Keys(m.forgotten)),
		Labels: m.members[m.n.cfg.ID].labelList, Stranded: st.Stranded, Features: Features,
		Workers: m.n.workerAds(),
	}
	if st.Stranded > 0 {
		hb.StrandedFor = m.strandedFor()
	}
	return Message{Type: MsgHeartbeat, From: m.n.cfg.ID, Heartbeat: hb}
}

// maxStrandedFor caps the peers a heartbeat names for its stranded tasks;
// past it, it names none and any peer may ask.
const maxStrandedFor = 32

// strandedFor returns the live members, not draining, that may run some of
// the READY tasks this node holds but may not run itself, sorted; nil when
// there are more than maxStrandedFor.
func (m *mesh) strandedFor() []string {
	var cands []shard.Placement
	for _, id := range m.memberIDs() {
		if mb := m.members[id]; id != m.n.cfg.ID && mb.state != PeerDead && !mb.draining {
			cands = append(cands, shard.Placement{Peer: id, Labels: mb.labels})
		}
	}
	var runners map[string]bool
	for _, i := range m.n.held {
		if p := m.n.parts[i]; p.serving {
			runners = p.shard.StrandedRunners(m.n.placement, cands, runners)
		}
	}
	if len(runners) > maxStrandedFor {
		return nil
	}
	return slices.Sorted(maps.Keys(runners))
}

func (m *mesh) rebuildRing() {
	ids := m.memberIDs()
	peers := make([]ring.PeerID, len(ids))
	for i, id := range ids {
		peers[i] = ring.PeerID(id)
	}
	cfg := ring.DefaultConfig()
	cfg.Partitions, cfg.Replicas = m.n.cfg.Partitions, m.n.cfg.Replicas
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

func (m *mesh) computePreferred() {
	m.prefDirty = false
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
	for _, v := range p.conf.GetVoters() {
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

func (m *mesh) add(mb *member) {
	m.ids = nil
	m.version++
	m.members[mb.id] = mb
	m.byRaft[RaftID(mb.id)] = mb.id
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
			if m.n.now.Sub(p.abdicatedAt) >= abdicateQuiet*m.n.cfg.DeadAfter {
				m.n.resumeLeading(p)
			}
			return
		}
		if m.n.abdicate(p) {
			return
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
		if want != "" && want != self && m.n.now.Sub(p.leadSince) >= transferHold && m.caughtUp(p, want) {
			p.transferAt = m.n.now
			clear(p.acked) // after an aborted transfer, the lease starts again
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
	if st.Lead != raft.None && known && m.live(lead) && !silent {
		p.campaignAt = time.Time{}
		return
	}
	if !slices.Contains(p.conf.GetVoters(), m.n.raftID) {
		return // a learner does not campaign
	}
	if m.n.draining && want != "" {
		return // a draining peer campaigns only when nobody else can
	}
	if p.campaignAt.IsZero() {
		// The preferred owner goes first, after a seeded jitter so that
		// peers that briefly disagree do not duel. Any other voter follows
		// later: the preferred owner's log may be behind the others' (its
		// vote is then refused), and a partition must not stay leaderless.
		delay := time.Duration(m.n.cfg.Rand.Int64N(int64(300 * time.Millisecond)))
		if want != self {
			delay += campaignFallback + time.Duration(m.n.cfg.Rand.Int64N(int64(campaignFallback)))
		}
		// A restarted peer may have answered the leader's heartbeat just
		// before it died, and its vote for itself would break that
		// promise (see leaderLease): it waits out the lease window.
		p.campaignAt = later(m.n.now.Add(delay), m.n.bootAt.Add(m.n.leaseWindow()))
		return
	}
	if !m.n.now.Before(p.campaignAt) {
		p.campaignAt = time.Time{}
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

// campaignFallback is how long a voter that is not the preferred owner
// waits before campaigning for a leaderless partition.
const campaignFallback = 1500 * time.Millisecond

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
	voters, learners := p.conf.GetVoters(), p.conf.GetLearners()
	if len(p.conf.GetVotersOutgoing()) > 0 {
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
	if len(learners) > 0 { // Status allocates: only when a learner may be promoted
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
				return
			case len(ready) == 1 && len(behind) > 0:
				return
			}
		}
		for _, rid := range ready {
			if m.liveQuorum(append(slices.Clone(voters), rid)) {
				m.confChange(p, pb.ConfChangeAddNode, rid)
				return
			}
		}
	}
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
		// A dead voter too: with it the quorum is no harder to reach than
		// without it (the live ones are needed either way), it may come
		// back, and its replacement, once promoted, makes the removal
		// safe (the simulator's seed 939 lost a partition that went to
		// two voters so, then lost one of them).
		if len(voters) <= len(replicas) {
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
	cc := &pb.ConfChangeV2{Transition: pb.ConfChangeTransition_ConfChangeTransitionAuto.Enum()}
	for _, rid := range rids {
		cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(rid)})
	}
	if err := p.rn.ProposeConfChange(cc); err != nil {
		return
	}
	p.confAt = m.n.now
	m.n.markDirty(p.id)
	m.n.log.Debug("replica change proposed", keyPart, p.id, "change", "promote (joint)", "replicas", len(rids))
}

func (m *mesh) confChange(p *partition, t pb.ConfChangeType, rid uint64) {
	cc := &pb.ConfChange{Type: t.Enum(), NodeId: new(rid)}
	if err := p.rn.ProposeConfChange(cc); err != nil {
		return
	}
	p.confAt = m.n.now // cleared when a conf change applies
	m.n.markDirty(p.id)
	id, _ := m.peerOf(rid)
	m.n.log.Debug("replica change proposed", keyPart, p.id, "change", t.String(), keyPeer, id)
}

// RingCache remembers the last few rings built and preferred-owner passes
// computed, keyed by their inputs, for nodes of one process that share it
// (NodeConfig.Rings). Rings are immutable (ring.Ring), and the owner lists
// it returns are only read. Safe for concurrent use; a nil *RingCache
// computes everything afresh.
type RingCache struct {
	mu    sync.Mutex
	rings []cachedRing
	prefs []cachedPreferred
}

// ringCacheSize bounds each list of the cache: a mesh converges on one
// membership, so a few entries catch nearly every repeat.
const ringCacheSize = 4

type cachedRing struct {
	cfg     ring.Config
	epoch   ring.Epoch
	members []ring.PeerID
	r       *ring.Ring
}

type cachedPreferred struct {
	r     *ring.Ring
	alive []bool // by member of r
	out   []ring.PeerID
}

// NewRingCache returns an empty cache.
func NewRingCache() *RingCache { return &RingCache{} }

func (c *RingCache) build(cfg ring.Config, epoch ring.Epoch, members []ring.PeerID) (*ring.Ring, error) {
	if c == nil {
		return ring.New(cfg, epoch, members)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.rings {
		if e.cfg == cfg && e.epoch == epoch && slices.Equal(e.members, members) {
			return e.r, nil
		}
	}
	r, err := ring.New(cfg, epoch, members)
	if err != nil {
		return nil, err
	}
	c.rings = pushBounded(c.rings, cachedRing{cfg: cfg, epoch: epoch, members: slices.Clone(members), r: r})
	return r, nil
}

func (c *RingCache) preferredOwners(r *ring.Ring, live func(ring.PeerID) bool) []ring.PeerID {
	if c == nil {
		return r.PreferredOwners(live)
	}
	members := r.Members()
	alive := make([]bool, len(members))
	for i, id := range members {
		alive[i] = live(id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.prefs {
		if e.r == r && slices.Equal(e.alive, alive) {
			return e.out
		}
	}
	out := r.PreferredOwners(func(id ring.PeerID) bool {
		i, _ := slices.BinarySearch(members, id)
		return alive[i]
	})
	c.prefs = pushBounded(c.prefs, cachedPreferred{r: r, alive: alive, out: out})
	return out
}

// pushBounded appends e, dropping the oldest entry beyond ringCacheSize.
func pushBounded[T any](list []T, e T) []T {
	if len(list) >= ringCacheSize {
		list = append(list[:0], list[1:]...)
	}
	return append(list, e)
}

// abdicate makes leader p give up serving when no majority of its voters
// (itself included) answered it for DeadAfter, once it has led that long:
// it cannot commit, and while they still hear its heartbeats (the link
// to it is cut, the one from it is not) they elect nobody else. It stops
// serving (requests fail, clients retry elsewhere) and stops sending
// appends and heartbeats; the voters find it silent for DeadAfter and
// elect another, whose later term ends this leadership when it is heard.
// Its read lease (leaseHeld) ran out DeadAfter/2 after the last answers,
// so nothing it answered can be stale. Reports whether it abdicated.
func (n *Node) abdicate(p *partition) bool {
	dead := n.cfg.DeadAfter
	if n.now.Sub(p.leadSince) < dead {
		return false
	}
	answered := func(voters []uint64) bool {
		ok := 0
		for _, v := range voters {
			if at, found := p.acked[v]; v == n.raftID || (found && n.now.Sub(at) < dead) {
				ok++
			}
		}
		return ok > len(voters)/2
	}
	in, out := p.conf.GetVoters(), p.conf.GetVotersOutgoing()
	if answered(in) && (len(out) == 0 || answered(out)) {
		return false
	}
	// Silence helps only if the others can elect a leader without this
	// one's vote: not in a joint configuration whose old half is this
	// voter alone (a lone voter growing to three), for one.
	electable := func(voters []uint64) bool {
		others := 0
		for _, v := range voters {
			if v != n.raftID {
				others++
			}
		}
		return others > len(voters)/2
	}
	if !electable(in) || len(out) > 0 && !electable(out) {
		return false
	}
	p.abdicated, p.abdicatedAt = true, n.now
	n.stats.Abdications++
	if p.rn.BasicStatus().LeadTransferee != raft.None {
		p.rn.TransferLeader(n.raftID) // aborts it: Raft refuses proposals while it lasts
	}
	n.stopServing(p)
	n.markDirty(p.id)
	lvl := slog.LevelWarn
	if p.abdications++; p.abdications > 1 {
		lvl = slog.LevelDebug // again, after resuming to no answers: said once
	}
	n.cfg.Logger.Log(context.Background(), lvl, "partition leader abdicated: no majority of its voters answered", "partition", p.id,
		"voters", in, "outgoing", out, "for", dead, "times", p.abdications)
	return true
}

// abdicateQuiet is how long, in DeadAfters, an abdicated leader stays
// silent: DeadAfter for the voters to find it silent, and as long again to
// elect another.
const abdicateQuiet = 2

// resumeLeading ends an abdication that no later term ended: nobody else
// could be elected (the others are learners, in a joint configuration
// only this leader's vote counts, or they are down). The leader sends
// again and proposes an empty entry; it serves again once that commits
// (maybeServe), which needs a majority's answers, and may abdicate again a
// DeadAfter later.
func (n *Node) resumeLeading(p *partition) {
	if p.rn.BasicStatus().LeadTransferee != raft.None {
		p.rn.TransferLeader(n.raftID)
	}
	n.markDirty(p.id)
	if err := p.rn.Propose(nil); err != nil {
		// Stay silent another quiet period, and try again then.
		p.abdicatedAt = n.now
		n.cfg.Logger.Warn("partition leader could not resume", "partition", p.id, "err", err)
		return
	}
	p.abdicated = false
	p.leadSince = n.now
	clear(p.acked)
	// Its appends were held back: replicate from what each replica
	// answers, not from what Raft believes it sent.
	for _, id := range append(slices.Clone(p.conf.GetVoters()), p.conf.GetLearners()...) {
		if id != n.raftID {
			p.rn.ReportUnreachable(id)
		}
	}
	n.cfg.Logger.Debug("partition leader resumed after abdicating: nobody else was elected", "partition", p.id)
}

// leaderTraffic reports whether a Raft message is a leader's replication
// (appends, heartbeats, snapshots), which an abdicated leader holds back.
func leaderTraffic(t pb.MessageType) bool {
	return t == pb.MsgApp || t == pb.MsgHeartbeat || t == pb.MsgSnap
}
