package node

import (
	"math/bits"
	"slices"
	"time"
)

// NextDeadline returns when the node next has work that no input brings:
// a gossip heartbeat, a failure-detection threshold, the end of the
// membership's debounce, an outbox resend, a Raft tick (only while some
// partition needs one: see quiet), a shard timer (a delay or backoff
// ending, a lease expiring, a schedule's tick, a retention removal), a
// steal that a backoff or a request's expiry allows, a webhook due. The
// drivers (peer/loop.go, the simulator) sleep until then or until an
// input, and Tick then: a node with nothing to do wakes about once per
// HeartbeatEvery instead of every timer slot.
//
// It is computed from the node's state after the last Tick, input and
// Advance, and may be early (a delay's timer whose task moved on, a tick
// that finds nothing to do), never late: an input or Advance can bring it
// forward, so the drivers ask again after each. It is never before the
// node's time unless something is due at once.
func (n *Node) NextDeadline() time.Time {
	// The cheap deadlines first: the walks over the partitions below are
	// made only when what they find could come before them (the runtime
	// asks once per loop iteration).
	d := n.mesh.nextDeadline()
	// Tick runs the timers once per timer slot: one due later in the slot
	// of the last pass fires at the start of the next.
	slot := time.Unix(0, (n.timerSlot+1)*int64(timerResolution))
	if at, ok := n.shardTimers(); ok {
		d = earliest(d, later(at, slot))
	}
	if !n.mesh.swimOn() {
		if eager := n.mesh.lastBeat.Add(eagerBeatEvery); eager.Before(d) && n.mesh.loadJump() {
			d = eager
		}
	}
	if slot.Before(d) && len(n.mesh.forgotten) > 0 && n.readyTotal() > 0 {
		d = slot // a READY task pinned to a forgotten peer fails at the next pass
	}
	if at, ok := n.stealAt(); ok && later(at, slot).Before(d) && n.readyRunnable() == 0 {
		d = later(at, slot)
	}
	if tick := n.nextTick; tick.Before(d) && n.needsRaftTick() {
		d = tick
	}
	if !n.deferDue.IsZero() && n.deferDue.Before(d) {
		// Only what is still held back: the flush it was set for may
		// have nothing left to do.
		if at, ok := n.nextHeld(); ok && at.Before(d) {
			d = at
		}
	}
	return d
}

// nextDeadline is the mesh's part of NextDeadline but the eager heartbeat
// of a load jump (a walk: NextDeadline asks when it matters): heartbeats
// (the interval, one soon for the external workers), the failure
// detector's next threshold, the debounced ring rebuild, the outbox resend
// and a pending preferred-owner pass.
func (m *mesh) nextDeadline() time.Time {
	cfg := &m.n.cfg
	d := m.detectAt
	if m.swimOn() {
		d = earliest(d, m.swimDeadline())
	} else {
		d = earliest(d, m.lastBeat.Add(cfg.HeartbeatEvery))
	}
	if m.n.ext.beatSoon {
		d = earliest(d, m.lastBeat.Add(workerBeatEvery))
	}
	if m.ringVersion != m.version {
		d = earliest(d, m.changedAt.Add(cfg.Debounce))
	}
	if len(m.outbox) > 0 {
		d = earliest(d, m.lastSend.Add(cfg.HeartbeatEvery/2))
	}
	if m.prefDirty {
		d = earliest(d, m.n.now)
	}
	return d
}

// needsRaftTick reports whether some partition needs Raft ticks (see
// quiet), or webhook deliveries wait (notifyDue runs on Raft ticks).
// A quiesced partition is quiet, so only those loud marks are asked; and
// only those dueParts marks can have webhooks waiting.
func (n *Node) needsRaftTick() bool {
	for p := range n.loud.held(n) {
		if !n.mesh.quiet(p) {
			return true
		}
	}
	if n.notifying < n.notifyLimit() {
		for p := range n.dueParts.held(n) {
			if p.serving && p.shard.NotifyPending() > 0 {
				return true
			}
		}
	}
	return false
}

