package node

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Membership and failure detection in O(1) messages per peer per period,
// whatever the size of the mesh (SWIM: Das, Gupta and Motivala, 2002; the
// design of hashicorp/memberlist). Every ProbeEvery a peer pings one member,
// round-robin over a shuffled list; a member that does not answer within
// half a period is pinged through probeHelpers others (ProbeReq); one that
// answers neither way by the end of the period is suspected. A suspicion
// goes to every peer (gossip) and rides on probes; the suspect refutes it by
// raising its incarnation; a suspicion not refuted within SuspectFor makes
// the peer dead. Any direct message from a peer (Raft, outcomes, steals,
// probes) proves it alive: a target heard within the last period is not
// pinged. Membership changes (a join, a suspicion, a death, a refutation, a
// forget) ride on probes and acks, the least-sent first, each until it went
// out retransmitMult*ceil(log10(N+1)) times.
//
// Heartbeats no longer go to every peer every second: a peer gossips one
// when it starts (and, while it knows no member, every HeartbeatEvery), when
// what it advertises changes (addresses, labels, features, draining, worker
// ads, whether it holds stranded tasks, whether it has READY work), and
// every HeartbeatEvery while it holds stranded tasks or has external
// workers. Every syncEvery it exchanges heartbeats (membership lists) with
// one random member (anti-entropy). While a live member lacks FeatureProbe
// (a peer of the previous release), or with ProbeEvery 0, every peer
// heartbeats every HeartbeatEvery and silence decides death, as before.

// FeatureProbe is not an event: the peer answers probes (MsgProbe) and
// heartbeats only on change. While a live member lacks it, every peer
// heartbeats every HeartbeatEvery as before.
const FeatureProbe = FeatureLeave << 1

// probeHelpers is k: the members asked to ping a silent target.
const probeHelpers = 3

// maxPiggyback bounds the updates one probe carries.
const maxPiggyback = 8

// retransmitMult is lambda: each update goes out lambda*ceil(log10(N+1))
// times.
const retransmitMult = 4

// maxNews bounds the updates waiting to be sent (the least-sent are kept).
const maxNews = 512

// maxRelays bounds the indirect pings this peer runs for others at once.
const maxRelays = 64

// syncEvery is how often a peer exchanges its membership list with one
// random member.
const syncEvery = 30 * time.Second

// swim is the failure detector's state (mesh.sw).
type swim struct {
	inc       uint64    // this peer's incarnation
	order     []*member // probe order: the members, shuffled
	next      int       // next index in order
	seq       uint64
	probe     probing
	lastProbe time.Time
	relays    map[uint64]relay  // indirect pings run for others, by the seq sent
	silent    map[int]time.Time // per partition, the leaderHeard of the silence silentLeader acted on
	news      []*news           // updates to piggyback
	newsBy    map[string]*news  // news by the member it is about
	newsTmp   []*news           // piggyback's scratch: the updates sent
	legacy    int               // live members that lack FeatureProbe
	sig       uint64            // what the last heartbeat advertised (beatSig)
	lastSync  time.Time
	refutedAt time.Time
	// refuteHeld: a refutation waits for the rate limit (refuteDue).
	refuteHeld bool
	// introducedAt is when this peer last answered a stranger's probe
	// (introduce).
	introducedAt time.Time
	// urgent is a member whose connection closed while another was being
	// probed: the next period probes it.
	urgent string
}

// probing is the probe of the current period.
type probing struct {
	target   string
	seq      uint64
	at       time.Time
	acked    bool
	indirect bool
}

type relay struct {
	origin string
	seq    uint64
	target string
	at     time.Time
}

type news struct {
	u    Update
	sent int
}

// swimOn reports whether the mesh runs the probe protocol (no member of the
// previous release, ProbeEvery set).
func (m *mesh) swimOn() bool { return m.n.cfg.ProbeEvery > 0 && m.sw.legacy == 0 }

// setLegacy records whether a member speaks only heartbeats (it lacks
// FeatureProbe). Entering legacy mode gives every member a fresh silence
// window: the silence-based detector must not judge the quiet of the probe
// protocol.
func (m *mesh) setLegacy(mb *member, legacy bool, now time.Time) {
	if mb.legacy == legacy {
		return
	}
	mb.legacy = legacy
	was := m.swimOn()
	if legacy {
		m.sw.legacy++
	} else {
		m.sw.legacy--
	}
	if was && !m.swimOn() {
		for _, o := range m.members {
			o.heard = m.instant(later(m.at(o.heard), now))
		}
		m.detectAt = time.Time{}
	}
}

