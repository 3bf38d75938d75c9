package node

import (
	"bytes"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Quiescent partitions (as CockroachDB quiesces its ranges).
//
// A partition with followers costs a Raft tick on every replica every
// RaftTick and a Raft heartbeat per follower every HeartbeatTicks, idle or
// not. Once its log is replicated and applied everywhere, its leader sends
// each follower a last heartbeat marked quiesceCtx, carrying the commit
// index, and stops ticking; a follower whose log ends at that index stops
// ticking too. Neither sends anything until something happens:
//
//   - a proposal on the leader (a request, a shard timer, an outcome);
//   - any Raft message that brings news (wakesOn): a follower's vote
//     request, a leader's append with entries, a plain heartbeat (its
//     leader ticks again);
//   - a membership event (computePreferred: a peer dead, back, rebooted,
//     joined, forgotten or draining; a new ring): every quiesced
//     partition wakes and quiesces again if nothing changed for it;
//   - a restart (quiescence lives in memory only).
//
// A follower that wakes on its own (a membership event, a message from
// another peer) tells its leader with a plain heartbeat response, which
// wakes the leader: a follower that ticks while its leader does not would
// find it silent and campaign. A leader that wakes sends its followers a
// plain heartbeat, which wakes them: they watch it again, and find it
// silent if it abdicates (it woke to find no majority alive) or dies
// unseen by the membership.
//
// While quiesced, the promises that Raft heartbeats carried come from the
// membership instead. A quiesced follower refuses to vote for another
// while its leader is not dead (it wakes when the leader dies, and the
// failure detector's DeadAfter is the silence after which it campaigns,
// as before); a quiesced leader holds its read lease while a majority of
// its voters are alive to it (see leaseHeld). Waking carries the promises
// on: the follower counts its leader heard, the leader its live voters
// answered, at the moment of waking; but not a voter that restarted since
// the partition quiesced (vouches): the restart ended its promise at a
// moment the leader learns of only later, so it counts again once it
// answers the leader in its term. The margin between the two is the
// failure detector's: a voter stops counting for the leader's lease when
// it is suspect (DeadAfter/2 of silence), and votes for another only once
// the leader is dead to it (DeadAfter). The exception is a one-way cut
// from the leader to its followers that leaves their gossip reaching it:
// the leader then serves reads while they may elect another. Such reads
// are stale (an older state, never a wrong one: a leader that lost its
// voters commits nothing), and the first vote request it hears wakes it.
//
// Quiescence needs every replica to know the marked heartbeat
// (FeatureQuiesce): an older follower would take it for a plain one and
// campaign after DeadAfter of silence.

// quiesceCtx is the context of the heartbeat that quiesces a follower,
// echoed in its answer. Raft's read-only machinery reads a heartbeat
// context as a little-endian read index (8 bytes); zero confirms nothing,
// and needle makes no read-index requests (raft's own heartbeats carry no
// context).
var quiesceCtx = make([]byte, 8)

// maybeQuiesce quiesces leader p when it has nothing left to tell its
// followers (canQuiesce): the marked heartbeat goes to each follower, and
// p ticks no more.
func (n *Node) maybeQuiesce(p *partition) {
	commit, ok := n.canQuiesce(p)
	if !ok {
		return
	}
	for _, v := range p.conf.Voters {
		if v == n.raftID {
			continue
		}
		to, _ := n.mesh.peerOf(v)
		n.dropCommit(p, to, commit)
		m := n.newHeartbeat(pb.MsgHeartbeat, v, p.term, commit)
		m.Context = quiesceCtx
		n.sendRaft(to, p, m)
	}
	n.setQuiesced(p, true)
	p.quietAt = n.now
	n.stats.Quiesced++
}

// vouches reports whether the membership answers for voter v of quiesced
// leader p: v is alive, and has not restarted since p quiesced. A
// restarted voter lost the promise its quiesced run made (it votes again
// a lease window after its boot, which this node learns of only later),
// so it counts for p's lease again only once it answers p in its term.
func (n *Node) vouches(p *partition, v uint64) bool {
	if !n.mesh.aliveRaft(v) {
		return false
	}
	id, _ := n.mesh.peerOf(v)
	mb := n.mesh.members[id]
	return mb.rebootAt == 0 || n.mesh.at(mb.rebootAt).Before(p.quietAt)
}

// forgetAnswers voids the read lease that voter v's answers gave the
// partitions this node leads: v restarted, and its earlier run's promises
// are void. When it last answered still counts for abdicate: it is
// alive, and answers again once it hears the leader.
func (n *Node) forgetAnswers(v uint64) {
	for _, i := range n.held {
		if p := n.parts[i]; p != nil && p.leader {
			if a, ok := p.acked[v]; ok {
				p.acked[v] = ack{at: a.at}
			}
		}
	}
}

// canQuiesce reports whether leader p may quiesce, and its commit index:
// it serves, with no proposal, transfer, abdication or replica change
// under way and none wanted (its voters are the ring's replicas, it is
// their preferred owner, every one of them alive and able to quiesce),
// and every voter holds, and knows committed, the whole log, which this
// node applied.
func (n *Node) canQuiesce(p *partition) (uint64, bool) {
	m := &n.mesh
	voters := p.conf.Voters
	if !p.leader || !p.serving || p.abdicated || !p.confAt.IsZero() || len(p.props) > 0 || p.holding() || p.forceSnap ||
		len(voters) < 2 || len(p.conf.Learners) > 0 || len(p.conf.VotersOutgoing) > 0 || p.rn.HasReady() {
		return 0, false
	}
	if m.ring == nil || m.ringVersion != m.version || m.owner(p) != n.cfg.ID {
		return 0, false
	}
	if replicas := m.ring.Replicas(p.id); len(replicas) != len(voters) || !m.allVoters(replicas, voters) {
		return 0, false
	}
	for _, v := range voters {
		if v != n.raftID && !m.aliveRaft(v) {
			return 0, false
		}
	}
	if who, _ := n.lacking(p, FeatureQuiesce); who != "" {
		return 0, false
	}
	st := p.rn.BasicStatus()
	commit := st.Commit
	if st.LeadTransferee != raft.None || p.applied != commit {
		return 0, false
	}
	last, _ := p.storage.LastIndex()
	ok := last == commit
	p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match != last || id != n.raftID && pr.State != tracker.StateReplicate {
			ok = false
		}
	})
	return commit, ok
}

