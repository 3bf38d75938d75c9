package node

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// ErrNotMember is returned for a message from a peer outside the mesh.
var ErrNotMember = errors.New("peer: sender is not a member")

// ErrUnheard wraps ErrNotMember for a message from a peer this node has
// no heartbeat of yet. It is expected for a moment after a start: a
// restarted or joining peer hears of the others second-hand, and their
// Raft and probes reach it before their heartbeats; it asks them for one
// (introduce), and Raft resends.
var ErrUnheard = fmt.Errorf("%w yet", ErrNotMember)

// Step hands the node one message from peer from (the transport's
// authenticated id). Malformed or misdirected content is refused with an
// error and changes nothing; the node never panics on input from the
// network.
func (n *Node) Step(from string, m Message) error { return n.step(from, m, false) }

// step is Step; beatDone: m is a probe whose heartbeat (Probe.Beat) was
// stepped already (stepProbeBeat), the probe alone is left.
func (n *Node) step(from string, m Message, beatDone bool) error {
	if from == "" || from == n.cfg.ID {
		return fmt.Errorf("peer: step: bad sender %q", from)
	}
	if n.mesh.forgotten[from] {
		n.mesh.tellForgotten(from, n.now)
		return fmt.Errorf("%w: %s was forgotten", ErrNotMember, from)
	}
	if m.Type == MsgProbe && m.Probe != nil && m.Probe.Beat != nil && !beatDone {
		return n.stepProbeBeat(from, m.Probe)
	}
	boot := ""
	mb := n.mesh.members[from] // nil: not a member (yet)
	if m.Type == MsgHeartbeat {
		if m.Heartbeat == nil {
			return errors.New("peer: step: heartbeat without body")
		}
		if err := n.checkBeat(from, m.Heartbeat); err != nil {
			n.mesh.refuse(from, m.Heartbeat, n.now)
			return err
		}
		delete(n.mesh.refused, from)
		boot = m.Heartbeat.Boot
	} else if _, refused := n.mesh.refused[from]; refused {
		return fmt.Errorf("%w: %s sent %v after a refused heartbeat", ErrNotMember, from, m.Type)
	} else if m.Type == MsgProbe && m.Probe != nil && mb != nil {
		boot = m.Probe.Boot
	} else if mb == nil {
		// Raft too: heard() below would make any keyed host a member
		// without the heartbeat's checks, and the ring would give it
		// partitions it never serves. A joiner's Raft traffic comes after
		// its heartbeat; one that overtakes it is resent by Raft.
		if m.Type == MsgProbe || m.Type == MsgRaft {
			// A peer that knows us while we do not know it (a probe: it
			// lost us too; Raft: it learned us second-hand and we have not
			// heard of it yet): our heartbeat with a Sync brings its own.
			n.mesh.introduce(from, n.now)
		}
		return fmt.Errorf("%w: %s sent %v before any heartbeat", ErrUnheard, from, m.Type)
	}
	if mb = n.mesh.heard(from, mb, boot, n.now); mb != nil && m.Type != MsgHeartbeat {
		if r := mb.rare; r != nil && r.pingedAt != 0 {
			r.direct = mb.heard // see votersBack
		}
		if m.Type == MsgProbe && m.Probe != nil && m.Probe.Plain && !mb.beat && len(mb.addrs) > 0 {
			// Its heartbeat would tell nothing more: nothing to ask for.
			mb.beat = true
		} else if m.Type == MsgProbe && m.Probe != nil && m.Probe.Kind == ProbePing && m.Probe.BeatFollows && !mb.beat {
			// Its heartbeat and request follow the ping: asking for it too
			// would cross them and cost two heartbeats more (a first
			// contact in four messages, not six). Asked already, as far as
			// wantBeat knows: a lost heartbeat is asked for a
			// HeartbeatEvery later.
			mb.askedAt = n.mesh.instant(n.now)
		} else {
			n.mesh.wantBeat(mb, n.now) // a member known second-hand: its labels, addresses
		}
	}
	switch m.Type {
	case MsgHeartbeat:
		return n.stepHeartbeat(from, m.Heartbeat)
	case MsgRaft:
		return n.stepRaft(from, m.Raft)
	case MsgOutcome:
		n.stepOutcomes(from, m.Outcomes)
	case MsgAck:
		n.stepAcks(from, m.Acks)
	case MsgStealReq, MsgGrant:
		return n.stepSteal(from, m)
	case MsgReplicaAsk:
		n.stepReplicaAsk(from, m.Asks)
	case MsgReplicaGone:
		n.stepReplicaGone(from, m.Gone)
	case MsgProbe:
		return n.stepProbe(from, m.Probe)
	default:
		return fmt.Errorf("peer: step: unknown message type %v", m.Type)
	}
	return nil
}

