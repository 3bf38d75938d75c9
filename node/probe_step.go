package node

import (
	"errors"
	"time"
)

// stepProbe handles a MsgProbe from a member (Step refused it from anyone
// else): it learns the sender's incarnation, features and load, applies the
// updates it carries, and answers a ping, runs an indirect ping, relays or
// takes an ack.
func (n *Node) stepProbe(from string, p *Probe) error {
	if p == nil {
		return errors.New("peer: step: probe without body")
	}
	m := &n.mesh
	mb := m.members[from]
	if p.Inc > mb.inc {
		mb.inc = p.Inc
	}
	mb.features, mb.featured = p.Features, true
	if p.Version != "" {
		mb.setVersion(p.Version) // a plain probe's: no heartbeat may come
	}
	m.setLegacy(mb, false, n.now)
	n.steal.Observe(from, p.Load, n.now)
	for _, u := range p.Updates {
		m.apply(u, n.now)
	}
	switch p.Kind {
	case ProbePing:
		ack := &Probe{Kind: ProbeAck, Seq: p.Seq, Plain: m.plainTo(mb)}
		if m.beatBack {
			ack.Beat = m.beatFor(0) // the ping's heartbeat asked for ours
		}
		m.sendProbe(from, ack)
	case ProbeReq:
		t := m.members[p.Target]
		if t == nil || p.Target == n.cfg.ID || p.Target == from || len(m.sw.relays) >= maxRelays {
			break
		}
		m.sw.seq++
		m.sw.relays[m.sw.seq] = relay{origin: from, seq: p.Seq, target: p.Target, at: n.now}
		m.sendProbe(p.Target, &Probe{Kind: ProbePing, Seq: m.sw.seq})
	case ProbeAck:
		if r, ok := m.sw.relays[p.Seq]; ok && r.target == from {
			delete(m.sw.relays, p.Seq)
			m.sendProbe(r.origin, &Probe{Kind: ProbeAck, Seq: r.seq, Target: from})
		} else if pr := &m.sw.probe; pr.target != "" && pr.seq == p.Seq && (from == pr.target || p.Target == pr.target) {
			pr.acked = true
		}
	}
	if p.Load.Ready > 0 {
		n.maybeSteal()
	}
	return nil
}

// apply merges one membership update heard second-hand. Updates about this
// peer are refuted; a peer forgotten here stays forgotten; a new peer must
// pass ValidID; a forget applies only to a peer that is not alive here (as
// a heartbeat's Forgotten list).
func (m *mesh) apply(u Update, now time.Time) {
	cfg := &m.n.cfg
	if u.ID == cfg.ID {
		if u.State == PeerSuspect || u.State == PeerDead {
			// At this peer's incarnation or above: raise it. Below: the
			// accuser, and whoever takes its word, missed the last
			// refutation (a third peer that knows only the older
			// incarnation would time the suspicion out): say it again.
			m.refute(now, u.Inc >= m.sw.inc)
		}
		return
	}
	if m.forgotten[u.ID] || (cfg.ValidID != nil && !cfg.ValidID(u.ID)) {
		return
	}
	mb := m.members[u.ID]
	if m.isRefused(u.ID, u.Boot) && u.State != peerForgotten {
		return // its heartbeat was refused here: dead here until one is taken
	}
	if u.State == peerForgotten {
		switch {
		case mb == nil:
		case mb.state != PeerAlive:
			m.forget(u.ID, now)
		default:
			m.forgetLater(mb)
		}
		return
	}
	if mb == nil {
		if u.State != PeerAlive {
			return
		}
		m.add(&member{id: u.ID, boot: u.Boot, inc: u.Inc, heard: m.instant(now), state: PeerAlive, addrs: u.Addrs})
		m.changedAt = now
		m.enqueue(u)
		return
	}
	sameRun := u.Boot == "" || mb.boot == "" || u.Boot == mb.boot
	switch u.State {
	case PeerAlive:
		if len(mb.addrs) == 0 && sameRun {
			m.setAddrs(mb, u.Addrs) // learned from a list: now reachable
		}
		if u.Inc <= mb.inc {
			return
		}
		quiet := m.quietInc(mb, sameRun)
		mb.inc = u.Inc
		if quiet {
			return
		}
		if len(u.Addrs) > 0 {
			m.setAddrs(mb, u.Addrs) // its own, at a newer incarnation
		}
		if !sameRun {
			old := mb.id + "#" + mb.boot
			mb.boot = u.Boot
			if !m.twinStands(mb.id, now) { // two processes: no restart (twins.go)
				m.expireHolders(func(h string) bool { return h == old })
				m.newRun(mb, now)
			}
		}
		if mb.state != PeerAlive {
			m.prefDirty = m.prefDirty || mb.state == PeerDead
			mb.state = PeerAlive
		}
	case PeerSuspect, PeerDead:
		// A claim about another run, or an old one, is stale. One about a
		// peer this one heard from lately, or whose run it does not know,
		// is doubted: it only starts a suspicion here, which a message from
		// the peer clears (the claim may be about its former run).
		if !sameRun || u.Inc < mb.inc {
			return
		}
		doubt := mb.boot == "" || now.Sub(m.at(mb.heard)) < cfg.SuspectFor && !m.lost(mb)
		switch {
		case mb.state == PeerAlive:
			mb.inc = u.Inc
			m.suspect(mb, now, false)
		case mb.state == PeerSuspect && u.State == PeerDead && !doubt:
			mb.inc = u.Inc
			m.markDead(mb, now)
			m.enqueue(u)
		}
		return
	default:
		return
	}
	m.enqueue(u)
}

