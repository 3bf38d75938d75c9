package node

import (
	"bytes"
	"encoding/binary"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The read lease, measured from the send time of what a voter answered.
//
// A leader serves reads from its own state (leaseHeld) while a majority of
// its voters promised not to vote for another: a follower that heard from
// its leader (an append, a heartbeat, a snapshot) votes for no one else
// for the promise (leaderLease). The leader's lease from one answer must
// end before the promise behind it, whatever the delay of the messages.
//
// A follower's promise starts when the leader's message arrives, which the
// leader does not see; but that is after the leader sent it. So the leader
// stamps each heartbeat with its send time (the heartbeat's context, which
// Raft echoes in the answer) and counts a voter answered until that time
// plus leaseSpan, a fifth short of the shortest promise: the margin covers
// the two clocks running at different rates (the simulator skews them by
// up to 10%), not the message delay, which only shortens the lease. The
// promise is DeadAfter/3 (1 s by default): after a leader dies, its
// followers vote for another a second after they last heard it, about
// when the failure detector finds a killed peer dead (its connections
// closed, then a ping unanswered), and a dead owner's tasks run again
// about a second after it died.
//
// Appends are not stamped (Raft echoes nothing of them), so under load the
// lease rests on the heartbeats too; they go every HeartbeatTicks (500 ms
// by default), inside leaseSpan (800 ms): an answer renews the lease if it
// comes back within 300 ms.
//
// Peers of older releases promise more: DeadAfter/2 from the arrival
// (FeatureSendLease without FeatureShortPromise), DeadAfter (neither).
// A follower promises a leader that lacks FeatureShortPromise what that
// leader's release counts on (DeadAfter/2, or DeadAfter without
// FeatureSendLease). A leader counts every stamped answer leaseSpan, the
// shortest promise's: whatever a voter knows of the leader's features,
// and whatever release it runs, it promised at least that. An answer of a
// voter without FeatureSendLease (unstamped) counts leaseWindow from its
// arrival, as before. A quiesced partition's promises come from the
// membership (quiesce.go); waking carries them on with these spans.

// FeatureSendLease (a Heartbeat feature): the peer stamps its heartbeats
// with their send time and counts its read lease from it, and promises
// such a leader DeadAfter/2.
const FeatureSendLease = FeatureProbe << 1

// FeatureShortPromise (a Heartbeat feature): the peer counts a voter's
// stamped answer leaseSpan whatever the voter's release, and promises a
// leader with the feature DeadAfter/3.
const FeatureShortPromise = FeatureGroupBin << 1

// ack is what a leader knows of a voter's answers in its term: when the
// last one arrived (abdicate), and until when they hold the lease.
type ack struct {
	at, until time.Time
}

// promise is how long this follower votes for no one else after hearing
// from leader lead (a Raft id).
func (n *Node) promise(lead uint64) time.Duration {
	switch f := n.features(lead); {
	case f&FeatureShortPromise != 0:
		return n.cfg.DeadAfter / 3
	case f&FeatureSendLease != 0:
		return n.cfg.DeadAfter / 2
	}
	return n.cfg.DeadAfter
}

// leaseSpan is how long after a stamped heartbeat's send time the voter's
// answer holds the lease: four fifths of the shortest promise.
func (n *Node) leaseSpan() time.Duration { return n.cfg.DeadAfter / 3 * 4 / 5 }

// sendLease reports whether the peer with Raft id rid has FeatureSendLease.
func (n *Node) sendLease(rid uint64) bool {
	return n.features(rid)&FeatureSendLease != 0
}

// features returns the features of the member with Raft id rid (none
// when it is unknown).
func (n *Node) features(rid uint64) uint64 {
	id, ok := n.mesh.peerOf(rid)
	if !ok {
		return 0
	}
	if mb := n.mesh.members[id]; mb != nil {
		return mb.features
	}
	return 0
}

// heardLeader records, on follower p, a message from leader lead: the
// promise runs from now.
func (n *Node) heardLeader(p *partition, lead uint64) {
	p.leaderHeard, p.promise = n.now, n.promise(lead)
}

// promised reports whether follower p still promises its vote to the
// leader it last heard.
func (n *Node) promised(p *partition) bool {
	return !p.leaderHeard.IsZero() && n.now.Sub(p.leaderHeard) < p.promise
}

// stampHeartbeat sets the send time as the context of a leader's plain
// heartbeat to a voter with FeatureSendLease. Raft stamps none (needle
// reads no read index) and quiesce marks its own (quiesceCtx, all zero);
// a time is never zero.
func (n *Node) stampHeartbeat(m *pb.Message) {
	if m.Type != pb.MsgHeartbeat || len(m.Context) != 0 || !n.sendLease(m.To) {
		return
	}
	m.Context = binary.BigEndian.AppendUint64(nil, uint64(n.now.UnixNano()))
}

// answered records leader p's answer from voter v (a heartbeat's or an
// append's, in p's term): arrived now, and holding the lease until the
// stamp it echoes plus leaseSpan; an older voter's, until DeadAfter/2
// after now. A stamp from the future (a forged answer, a clock stepped
// back) counts as sent now. The stamp is taken off the answer, whose
// context Raft would read as a read index.
func (n *Node) answered(p *partition, v uint64, m *pb.Message) {
	a := p.acked[v]
	a.at = n.now
	ctx := m.Context
	stamped := m.Type == pb.MsgHeartbeatResp && len(ctx) == 8 && !bytes.Equal(ctx, quiesceCtx)
	switch {
	case stamped:
		m.Context = nil
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(ctx)))
		if sent.After(n.now) {
			sent = n.now
		}
		a.until = later(a.until, sent.Add(n.leaseSpan()))
	case !n.sendLease(v):
		a.until = later(a.until, n.now.Add(n.answerSpan(v)))
	}
	p.acked[v] = a
}