// aliveRaft reports whether the peer of a Raft id is alive to the
// failure detector (not suspect, not dead).
func (m *mesh) aliveRaft(rid uint64) bool {
	id, ok := m.peerOf(rid)
	if !ok {
		return false
	}
	mb := m.members[id]
	return mb != nil && mb.state == PeerAlive
}

// wakesOn reports whether a Raft message wakes quiesced partition p: all
// do but those that bring no news. A follower keeps still on the marked
// heartbeat and on an empty append from its leader that commits nothing
// new (one sent before the marked heartbeat, reordered); a leader on the
// marked heartbeat's answer and on an append's acknowledgement of what the
// follower was known to hold.
func (n *Node) wakesOn(p *partition, m *pb.Message) bool {
	st := p.rn.BasicStatus()
	if m.Term != st.Term {
		return true
	}
	if !p.leader {
		if m.From != st.Lead {
			return true
		}
		switch m.Type {
		case pb.MsgHeartbeat:
			return !bytes.Equal(m.Context, quiesceCtx)
		case pb.MsgApp:
			return len(m.Entries) > 0 || m.Commit > st.Commit
		}
		return true
	}
	switch m.Type {
	case pb.MsgHeartbeatResp:
		return !bytes.Equal(m.Context, quiesceCtx)
	case pb.MsgAppResp:
		if m.Reject {
			return true
		}
		news := true
		p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == m.From && m.Index <= pr.Match {
				news = false
			}
		})
		return news
	}
	return true
}

// quiesceHeard notes the marked heartbeat on follower p once Raft stepped
// it: p quiesces if it holds its leader's whole log, and otherwise its
// answer goes without the mark (see readyPartition), which wakes the
// leader.
func (n *Node) quiesceHeard(p *partition, m *pb.Message) {
	if p.leader || m.Type != pb.MsgHeartbeat || !bytes.Equal(m.Context, quiesceCtx) {
		return
	}
	st := p.rn.BasicStatus()
	last, _ := p.storage.LastIndex()
	if st.Lead == m.From && st.Term == m.Term && last == m.Commit && st.Commit == last {
		n.setQuiesced(p, true)
	}
}

// wake ends p's quiescence (see the rules above). The promises carry on
// from the membership's: a follower counts its live leader heard now, a
// leader its live voters answered now. With tell, a follower tells its
// leader (plain heartbeat response) and a leader its followers (plain
// heartbeats); without, the message that woke it (from its leader) or
// the proposal's appends (to the followers) do.
func (n *Node) wake(p *partition, tell bool) {
	if !p.quiesced {
		return
	}
	n.setQuiesced(p, false)
	n.stats.Woken++
	n.markDirty(p.id)
	st := p.rn.BasicStatus()
	if p.leader {
		for _, v := range p.conf.Voters {
			if v != n.raftID && p.acked != nil && n.vouches(p, v) {
				n.vouched(p, v)
			}
		}
		if tell {
			n.wakeFollowers(p, st.Commit)
		}
		return
	}
	lead, ok := n.mesh.peerOf(st.Lead)
	if !ok || !n.mesh.live(lead) {
		return
	}
	n.heardLeader(p, st.Lead)
	if tell {
		n.sendRaft(lead, p, n.newHeartbeat(pb.MsgHeartbeatResp, st.Lead, st.Term, 0))
	}
}

// wakeFollowers sends each follower of leader p a plain heartbeat, which
// wakes it: from now on it expects the leader's heartbeats, and finds
// the leader silent (and campaigns) if the leader abdicates or dies
// without its death reaching the membership. Like Raft's, it commits no
// further than what the follower is known to hold.
func (n *Node) wakeFollowers(p *partition, commit uint64) {
	p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		to, ok := n.mesh.peerOf(id)
		if id == n.raftID || !ok {
			return
		}
		c := min(pr.Match, commit)
		m := n.newHeartbeat(pb.MsgHeartbeat, id, p.term, c)
		n.stampHeartbeat(m)
		n.dropCommit(p, to, m.Commit)
		n.sendRaft(to, p, m)
	})
}

// newHeartbeat returns a heartbeat of type t from this node to Raft id to
// in term, committing commit (none: 0).
func (n *Node) newHeartbeat(t pb.MessageType, to, term, commit uint64) *pb.Message {
	return &pb.Message{Type: t, To: to, From: n.raftID, Term: term, Commit: commit}
}

// wakeAll wakes every quiesced partition: the membership changed.
func (n *Node) wakeAll() {
	for _, i := range n.held {
		n.wake(n.parts[i], true)
	}
}

// Quiesced reports whether this node holds partition part quiesced (for
// tests and diagnostics).
func (n *Node) Quiesced(part int) bool {
	return part >= 0 && part < len(n.parts) && n.parts[part] != nil && n.parts[part].quiesced
}