// quietInc reports whether learning mb's incarnation (of the run this
// peer knows) is no news to spread: mb came from a membership list and is
// alive here, as it is at the peers whose lists named it, so an update
// that only gives its incarnation changes nothing there. Spread anyway,
// the incarnations of a mesh of N peers started together were N^2
// updates, each sent retransmits times by every peer: at 1,000 peers every
// peer's queue of news stayed full for its first 15 minutes, and every
// probe carried eight updates that changed nothing.
func (m *mesh) quietInc(mb *member, sameRun bool) bool {
	quiet := mb.listed && mb.inc == 0 && mb.state == PeerAlive && sameRun
	mb.listed = false
	return quiet
}

// heartbeatSWIM is the probe protocol's part of a heartbeat: the sender's
// incarnation (a newer one is news for the others: a join, a restart),
// whether it speaks probes, and an answer to a Sync request.
func (m *mesh) heartbeatSWIM(mb *member, hb *Heartbeat, now time.Time) {
	mb.beat = true
	if hb.Inc > mb.inc {
		quiet := m.quietInc(mb, true)
		mb.inc = hb.Inc
		if !quiet {
			m.enqueue(Update{ID: mb.id, Boot: hb.Boot, Inc: hb.Inc, State: PeerAlive, Addrs: hb.Addrs})
		}
	}
	m.learnAddrs(mb, hb.Book)
	m.setLegacy(mb, hb.Features&FeatureProbe == 0, now)
	switch hb.Sync {
	case SyncPull:
		m.sendBeat(mb.id, 0)
	case SyncJoin:
		// A peer that knows no member yet: about probeHelpers of the
		// members that know more answer it (the request goes to all).
		if len(m.members) > len(hb.Members) && m.n.cfg.Rand.Float64()*float64(len(m.members)-1) < probeHelpers {
			m.sendBeat(mb.id, 0)
		}
	}
}

// wantBeat asks mb for its heartbeat when none came yet (a member learned
// second-hand, or whose gossiped heartbeat was lost): its labels and
// addresses come only with it.
func (m *mesh) wantBeat(mb *member, now time.Time) {
	if !m.beatWanted(mb, now) {
		return
	}
	mb.askedAt = m.instant(now)
	m.sendBeat(mb.id, SyncPull)
}

// beatWanted reports whether wantBeat would ask mb for its heartbeat now.
func (m *mesh) beatWanted(mb *member, now time.Time) bool {
	return !mb.beat && m.swimOn() && (mb.askedAt == 0 || now.Sub(m.at(mb.askedAt)) >= m.n.cfg.HeartbeatEvery)
}