// ErrPartitions is wrapped by Fatal's error when this peer cannot join the
// mesh it was pointed at because the mesh has another partition count.
var ErrPartitions = errors.New("peer: partition count differs from the mesh's")

// ErrPlacement is wrapped by Step's error for a heartbeat from a peer that
// places with another placement than this one (NodeConfig.Placement) or
// cannot use it (an older release, with the spread placement), and by
// Fatal's when this peer is the odd one out.
var ErrPlacement = errors.New("peer: placement differs from the mesh's")

// ErrReplicas is wrapped by Step's error for a heartbeat from a peer with
// another replica count (NodeConfig.Replicas), and by Fatal's when this
// peer is the odd one out.
var ErrReplicas = errors.New("peer: replica count differs from the mesh's")

// placementMismatch refuses a heartbeat from a peer that places partitions
// otherwise: another --replicas or --placement gives other replica sets
// for every partition, so the two cannot be in one mesh. This peer stops
// (Fatal) when it is the odd one out: it has heard of no member yet, did
// not found the mesh in this run, and either joins with an empty disk (as
// for the partition count) or hears a peer that speaks for a mesh (its
// heartbeat names other members). Unlike the partition count, these flags
// are not recorded in the data dir, so a restart with other flags is the
// likely way to get them wrong: a restarted peer stops too, but not on
// the word of a lone peer, which may be a misconfigured one that restarted
// at the same time.
func (n *Node) placementMismatch(from string, hb *Heartbeat) error {
	var kind error
	switch {
	case hb.Replicas != n.cfg.Replicas && hb.Placement != n.cfg.Placement:
		kind = fmt.Errorf("%w, %w", ErrReplicas, ErrPlacement)
	case hb.Replicas != n.cfg.Replicas:
		kind = ErrReplicas
	default:
		kind = ErrPlacement
	}
	err := fmt.Errorf("%w: %s places with --placement %v --replicas %d, this peer with --placement %v --replicas %d: they cannot be in one mesh",
		kind, from, hb.Placement, hb.Replicas, n.cfg.Placement, n.cfg.Replicas)
	odd := !n.founded && len(n.mesh.members) == 1 && (n.joining || len(hb.Members) >= 2)
	if odd && n.fatal == nil {
		n.fatal = fmt.Errorf("%w: the mesh places with --placement %v --replicas %d, this peer with --placement %v --replicas %d; start it with --placement %v --replicas %d",
			kind, hb.Placement, hb.Replicas, n.cfg.Placement, n.cfg.Replicas, hb.Placement, hb.Replicas)
	}
	return err
}

// partitionsMismatch refuses a heartbeat from a peer with another
// partition count. A peer that joins and has heard of no member yet is the
// odd one out: it stops (Fatal) rather than wait forever for a mesh that
// can never take it.
func (n *Node) partitionsMismatch(from string, theirs int) error {
	err := fmt.Errorf("peer: step: %s has %d partitions, this peer %d: they cannot be in one mesh", from, theirs, n.cfg.Partitions)
	if !n.cfg.Founder && len(n.mesh.members) == 1 && n.fatal == nil {
		n.fatal = fmt.Errorf("%w: the mesh has %d partitions, this peer %d (--partitions); start it with --partitions %d and an empty --data dir",
			ErrPartitions, theirs, n.cfg.Partitions, theirs)
	}
	return err
}

// Fatal returns why this node cannot go on (it joined a mesh it can never
// be part of), or nil. The runtime stops with it.
func (n *Node) Fatal() error { return n.fatal }