// answerSpan is how long an answer of voter v that arrives now holds the
// lease when nothing says when it was sent: leaseSpan for a voter with
// FeatureSendLease (as a stamp of now), leaseWindow for an older one.
func (n *Node) answerSpan(v uint64) time.Duration {
	if n.sendLease(v) {
		return n.leaseSpan()
	}
	return n.leaseWindow()
}

// vouched counts voter v answered now, on the membership's word (a
// quiesced partition waking): as a stamp sent now.
func (n *Node) vouched(p *partition, v uint64) {
	p.acked[v] = ack{at: n.now, until: later(p.acked[v].until, n.now.Add(n.answerSpan(v)))}
}

// voidLeases ends leader p's read lease from every voter's answers so
// far (it hands p over: the target's campaign takes votes that the
// answers promised no one), and keeps when each voter last answered: the
// voters still hear p, which is what abdicate asks. A lease voided with
// the answers made a transfer that took longer than a Raft tick (a
// target restarted and still catching up) look like a leader nobody
// answered, and it abdicated at its next tick.
func (n *Node) voidLeases(p *partition) {
	for v, a := range p.acked {
		p.acked[v] = ack{at: a.at}
	}
}

// thawed voids the read leases of the partitions this node leads after a
// gap in its clock longer than DeadAfter/3 (the process was frozen, or its
// clock jumped): nothing it knew of its voters before the gap vouches for
// them now. A frozen leader's voters may have found it dead and elected
// another meanwhile, while the messages they sent before, read now, make
// them look alive to it; a quiesced leader would count them on that word
// (vouches). So every led partition wakes without vouching, and holds its
// lease again once its voters answer the stamped heartbeats it sends now
// (or steps down on the later term of their answer); until then they
// count as heard at the thaw, so that it does not abdicate at once. And it
// stops serving until they answer.
func (n *Node) thawed() {
	n.stats.Thaws++
	for _, i := range n.held {
		p := n.parts[i]
		if !p.leader {
			continue
		}
		// Heard now, for abdicate: they get DeadAfter to answer again.
		for _, v := range p.conf.Voters {
			if v != n.raftID {
				p.acked[v] = ack{at: n.now}
			}
		}
		if p.quiesced {
			n.setQuiesced(p, false)
			n.stats.Woken++
			n.wakeFollowers(p, p.rn.BasicStatus().Commit)
		}
		n.markDirty(p.id)
		if p.serving && !n.quorumAnswered(p) { // a lone voter answers for itself
			// It serves again once a majority of its voters answer it
			// in its term (tickPartition), or an entry of its term
			// commits (maybeServe): either shows that no later term
			// has a majority. Meanwhile what it applies from before the
			// gap (its own leases, which a new leader may have run
			// again) is not a current owner's doing.
			n.stopServing(p)
			p.thawed = true
		}
	}
}