// introduce answers a probe from a peer that is not a member (it restarted
// and lost its membership, or this peer did: neither heartbeats to
// everyone any more) with this peer's heartbeat and a SyncPull, at most
// once per ProbeEvery: its heartbeat in return makes it a member, as any
// heartbeat would. The probe itself is refused (Step).
func (m *mesh) introduce(to string, now time.Time) {
	if !m.swimOn() || m.forgotten[to] || m.n.cfg.ValidID != nil && !m.n.cfg.ValidID(to) ||
		!m.sw.introducedAt.IsZero() && now.Sub(m.sw.introducedAt) < m.n.cfg.ProbeEvery {
		return
	}
	m.sw.introducedAt = now
	m.sendBeat(to, SyncPull)
}

// sendBeat sends this peer's heartbeat to one member.
func (m *mesh) sendBeat(to string, sync uint8) {
	m.sendHeartbeat(to, m.beatFor(sync))
}

// sendHeartbeat sends hb to one member.
func (m *mesh) sendHeartbeat(to string, hb *Heartbeat) {
	m.n.rd.Messages = append(m.n.rd.Messages, Envelope{To: to, Msg: Message{Type: MsgHeartbeat, From: m.n.cfg.ID, Heartbeat: hb}})
}

// beatFor returns this peer's heartbeat for one member, with sync and the
// address book.
func (m *mesh) beatFor(sync uint8) *Heartbeat {
	hb := m.heartbeat().Heartbeat
	hb.Sync = sync
	hb.Book = m.book()
	return hb
}

// stepProbeBeat steps a probe that carries its sender's heartbeat
// (Probe.Beat): the heartbeat first, as if it had come alone (it makes a
// stranger a member, or is refused with its checks), then the probe. A
// SyncPull on a ping is answered in the ProbeAck rather than by a
// heartbeat of its own. Neither is copied but the heartbeat of such a
// ping (its Sync changes): at 1,000 idle peers, where most probes are
// first contacts, the copies were a third of what a probe allocated.
func (n *Node) stepProbeBeat(from string, p *Probe) error {
	hb := p.Beat
	pull := hb.Sync == SyncPull && p.Kind == ProbePing
	if pull { // answered in the ack, not by a heartbeat of its own
		c := *hb
		c.Sync, hb = 0, &c
	}
	if err := n.Step(from, Message{Type: MsgHeartbeat, From: from, Heartbeat: hb}); err != nil {
		return err
	}
	n.mesh.beatBack = pull
	defer func() { n.mesh.beatBack = false }()
	return n.step(from, Message{Type: MsgProbe, From: from, Probe: p}, true)
}

// pushPull exchanges membership lists with one random live member
// (anti-entropy: what piggybacking lost, a forget, a member learned late).
func (m *mesh) pushPull() {
	ids := m.memberIDs()
	for range 4 {
		if len(ids) < 2 {
			return
		}
		id := ids[m.n.cfg.Rand.IntN(len(ids))]
		if id != m.n.cfg.ID && m.members[id].state == PeerAlive {
			m.sendBeat(id, SyncPull)
			return
		}
	}
}

// beatDue reports whether to gossip a heartbeat now. Under the probe
// protocol: at start, every HeartbeatEvery while this peer knows no member
// (it looks for the mesh), when what it advertises changes (draining,
// READY work or none, stranded tasks or none), every HeartbeatEvery while it
// holds stranded tasks or has external workers (their demand), and soon
// after its workers' demand changed. Otherwise, every HeartbeatEvery and on
// load jumps, as before.
func (m *mesh) beatDue(now time.Time) bool {
	cfg := &m.n.cfg
	since := now.Sub(m.lastBeat)
	switch {
	case m.n.ext.beatSoon && since >= workerBeatEvery:
		return true
	case !m.swimOn():
		return since >= cfg.HeartbeatEvery || m.loadJumped(now)
	case m.lastBeat.IsZero():
		return true
	case len(m.members) <= 1:
		return since >= cfg.HeartbeatEvery
	case since < eagerBeatEvery:
		return false
	}
	ready, stranded := m.n.readyLoad()
	if m.beatSig(ready, stranded) != m.sw.sig {
		return true
	}
	return since >= cfg.HeartbeatEvery && m.beatsPeriodically(stranded)
}