// Disconnected tells the node that the transport lost its last connection
// to peer id: the peer's process may have died (its kernel closes its
// connections at once) or the link broke. Under the probe protocol the
// peer is pinged now instead of when its turn comes, what was heard from
// it before no longer vouches for it, and if it stays silent, directly and
// to the members that ping it for this one, its suspicion runs a third of
// SuspectFor: a kill -9 is known in about ProbeEvery + SuspectFor/3, not
// after a period of silence, a probe and a whole SuspectFor. An input like
// Step; unknown ids are ignored.
func (n *Node) Disconnected(id string) {
	mb := n.mesh.members[id]
	if mb == nil || id == n.cfg.ID || !n.mesh.swimOn() {
		return
	}
	n.mesh.disconnected(mb, n.now)
}

func (n *Node) stepHeartbeat(from string, hb *Heartbeat) error {
	if hb == nil {
		return errors.New("peer: step: heartbeat without body")
	}
	if hb.Partitions != n.cfg.Partitions {
		return fmt.Errorf("peer: step: %s has %d partitions, this mesh %d: it cannot join", from, hb.Partitions, n.cfg.Partitions)
	}
	mb := n.mesh.members[from]
	if (mb.stranded() > 0) != (hb.Stranded > 0) {
		if hb.Stranded > 0 {
			n.mesh.strandedPeers++
		} else {
			n.mesh.strandedPeers--
		}
	}
	mb.load = hb.Load
	mb.setStranded(hb.Stranded, hb.StrandedFor)
	n.mesh.setAddrs(mb, hb.Addrs)
	mb.features, mb.featured = hb.Features, true
	mb.setWorkers(hb.Workers)
	if len(hb.Workers) > 0 {
		n.scheduleExternal() // offer READY work to its waiting workers now
	}
	mb.setLabels(hb.Labels)
	mb.setVersion(hb.Version)
	if mb.draining != hb.Draining {
		mb.draining = hb.Draining
		n.mesh.prefDirty = true
	}
	n.mesh.learn(from, hb, n.now)
	n.mesh.heartbeatSWIM(mb, hb, n.now)
	n.steal.Observe(from, hb.Load, n.now)
	if hb.Load.Ready > 0 {
		// An idle peer asks at once, not at its next Ready. A heartbeat
		// without READY work offers nothing to take (backoffs that end are
		// Tick's), and in a large mesh most are such: they skip the pass.
		n.maybeSteal()
	}
	return nil
}

func (n *Node) stepRaft(from string, msgs []RaftMsg) error {
	var errs []error
	for _, rm := range msgs {
		if int(rm.Partition) >= len(n.parts) || rm.Msg == nil {
			errs = append(errs, fmt.Errorf("peer: step: partition %d out of range", rm.Partition))
			continue
		}
		if rm.Msg.To != n.raftID || rm.Msg.From != RaftID(from) || raft.IsLocalMsg(rm.Msg.Type) {
			errs = append(errs, fmt.Errorf("peer: step: misaddressed raft message %v from %s", rm.Msg.Type, from))
			continue
		}
		p := n.parts[rm.Partition]
		decoded, err := n.checkRaft(p, rm.Msg)
		if err != nil {
			n.stats.DroppedRaft++
			errs = append(errs, fmt.Errorf("peer: step partition %d from %s: %w", rm.Partition, from, err))
			continue
		}
		if p != nil && p.quiesced && n.wakesOn(p, rm.Msg) {
			n.wake(p, rm.Msg.From != p.rn.BasicStatus().Lead)
		}
		if p != nil && n.leaderLease(p, from, rm.Msg) {
			continue // ignored, as Raft's CheckQuorum lease would (see leaderLease)
		}
		if p != nil {
			n.renewLease(p, rm.Msg)
		}
		if n.voteBarred(int(rm.Partition), p, rm.Msg) {
			n.stats.StaleRaft++ // tombstone.go
			continue
		}
		if p != nil && n.recoveredElsewhere(p, rm.Msg) {
			if p = n.rebuild(p, from, rm.Msg); p == nil {
				n.stats.StaleRaft++ // its Ready is out: the leader sends again
				continue
			}
			// Checked again against the empty replica: a snapshot is now
			// past its commit index, decoded and checked to restore.
			if decoded, err = n.checkRaft(p, rm.Msg); err != nil {
				n.stats.DroppedRaft++
				errs = append(errs, fmt.Errorf("peer: step partition %d from %s: %w", rm.Partition, from, err))
				continue
			}
		}
		if p == nil && !n.mayOpen(int(rm.Partition), rm.Msg) {
			n.stats.StaleRaft++ // for a partition this node left (leave.go)
			continue
		}
		if p == nil {
			var err error
			if p, err = n.openPartition(int(rm.Partition), wal.PartitionState{}, nil); err != nil {
				errs = append(errs, err)
				continue
			}
			n.hold(p)
		}
		if decoded != nil {
			p.keepDecoded(rm.Msg.Snapshot, decoded)
		}
		n.refusedBehind(p, rm.Msg)
		if err := p.rn.Step(*rm.Msg); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			errs = append(errs, fmt.Errorf("peer: step partition %d: %w", rm.Partition, err))
		}
		n.quiesceHeard(p, rm.Msg)
		n.markDirty(p.id)
	}
	return errors.Join(errs...)
}