// probeTick runs the probe protocol: indirect pings for a target silent for
// half a period, and at each period's end the verdict on the last probe and
// the next probe.
func (m *mesh) probeTick(now time.Time) {
	cfg := &m.n.cfg
	sw := &m.sw
	if len(sw.relays) > 0 { // starting a walk of an empty map is not free
		for seq, r := range sw.relays {
			if now.Sub(r.at) >= cfg.ProbeEvery {
				delete(sw.relays, seq)
			}
		}
	}
	m.refuteDue(now)
	pr := &sw.probe
	if pr.target != "" && !pr.acked && !pr.indirect && now.Sub(pr.at) >= cfg.ProbeEvery/2 {
		pr.indirect = true
		if mb := m.members[pr.target]; mb != nil && m.heardLately(mb, now) {
			pr.acked = true // it spoke (Raft, an outcome): alive
		} else {
			m.askHelpers(pr)
		}
	}
	if now.Sub(sw.lastProbe) < cfg.ProbeEvery {
		return
	}
	if pr.target != "" && !pr.acked {
		if mb := m.members[pr.target]; mb != nil && mb.state == PeerAlive && !m.heardLately(mb, now) {
			m.suspect(mb, now, true)
		}
	}
	sw.lastProbe = now
	sw.probe = probing{}
	if now.Sub(sw.lastSync) >= syncEvery {
		sw.lastSync = now
		m.pushPull()
	}
	// A member that spoke lately (Raft among replicas, its own probes) is
	// alive: the period goes to the next one. Not while there is news to
	// spread: membership changes ride on probes alone, and while Raft runs
	// between every pair (a forming mesh: the seed leads every partition
	// and adds the joiners) every member is heard lately, so no probe went
	// out and a join stayed with the seed: two joiners that learned the
	// seed before each other never learned each other (until the next
	// anti-entropy exchange, syncEvery later), each refused the other's
	// Raft, and requests for the partitions the other led were refused
	// with 503 (TestMeshRealPeers under load).
	if id := sw.urgent; id != "" {
		sw.urgent = ""
		if mb := m.members[id]; mb != nil && mb.state == PeerAlive && m.lost(mb) {
			m.ping(mb, now) // its connection closed during the last probe
			return
		}
	}
	var mb *member
	for range min(len(m.members), 8) {
		if mb = m.nextTarget(); mb == nil {
			return
		}
		if mb.state != PeerAlive || !m.heardLately(mb, now) || len(sw.news) > 0 {
			break
		}
		mb = nil
	}
	if mb == nil {
		return
	}
	m.ping(mb, now)
}

// ping starts the probe of mb: a ping, with this peer's heartbeat and a
// request for mb's if this peer has none of mb's yet.
func (m *mesh) ping(mb *member, now time.Time) {
	sw := &m.sw
	sw.seq++
	if mb.state != PeerDead {
		// A dead member is pinged too (if it answers it learns it is dead and
		// refutes: the two sides of a healed partition find each other), but
		// its silence changes nothing.
		sw.probe = probing{target: mb.id, seq: sw.seq, at: now}
	}
	ping := &Probe{Kind: ProbePing, Seq: sw.seq, Plain: m.plainTo(mb)}
	if !ping.Plain && m.beatWanted(mb, now) {
		// A first contact: this peer's heartbeat rides on the ping and
		// asks for mb's, which rides on the ack (stepProbeBeat).
		mb.askedAt = m.instant(now)
		ping.Beat = m.beatFor(SyncPull)
	}
	m.sendProbe(mb.id, ping)
}

// plainTo reports whether this peer's heartbeat would tell mb nothing its
// probes do not (Probe.Plain): mb has this peer's addresses from the same
// initial membership, and this peer has no labels, no external workers,
// and is not draining (its build version rides on the plain probe:
// Probe.Version). A plain ping carries no heartbeat and asks for
// none: mb's ack says whether mb is plain too, and if it is not, this
// peer asks for its heartbeat then (Node.step, wantBeat). Stranded tasks
// need no heartbeat here: a peer with some gossips its heartbeat
// periodically (beatsPeriodically).
func (m *mesh) plainTo(mb *member) bool {
	n := m.n
	return mb.initial && len(n.cfg.Labels) == 0 && !n.draining && len(n.ext.demand) == 0
}