// beatsPeriodically reports whether this peer heartbeats every
// HeartbeatEvery under the probe protocol: while it knows no member, holds
// stranded tasks, drains, or has external workers.
func (m *mesh) beatsPeriodically(stranded int) bool {
	return len(m.members) <= 1 || stranded > 0 || m.n.draining || len(m.n.workerAds()) > 0
}

// swimDeadline is when the probe protocol next has work: the next period,
// the indirect pings of the current probe, a heartbeat due.
func (m *mesh) swimDeadline() time.Time {
	cfg := &m.n.cfg
	var d time.Time
	if len(m.members) > 1 { // a lone peer probes no one
		d = m.sw.lastProbe.Add(cfg.ProbeEvery)
	} else {
		d = m.n.now.Add(cfg.ForgetAfter) // nothing sooner
	}
	if pr := m.sw.probe; pr.target != "" && !pr.acked && !pr.indirect {
		d = earliest(d, pr.at.Add(cfg.ProbeEvery/2))
	}
	ready, stranded := m.n.readyLoad()
	if len(m.members) > 1 && m.beatSig(ready, stranded) != m.sw.sig || m.lastBeat.IsZero() {
		d = earliest(d, m.lastBeat.Add(eagerBeatEvery)) // as beatDue decides
	}
	if m.beatsPeriodically(stranded) {
		d = earliest(d, m.lastBeat.Add(cfg.HeartbeatEvery))
	}
	if m.sw.refuteHeld {
		d = earliest(d, m.sw.refutedAt.Add(eagerBeatEvery))
	}
	return d
}

// beatSig is what beatDue compares with what the last heartbeat
// advertised (m.sw.sig): draining, READY work offered to thieves, tasks
// stranded here.
func (m *mesh) beatSig(ready, stranded int) uint64 {
	var b uint64
	if m.n.draining {
		b |= sigDraining
	}
	if m.offers(ready) {
		b |= sigOffers
	}
	if stranded > 0 {
		b |= sigStranded
	}
	// A new recover mark (needle forget --unsafe-recover) goes out at
	// once: the peers that hold a lost voter's partitions recover them;
	// so does a change of this peer's recover claims (0 without any).
	return (b | uint64(len(m.recover))<<sigRecoverShift) ^ m.claimSig<<sigClaimShift
}

const (
	sigDraining uint64 = 1 << iota
	sigOffers
	sigStranded
	// sigRecoverShift places the number of recover marks in the signature.
	sigRecoverShift = 8
	// sigClaimShift places the digest of the recover claims above it.
	sigClaimShift = 24
)

// offers reports whether this peer's heartbeat should advertise its ready
// READY tasks to thieves. A heartbeat goes to every member, so an offer
// costs the mesh's size in messages, and at 1,000 peers a peer that
// offered every small backlog (a group of 100 1 ms tasks, 50 ms of its own
// two slots) sent most of the mesh's messages. It offers a backlog that is
// worth the broadcast: at least one task per member it reaches, or one
// that its own slots take offerWorth or more to drain, at the run time it
// has measured (before it has timed a task, only the first rule holds).
// Smaller backlogs are found by the thieves' blind asks and the loads
// probes carry, or run here. An offer made stands until the queue
// empties, so that the advertisement does not flap with the measure.
func (m *mesh) offers(ready int) bool {
	switch {
	case ready <= 0:
		return false
	case m.sw.sig&sigOffers != 0 || ready >= len(m.members)-1:
		return true
	}
	run, slots := m.n.pace.run, max(m.n.cfg.Slots, 1)
	return run > 0 && time.Duration(run*float64(ready)/float64(slots)) >= offerWorth
}

// offerWorth is the backlog, in this peer's slot time, worth offering to
// a mesh too large for one task per member (offers).
const offerWorth = 100 * time.Millisecond