// leaderLease reports whether a (pre-)vote request must be ignored because
// this replica promised its vote to its leader: Raft's CheckQuorum lease,
// which needs Raft's election timer (off: needle's failure detector
// decides elections), done here on the node's clock. A replica that heard
// from its leader (appends, heartbeats) within its promise (lease.go:
// DeadAfter/3, more to a leader of an older release) votes for no
// one else, and a replica that restarted votes for no one within a lease
// window of its boot (it may have answered a leader's heartbeat just
// before it died). Without this a replica that has not heard from the
// leader yet (a restarted peer, one behind a partition) wins an election
// with the votes of replicas that still follow a live leader, and the
// deposed leader keeps serving reads, unaware, until it hears of the new
// term: two owners of one partition, the old one answering from a stale
// state. The leader's side of the promise is leaseHeld. A leadership
// transfer (its votes carry the transfer context) is the leader's own
// doing and goes through.
func (n *Node) leaderLease(p *partition, from string, m *pb.Message) bool {
	switch m.Type {
	case pb.MsgPreVote, pb.MsgVote:
	default:
		return false
	}
	if string(m.Context) == campaignTransfer {
		return false
	}
	if n.now.Before(n.votesFrom()) {
		return true
	}
	switch lead := p.rn.BasicStatus().Lead; {
	case p.leader:
		return !p.abdicated // an abdicated leader serves nothing: it may vote
	case lead != raft.None && lead == RaftID(from):
		return false // the leader itself, restarted: nobody else relies on this vote
	}
	// Not only while Lead names the leader: Raft forgets it on any message
	// of a later term (a failed candidate's), and the leader still counts
	// on this replica's answer.
	return n.promised(p)
}

// refusedBehind has follower p campaign within a heartbeat period (at a
// random tick: campaignSpread) when it is asked for a vote (or a
// pre-vote) by a candidate whose log is behind its own: Raft refuses that vote, and the candidate, often the preferred
// owner, cannot win without it. It would otherwise wait for its fallback
// turn (campaignFallback, 1.5-3 s after it found the leader gone) while
// the partition has no owner. Nothing changes if it still counts the
// leader alive (tickPartition clears the campaign then), and the preferred
// owner gets the leadership back once it has caught up.
//
// Only a candidate that is a voter here counts. A replica removed from
// the partition while it was cut off or paused still holds the old
// configuration, campaigns every few ticks with its stale log and is
// refused by all; taking each of its requests as the cue sent this
// replica into the preferred owner's campaigns at the same tick, round
// after round, each voting for itself, and the partition stayed
// leaderless for good (simulate: seed 500206, --peers 5 --start join
// --workers 1).
func (n *Node) refusedBehind(p *partition, m *pb.Message) {
	if t := m.Type; p.leader || t != pb.MsgVote && t != pb.MsgPreVote {
		return
	}
	if from := m.From; !slices.Contains(p.conf.Voters, from) && !slices.Contains(p.conf.VotersOutgoing, from) {
		return
	}
	last, err := p.storage.LastIndex()
	if err != nil {
		return
	}
	term, err := p.storage.Term(last)
	if err != nil {
		return
	}
	behind := m.LogTerm < term || m.LogTerm == term && m.Index < last
	if behind && (p.campaignAt.IsZero() || p.campaignAt.Sub(n.now) > n.heartbeatPeriod()) {
		// Every voter ahead of the candidate had the same request: at the
		// same tick they would each vote for themselves, round after round
		// as the candidate asks again (simulate: seed 490284, --peers 6
		// --replicas 5 --faults partition,crash,churn).
		p.campaignAt = n.now.Add(n.campaignSpread())
	}
}