// disconnected is Node.Disconnected: mb's last connection closed. What
// was heard from mb before no longer vouches for it (lost), and it is
// pinged at once, or at the next period when a probe of another member is
// under way; if it stays silent its suspicion is short (suspectFor).
func (m *mesh) disconnected(mb *member, now time.Time) {
	mb.lostAt = m.instant(now)
	if mb.state == PeerSuspect {
		m.detectAt = earliest(m.detectAt, m.at(mb.suspectAt).Add(m.suspectFor(mb)))
		return
	}
	if mb.state != PeerAlive {
		return
	}
	sw := &m.sw
	if pr := sw.probe; pr.target != "" && !pr.acked {
		if pr.target != mb.id {
			sw.urgent = mb.id
		}
		return
	}
	sw.lastProbe = now // the period starts with this probe
	m.ping(mb, now)
}

// lost reports whether this peer lost its connection to mb and has heard
// nothing from it since.
func (m *mesh) lost(mb *member) bool {
	return mb.lostAt != 0 && !m.at(mb.heard).After(m.at(mb.lostAt))
}

// suspectFor is how long a suspicion of mb runs before mb is dead:
// SuspectFor, or a third of it for a member lost (its connection closed,
// nothing heard since, and pings unanswered, directly and through others):
// what a process that died looks like, as its kernel closes its
// connections. A live peer whose connections all broke has that long to
// be heard again.
func (m *mesh) suspectFor(mb *member) time.Duration {
	if m.lost(mb) {
		return m.n.cfg.SuspectFor / 3
	}
	return m.n.cfg.SuspectFor
}

// heardLately reports whether a message came from mb within the last
// HeartbeatEvery: liveness evidence as good as an ack (a peer that can
// send but not hear stays alive to those it reaches, as with heartbeats).
func (m *mesh) heardLately(mb *member, now time.Time) bool {
	return now.Sub(m.at(mb.heard)) < max(m.n.cfg.HeartbeatEvery, m.n.cfg.ProbeEvery) && !m.lost(mb)
}

// nextTarget returns the next member to probe, nil when there is none.
// The order holds the members themselves (a lookup by id per probe missed
// the cache at 1,000 peers); one forgotten or replaced since is looked up.
func (m *mesh) nextTarget() *member {
	sw := &m.sw
	for range 2 {
		for sw.next < len(sw.order) {
			mb := sw.order[sw.next]
			sw.order[sw.next] = nil
			sw.next++
			if mb.gone {
				mb = m.members[mb.id]
			}
			if mb != nil {
				return mb
			}
		}
		sw.order = sw.order[:0]
		for _, id := range m.memberIDs() {
			if id != m.n.cfg.ID {
				sw.order = append(sw.order, m.members[id])
			}
		}
		m.n.cfg.Rand.Shuffle(len(sw.order), func(i, j int) { sw.order[i], sw.order[j] = sw.order[j], sw.order[i] })
		sw.next = 0
	}
	return nil
}

// askHelpers sends ProbeReq for pr's target to probeHelpers random live
// members.
func (m *mesh) askHelpers(pr *probing) {
	ids := m.memberIDs()
	if len(ids) <= 2 {
		return
	}
	asked := 0
	for try := 0; try < 4*probeHelpers && asked < probeHelpers; try++ {
		id := ids[m.n.cfg.Rand.IntN(len(ids))]
		mb := m.members[id]
		if id == m.n.cfg.ID || id == pr.target || mb.state != PeerAlive {
			continue
		}
		asked++
		m.sendProbe(id, &Probe{Kind: ProbeReq, Seq: pr.seq, Target: pr.target})
	}
}

// sendProbe fills in what every probe says of its sender and the updates it
// carries, and queues it.
func (m *mesh) sendProbe(to string, p *Probe) {
	n := m.n
	p.Boot, p.Inc, p.Features, p.Load = n.cfg.Boot, m.sw.inc, Features, n.load()
	if p.Plain {
		p.Version = m.self.version() // what its heartbeat would say more
	}
	p.Updates = m.piggyback()
	n.rd.Messages = append(n.rd.Messages, Envelope{To: to, Msg: Message{Type: MsgProbe, From: n.cfg.ID, Probe: p}})
}

// newsMessage is a gossiped probe carrying updates alone.
func (m *mesh) newsMessage(u Update) Message {
	n := m.n
	return Message{Type: MsgProbe, From: n.cfg.ID, Probe: &Probe{Kind: ProbeNews, Boot: n.cfg.Boot, Inc: m.sw.inc,
		Features: Features, Load: n.load(), Updates: []Update{u}}}
}