// quiet reports whether a Raft tick of partition p would do nothing
// (tickPartition included): p is quiesced (quiesce.go); or this node is
// no replica of it (a replica removed from its configuration keeps its
// copy, and a new one holds none until the leader's snapshot names it):
// it cannot campaign, and Raft's election timer is out of reach; or p is
// led by this node as its only replica, which is all the ring wants of
// it, with no change, transfer or abdication under way. Such a leader has no follower to send heartbeats
// to, and Raft's election timer is out of reach (raftConfig). Any other
// partition ticks every RaftTick: a leader with followers heartbeats them,
// a follower watches its leader.
func (m *mesh) quiet(p *partition) bool {
	if p.quiesced || !p.leader && !m.n.inConf(p) {
		return true
	}
	if !p.leader || p.abdicated || !p.confAt.IsZero() || len(p.props) > 0 || p.holding() || !m.alone(p) {
		return false
	}
	// A lone voter has no leadership transfer under way: Raft transfers
	// only to another voter.
	switch {
	case m.ring == nil || m.ringVersion != m.version:
		// No ring, or one not built from this membership yet: reconfigure
		// waits for the rebuild, a deadline of its own (the debounce).
		return true
	case len(m.ringSet) == 1:
		return m.ringSet[0] == m.n.cfg.ID
	}
	// The ring wants min(Replicas, members) replicas: one, this node.
	return m.n.cfg.Replicas == 1 && m.placedHere(p.id)
}

// alone reports whether this node is partition p's only replica: its
// only voter, with no learner and no joint configuration. Cached per
// ConfState (a change replaces it).
func (m *mesh) alone(p *partition) bool {
	if p.aloneOf != p.conf {
		voters := p.conf.Voters
		p.aloneOf = p.conf
		p.isAlone = len(voters) == 1 && voters[0] == m.n.raftID && len(p.conf.Learners) == 0 &&
			len(p.conf.VotersOutgoing) == 0
	}
	return p.isAlone
}

// shardTimers returns the earliest shard timer or retention removal of
// the partitions this node serves.
// It reads only the partitions dueParts marks, and unmarks those with
// nothing pending (no timer, no webhook): a shard marks itself again
// when that changes. The answer is cached (Node.timers): it may be early
// (a timer that fired, a partition no longer served), never late.
func (n *Node) shardTimers() (at time.Time, ok bool) {
	c := &n.timers
	if c.known && len(c.stale) <= maxStaleTimers {
		// A shard's timers only get earlier by what it says (OnDue): the
		// earliest is the cached one or one of those.
		for _, i := range c.stale {
			if p := n.parts[i]; p != nil && p.serving {
				if t, due := p.shard.NextDue(); due && (!c.ok || t.Before(c.at)) {
					c.at, c.ok = t, true
				}
			}
		}
	} else {
		c.at, c.ok = n.walkTimers()
	}
	c.known, c.stale = true, c.stale[:0]
	return c.at, c.ok
}

// maxStaleTimers is how many shards' word shardTimers takes before it
// walks them all instead.
const maxStaleTimers = 16

// walkTimers is shardTimers without the cache.
func (n *Node) walkTimers() (at time.Time, ok bool) {
	if n.dueParts.nz == 0 {
		return at, ok
	}
	for w, word := range n.dueParts.w {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			p := n.parts[w*64+b]
			if p == nil {
				n.dueParts.set(w*64+b, false)
				continue
			}
			if !p.serving {
				// A leader that does not serve yet may, with its timers as
				// they are; a follower's NextDue is empty, and its shard
				// marks itself again when it leads (SetLeader).
				if !p.shard.Leader() {
					n.dueParts.set(p.id, false)
				}
				continue
			}
			t, due := p.shard.NextDue()
			if !due {
				if p.shard.NotifyPending() == 0 {
					n.dueParts.set(p.id, false)
				}
				continue
			}
			if !ok || t.Before(at) {
				at, ok = t, true
			}
		}
	}
	return at, ok
}

// stealAt returns when maybeSteal could next ask a peer for work, as far
// as the thief and this node's slots go (the caller checks that nothing
// READY here may run: maybeSteal's last condition, a walk).
func (n *Node) stealAt() (time.Time, bool) {
	if n.steal.t == nil || n.draining || n.busy >= n.stealCapacity() {
		return time.Time{}, false
	}
	return n.steal.t.NextAt(n.now, n.cfg.ID)
}

// inConf reports whether this node is in partition p's configuration: a
// voter, a learner, or an outgoing voter of a joint configuration.
func (n *Node) inConf(p *partition) bool {
	return slices.Contains(p.conf.Voters, n.raftID) || slices.Contains(p.conf.Learners, n.raftID) ||
		slices.Contains(p.conf.VotersOutgoing, n.raftID)
}