// votesFrom is when this run of the peer may vote and campaign: a
// restarted replica waits out leaseWindow after its start, as an answer
// its previous run sent may still hold a leader's lease; a run that
// bootstrapped from the initial membership (together) answered no one.
func (n *Node) votesFrom() time.Time {
	if n.together {
		return time.Time{}
	}
	return n.bootAt.Add(n.leaseWindow())
}

// leaseWindow is how long after its arrival the answer of a voter of an
// older release (no FeatureSendLease) lets the leader serve reads: half of
// DeadAfter, the silence after which that voter may vote for another; and
// how long a restarted replica votes for no one (an answer it sent just
// before it died holds a lease at most that long after the restart).
func (n *Node) leaseWindow() time.Duration { return n.cfg.DeadAfter / 2 }

// renewLease records both sides of the lease: a follower hearing from a
// leader of its term or a later one (it follows that leader), a leader a
// voter's answer in its current term.
func (n *Node) renewLease(p *partition, m *pb.Message) {
	term := p.rn.BasicStatus().Term
	switch m.Type {
	case pb.MsgApp, pb.MsgHeartbeat, pb.MsgSnap:
		if m.Term >= term {
			n.heardLeader(p, m.From)
			p.leaderMsgAt = n.now
		}
	case pb.MsgAppResp, pb.MsgHeartbeatResp:
		if p.leader && m.Term == term && p.acked != nil {
			n.answered(p, m.From, m)
		}
	}
}

// leaseHeld reports whether this node may answer reads of partition p from
// its state: it serves p, is not handing it over, and a majority of the
// voters (itself included) answered it within the lease window. Until the
// window passes none of those voters votes for another leader (see
// leaderLease), so no other peer can have committed anything newer. A
// leader cut off from its voters stops answering reads before they elect
// another. A quiesced partition's voters count while the membership has
// them alive (quiesce.go).
func (n *Node) leaseHeld(p *partition) bool {
	if p == nil || !p.serving || p.rn.BasicStatus().LeadTransferee != raft.None {
		return false
	}
	return n.quorumAnswered(p)
}

// quorumAnswered reports whether a majority of leader p's voters (itself
// included) hold its read lease: leaseHeld without the leader's state.
func (n *Node) quorumAnswered(p *partition) bool {
	voters := p.conf.Voters
	ok := 0
	for _, v := range voters {
		if v == n.raftID {
			ok++
		} else if a, found := p.acked[v]; found && n.now.Before(a.until) {
			ok++
		} else if p.quiesced && n.vouches(p, v) {
			ok++ // the membership vouches for a quiesced voter (quiesce.go)
		}
	}
	return ok > len(voters)/2
}

// campaignTransfer is the context of the votes of a leadership transfer
// (raft's unexported campaignTransfer).
const campaignTransfer = "CampaignTransfer"

// Owner returns the peer that leads a group's partition, as far as this
// node knows ("" when unknown), so that requests can be routed there.
//
// Only a replica of the partition's current configuration knows its leader.
// A peer that holds no replica, or one that was removed from the replica
// set (it keeps its stale copy, and its Raft state may not even have
// applied its own removal: nobody sends it anything any more), names the
// ring's preferred owner instead, the peer leadership moves to, else a
// live replica; a removed replica's last known leader may have lost the
// partition long ago, and requests routed there would fail for good.
func (n *Node) Owner(g shard.GroupID) string { return n.ownerOf(n.PartitionOf(g)) }

// ownerOf is Owner for a partition.
func (n *Node) ownerOf(part int) string {
	p := n.parts[part]
	if p != nil && p.serving {
		return n.cfg.ID
	}
	if p != nil && n.replica(p) {
		if id, ok := n.mesh.peerOf(p.rn.BasicStatus().Lead); ok && id != n.cfg.ID {
			return id
		}
		return ""
	}
	m := &n.mesh
	if m.ring == nil {
		return ""
	}
	if len(m.preferred) > part {
		if pref := string(m.preferred[part]); pref != "" && pref != n.cfg.ID && m.live(pref) {
			return pref
		}
	}
	for _, id := range m.ring.Replicas(part) {
		if string(id) != n.cfg.ID && m.live(string(id)) {
			return string(id) // a replica knows the leader
		}
	}
	return ""
}