// retransmits is how many times an update goes out.
func (m *mesh) retransmits() int {
	return retransmitMult * int(math.Ceil(math.Log10(float64(len(m.members)+1))))
}

// enqueue queues an update to piggyback, replacing one about the same peer.
// The queue stays ordered by times sent, the order of arrival kept among
// equals, so piggyback takes its head without sorting:
// a new update goes after the others never sent, and so does a replaced
// one, which starts over.
func (m *mesh) enqueue(u Update) {
	sw := &m.sw
	if nw := sw.newsBy[u.ID]; nw != nil {
		nw.u = u
		if nw.sent > 0 {
			i := slices.Index(sw.news, nw)
			z := sw.unsent()
			copy(sw.news[z+1:i+1], sw.news[z:i])
			sw.news[z], nw.sent = nw, 0
		}
		return
	}
	if sw.newsBy == nil {
		sw.newsBy = map[string]*news{}
	}
	nw := &news{u: u}
	sw.news = slices.Insert(sw.news, sw.unsent(), nw)
	sw.newsBy[u.ID] = nw
	if len(sw.news) > maxNews {
		for _, old := range sw.news[maxNews:] {
			delete(sw.newsBy, old.u.ID)
		}
		clear(sw.news[maxNews:])
		sw.news = sw.news[:maxNews]
	}
}

// unsent returns how many queued updates were never sent: they head the
// queue.
func (sw *swim) unsent() int {
	return sort.Search(len(sw.news), func(i int) bool { return sw.news[i].sent > 0 })
}

// piggyback returns the least-sent updates, up to maxPiggyback, and counts
// them sent; an update sent retransmits times is dropped. The updates sent
// move behind the others sent as often as they now are (before those sent
// more), which keeps the queue's order: each is placed by a binary search,
// where sorting the queue of up to maxNews on every probe was a fifth of
// an idle 1,000-peer simulator run.
func (m *mesh) piggyback() []Update {
	sw := &m.sw
	if len(sw.news) == 0 {
		return nil
	}
	limit := m.retransmits()
	k := min(len(sw.news), maxPiggyback)
	out := make([]Update, 0, k)
	head := append(sw.newsTmp[:0], sw.news[:k]...)
	for _, nw := range head {
		out = append(out, nw.u)
		nw.sent++
	}
	// Merge head (ascending) into the rest (ascending): a head update
	// goes before the rest's updates sent as often.
	rest := sw.news[k:]
	w, j := 0, 0
	for _, nw := range head {
		lb := j + sort.Search(len(rest)-j, func(i int) bool { return rest[j+i].sent >= nw.sent })
		w += copy(sw.news[w:], rest[j:lb])
		j = lb
		sw.news[w] = nw
		w++
	}
	copy(sw.news[w:], rest[j:])
	clear(head)
	sw.newsTmp = head[:0]
	// The queue is ordered: the updates sent limit times (or more, when
	// the membership shrank) are its tail.
	cut := sort.Search(len(sw.news), func(i int) bool { return sw.news[i].sent >= limit })
	for _, nw := range sw.news[cut:] {
		delete(sw.newsBy, nw.u.ID)
	}
	clear(sw.news[cut:])
	sw.news = sw.news[:cut]
	return out
}

// suspect makes mb suspect; origin: this peer's own probe found it silent,
// so the suspicion is gossiped to every peer (the suspect hears it at once
// and can refute, and every peer times it out together).
func (m *mesh) suspect(mb *member, now time.Time, origin bool) {
	mb.state, mb.suspectAt = PeerSuspect, m.instant(now)
	m.detectAt = earliest(m.detectAt, now.Add(m.suspectFor(mb)))
	u := Update{ID: mb.id, Boot: mb.boot, Inc: mb.inc, State: PeerSuspect}
	m.enqueue(u)
	if origin {
		m.n.log.Info("peer suspect", keyPeer, mb.id)
		m.n.rd.Gossip = append(m.n.rd.Gossip, m.newsMessage(u))
	}
}

// markDead declares mb dead: its leases expire, it leads nothing, the
// thief forgets its load. Both failure detectors (detect, detectSWIM).
func (m *mesh) markDead(mb *member, now time.Time) {
	mb.state, mb.deadSince = PeerDead, m.instant(now)
	m.deaths++
	m.prefDirty = true
	if mb.draining {
		// It said it drains: a planned stop (a rolling restart, a
		// decommission), not a failure an operator must look into. A
		// peer killed during its drain looks the same from here.
		m.n.log.Info("peer stopped while draining", keyPeer, mb.id, "silent", now.Sub(m.at(mb.heard)))
	} else {
		m.n.log.Warn("peer dead", keyPeer, mb.id, "silent", now.Sub(m.at(mb.heard)))
	}
	m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == mb.id })
	m.n.steal.forgetLoad(mb.id)
	m.detectAt = earliest(m.detectAt, now.Add(m.n.cfg.ForgetAfter))
	if m.forgetAtDeath[mb.id] {
		m.detectAt = time.Time{} // forgotten at the next tick (forgetLater)
	}
}

// silentLeader takes Raft's silence as a hint of failure: a leader this
// replica has heard nothing at all from for DeadAfter (no Raft, no probe)
// is suspected here and the suspicion gossiped, rather than waiting for a
// probe to find it. Only a hint: this replica may have been removed from
// the partition without knowing it (its leader then sends it nothing), so
// the leader may refute.
func (m *mesh) silentLeader(p *partition, id string) {
	mb := m.members[id]
	if mb == nil || !m.swimOn() || mb.state != PeerAlive || m.n.now.Sub(m.at(mb.heard)) < m.n.cfg.DeadAfter || !m.n.replica(p) {
		return // a replica the ring moved elsewhere hears its leader no more
	}
	// Once per silence: a replica removed without knowing it stays silent
	// for good, and its leader refutes each suspicion.
	if at, ok := m.sw.silent[p.id]; ok && at.Equal(p.leaderHeard) {
		return
	}
	m.sw.silent[p.id] = p.leaderHeard
	m.suspect(mb, m.n.now, true)
}

// refute answers a suspicion or death of this peer: with raise, a higher
// incarnation; without, the current one again (the claim was about an
// older one, which some peers may still hold). Gossiped at once, at most
// once per eagerBeatEvery (a refutation held back by that limit goes out
// when it ends: refuteDue), and piggybacked.
func (m *mesh) refute(now time.Time, raise bool) {
	if raise {
		m.sw.inc = max(m.sw.inc+1, uint64(now.UnixMilli()))
	}
	u := Update{ID: m.n.cfg.ID, Boot: m.n.cfg.Boot, Inc: m.sw.inc, State: PeerAlive, Addrs: m.n.cfg.Addrs}
	m.enqueue(u)
	m.sw.refuteHeld = true
	m.refuteDue(now)
}

// refuteDue gossips a refutation held back by the rate limit once it ends.
func (m *mesh) refuteDue(now time.Time) {
	if !m.sw.refuteHeld || now.Sub(m.sw.refutedAt) < eagerBeatEvery {
		return
	}
	m.sw.refuteHeld, m.sw.refutedAt = false, now
	m.n.rd.Gossip = append(m.n.rd.Gossip, m.newsMessage(Update{ID: m.n.cfg.ID, Boot: m.n.cfg.Boot, Inc: m.sw.inc,
		State: PeerAlive, Addrs: m.n.cfg.Addrs}))
}

// detectSWIM is detect under the probe protocol: a suspicion not refuted
// within SuspectFor makes a peer dead, ForgetAfter of death forgets it.
func (m *mesh) detectSWIM(now time.Time) {
	cfg := &m.n.cfg
	next := now.Add(cfg.ForgetAfter)
	for _, id := range m.memberIDs() {
		mb := m.members[id]
		if id == cfg.ID {
			continue
		}
		switch mb.state {
		case PeerSuspect:
			if d := m.suspectFor(mb); now.Sub(m.at(mb.suspectAt)) < d {
				next = earliest(next, m.at(mb.suspectAt).Add(d))
				continue
			}
			m.markDead(mb, now)
			m.enqueue(Update{ID: id, Boot: mb.boot, Inc: mb.inc, State: PeerDead})
		case PeerDead:
			if now.Sub(m.at(mb.deadSince)) >= cfg.ForgetAfter {
				m.forget(id, now)
				continue
			}
		}
		if mb.state == PeerDead {
			if m.forgetAtDeath[id] {
				m.forget(id, now)
				continue
			}
			next = earliest(next, m.at(mb.deadSince).Add(cfg.ForgetAfter))
		}
	}
	m.detectAt = next
}