// replica reports whether this node is a replica of p's current
// configuration (a voter or learner that the ring still places there).
func (n *Node) replica(p *partition) bool {
	if !slices.Contains(p.conf.Voters, n.raftID) && !slices.Contains(p.conf.Learners, n.raftID) {
		return false
	}
	return n.mesh.placedHere(p.id)
}

// Serving reports whether this node serves (leads, caught up, and holds the
// read lease of) a group's partition: its reads are current.
func (n *Node) Serving(g shard.GroupID) bool {
	return n.leaseHeld(n.parts[n.PartitionOf(g)])
}

// outboxKey names an outcome in the outbox ("task@round", also its key in
// the log). A concatenation, where fmt.Sprintf made three allocations.
func outboxKey(t shard.TaskID, r shard.Round) string {
	return string(t) + "@" + strconv.FormatUint(uint64(r), 10)
}

// forward keeps an outcome for a partition led elsewhere in the outbox
// (persisted with the next Ready) and sends it to the owner.
func (n *Node) forward(o shard.Outcome) {
	msg := OutcomeMsg{Task: o.Task, Round: o.Round, Holder: o.Holder, OK: o.OK, Result: o.Result,
		Error: o.Error, Permanent: o.Permanent, TimedOut: o.TimedOut, Lost: o.Lost, Died: o.Died}
	key := outboxKey(o.Task, o.Round)
	n.mesh.outbox[key] = msg
	n.mesh.sentAt[key] = n.now
	// Room for the whole record (its varints take at most 55 bytes), not
	// grown from nil in four steps.
	room := 64 + len(msg.Task) + len(msg.Holder) + len(msg.Result) + len(msg.Error)
	enc, _ := AppendMessage(make([]byte, 0, room), &Message{Type: MsgOutcome, Outcomes: []OutcomeMsg{msg}})
	n.rd.Persist.OutboxPut = append(n.rd.Persist.OutboxPut, wal.Record{Key: key, Value: enc})
	n.rd.MustSync = true
	n.mesh.sendOutcomes([]OutcomeMsg{msg})
}

// RestoreOutbox reloads outcomes persisted by an earlier run; they are
// re-sent until acknowledged.
func (n *Node) RestoreOutbox(recs []wal.Record) error {
	for _, r := range recs {
		m, err := DecodeMessage(r.Value)
		if err != nil || m.Type != MsgOutcome || len(m.Outcomes) != 1 {
			return fmt.Errorf("peer: outbox record %q: bad content: %v", r.Key, err)
		}
		n.mesh.outbox[r.Key] = m.Outcomes[0]
	}
	return nil
}

// sendOutcomes groups outcomes by their partition's owner and sends them,
// also to the peer that last granted this node a lease in the partition
// when that is another live peer: it led the partition at the grant, and
// while leadership has not yet moved to the ring's owner it is the one that
// can accept the outcome. Only the partition's leader proposes an outcome;
// any other peer drops it, so a second copy costs one message, not a
// second outcome.
func (m *mesh) sendOutcomes(outs []OutcomeMsg) {
	by := map[string][]OutcomeMsg{}
	for _, o := range outs {
		part := m.n.PartitionOf(o.Task.Group())
		owner := m.n.ownerOf(part)
		if owner != "" && owner != m.n.cfg.ID {
			by[owner] = append(by[owner], o)
		}
		if g := m.granter[part]; g != "" && g != owner && g != m.n.cfg.ID && m.live(g) {
			by[g] = append(by[g], o)
		}
	}
	var keys [4]string
	for _, to := range appendSortedKeys(keys[:0], by) {
		m.n.rd.Messages = append(m.n.rd.Messages, Envelope{To: to, Msg: Message{Type: MsgOutcome, From: m.n.cfg.ID, Outcomes: by[to]}})
	}
}

// resend sends every unacknowledged outcome again, to the current owners;
// outcomes for partitions this node now serves are proposed locally. An
// outcome sent within the resend period is not: its answer may be on its
// way (under load a commit takes a good part of the period), and a second
// copy would be proposed again, one more entry that changes nothing.
func (m *mesh) resend() {
	var remote []OutcomeMsg
	period := m.n.cfg.HeartbeatEvery / 2
	for _, k := range sortedKeys(m.outbox) {
		if at, ok := m.sentAt[k]; ok && m.n.now.Sub(at) < period {
			continue
		}
		m.sentAt[k] = m.n.now
		o := m.outbox[k]
		if p := m.n.parts[m.n.PartitionOf(o.Task.Group())]; p != nil && p.serving {
			m.n.stepOutcomes(m.n.cfg.ID, []OutcomeMsg{o})
			continue
		}
		remote = append(remote, o)
	}
	m.sendOutcomes(remote)
}

// stepOutcomes proposes reported outcomes (fenced by round and holder) in
// the partitions this node serves. Stale ones are acknowledged at once (the
// holder drops them); accepted ones once their event is committed.
func (n *Node) stepOutcomes(from string, outs []OutcomeMsg) {
	var acks []AckMsg
	for _, o := range outs {
		if shard.HolderPeer(o.Holder) != from {
			continue // only the holder reports for its lease
		}
		p := n.parts[n.PartitionOf(o.Task.Group())]
		if p == nil || !p.serving {
			continue // not the owner (any more): the holder re-sends to the right one
		}
		out := shard.Outcome{Task: o.Task, Round: o.Round, Holder: o.Holder, OK: o.OK,
			Result: o.Result, Error: o.Error, Permanent: o.Permanent, TimedOut: o.TimedOut, Lost: o.Lost, Died: o.Died}
		if n.reportHeld(p, from, out) {
			continue
		}
		n.knownDeath(p, &out)
		ev, err := p.shard.Report(n.now, out)
		if errors.Is(err, shard.ErrNotLeased) {
			continue // not answered: the holder sends it again, and it counts once its lease applies
		}
		if err != nil {
			n.stats.StaleOutcomes++
			acks = append(acks, AckMsg{Task: o.Task, Round: o.Round})
			continue
		}
		n.mesh.pendAck[o.Task] = pendingAck{from: from, round: o.Round}
		p.propose([]shard.Event{ev})
		n.markDirty(p.id)
	}
	n.ack(from, acks)
}

func (n *Node) ack(to string, acks []AckMsg) {
	if len(acks) == 0 {
		return
	}
	if to == n.cfg.ID {
		n.stepAcks(to, acks)
		return
	}
	n.rd.Messages = append(n.rd.Messages, Envelope{To: to, Msg: Message{Type: MsgAck, From: n.cfg.ID, Acks: acks}})
}

// ackApplied acknowledges a forwarded outcome once its event applied.
func (n *Node) ackApplied(e *shard.Event) {
	pa, ok := n.mesh.pendAck[e.Task]
	if !ok || pa.round != e.Round {
		return
	}
	delete(n.mesh.pendAck, e.Task)
	n.ack(pa.from, []AckMsg{{Task: e.Task, Round: e.Round}})
}

// stepAcks drops acknowledged outcomes from the outbox.
func (n *Node) stepAcks(from string, acks []AckMsg) {
	for _, a := range acks {
		if !n.mayOwn(from, n.PartitionOf(a.Task.Group())) {
			// Only the task's owner acknowledges: an ack from another
			// member (forged, with a guessed round) dropped the outcome
			// before the owner had it, and the task stayed RUNNING.
			continue
		}
		key := outboxKey(a.Task, a.Round)
		if _, ok := n.mesh.outbox[key]; ok {
			delete(n.mesh.outbox, key)
			delete(n.mesh.sentAt, key)
			n.rd.Persist.OutboxDel = append(n.rd.Persist.OutboxDel, key)
		}
	}
}

// mayOwn reports whether peer id may own partition part: this node, the
// owner it knows, a voter of its replica, or a replica on the ring.
func (n *Node) mayOwn(id string, part int) bool {
	if id == n.cfg.ID || id == n.ownerOf(part) {
		return true
	}
	if p := n.parts[part]; p != nil && slices.Contains(n.mesh.voters(p), id) {
		return true
	}
	if n.mesh.ring != nil {
		for _, r := range n.mesh.ring.Replicas(part) {
			if string(r) == id {
				return true
			}
		}
	}
	return false
}

// OutboxLen returns the outcomes waiting for their owner's acknowledgement.
func (n *Node) OutboxLen() int { return len(n.mesh.outbox) }
