package node

import (
	"math/bits"
	"slices"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A lease this owner gives its own free slots (schedule) starts its run at
// once, as an initial lease does (speculate.go), and is held back from the
// log for up to NodeConfig.LeaseDefer. When the run succeeds within that
// time, the lease and the outcome go into the same entry: one commit
// instead of two, and one entry where there were two (a short task of a
// DAG, a pipeline or a retry costs what a task of a single-task group
// does). A lease still held when its time is up is proposed alone, and the
// run's outcome follows as a speculative run's does. A failure is not
// folded: its retry policy reads the task's state, so the lease is
// proposed at once and the failure reported when the lease applies.
//
// The guarantees are those of speculation. The outcome applies only
// behind its lease, in the same entry, fenced by round and holder; a
// client hears of it only when that entry applies. Runs start only while
// this leader holds its read lease, so no other leader runs the task in
// the same round then. A leadership lost with leases still held drops
// them as it drops any proposal (stopServing): the tasks stay READY in the
// log and the next owner runs them again (at-least-once), and the runs
// here report outcomes that nothing takes. A task canceled while its
// lease was held takes no lease when it applies, and its run is aborted
// then (appliedSpeculative).
//
// What a replica sees meanwhile: the task READY, not RUNNING, for up to
// LeaseDefer after it started.
type deferredLease struct {
	ev  shard.Event
	due time.Time
}

// deferLeases starts the runs of own leases evs of partition p that fit
// this peer's slots and holds those leases back (p.deferred), and returns
// the others, for the caller to propose now: leases held beyond the slots
// (leasing ahead), and any this node may not speculate on. A backlog
// within the lease-ahead window (Slots x LeaseAhead READY tasks) is held
// too: a slot that frees takes its next task at once, and its lease waits
// for the run's outcome or rides another entry, where it went alone (the
// next READY task is often another partition's than the outcome that
// freed the slot). A bigger backlog is leased ahead in batches timed by
// their commits (pacer): there each entry carries many leases and
// outcomes, and runs that start before their commit would cut the
// batches to the few tasks that end in one loop iteration (W1 on 3 peers
// fell from 25,000 to 4,600 tasks/s when every backlog was held). A leader that
// began serving again in its term (after abdicating or a frozen clock)
// defers nothing until it applied the log it had then: a lease it
// proposed before may still apply, in the same round as a new one (the
// shard forgot the first when it stopped leading), and would start the
// task again.
func (n *Node) deferLeases(p *partition, evs []shard.Event) []shard.Event {
	room := n.cfg.Slots - (n.busy - len(evs))
	if room <= 0 || !n.mayHold(p) || n.readyRunnable() > n.cfg.Slots*n.cfg.LeaseAhead {
		return evs
	}
	kept := evs[:0:0]
	for i := range evs {
		e := evs[i]
		if room <= 0 || !n.mayDefer(p, &e) {
			kept = append(kept, e)
			continue
		}
		room--
		spec, _ := p.shard.LeasedSpec(e.Task)
		si, sn := p.shard.BroadcastShard(e.Task)
		n.dropOwnLease(e.Task) // the slot passes to the run
		delete(n.leaseAt, e.Task)
		n.startRun(e.Task, e.Round)
		n.setClaim(e.Task, claimed{round: e.Round})
		if len(n.spec) >= maxSpec {
			clear(n.spec)
		}
		n.spec[e.Task] = &specRun{part: p.id, term: p.term, round: e.Round, at: e.At, expiry: e.Expiry, deferred: true}
		n.rd.Run = append(n.rd.Run, Run{
			Task: e.Task, Round: e.Round, Handler: spec.Handler, Trace: p.shard.Trace(e.Task), Payload: p.shard.Payload(e.Task),
			Shard: si, Shards: sn, Timeout: p.shard.Timeout(spec), Attempt: p.shard.Attempts(e.Task),
			Inputs: rawInputs(p.shard.Inputs(e.Task)),
		})
		n.holdBack(p, e)
	}
	return kept
}

// mayHold reports whether this leader may start runs of p's leases
// before they commit (see deferLeases).
func (n *Node) mayHold(p *partition) bool {
	return n.cfg.LeaseDefer > 0 && p.serving && !p.abdicated && n.leaseHeld(p) && p.applied >= p.servedFrom
}

// holdBack holds lease e of p back for LeaseDefer.
func (n *Node) holdBack(p *partition, e shard.Event) {
	due := n.now.Add(n.cfg.LeaseDefer)
	p.deferred = append(p.deferred, deferredLease{ev: e, due: due})
	n.dueBy(p, due)
}

// dueBy brings the next flush of held proposals (flushDeferred) to due at
// the latest, for something partition p holds back.
func (n *Node) dueBy(p *partition, due time.Time) {
	n.holdParts.set(p.id, true)
	if n.deferDue.IsZero() || due.Before(n.deferDue) {
		n.deferDue = due
	}
}

// A submission whose first tasks this leader leases to its own slots in
// the creation's entry (initialLeases), and whose runs start at once
// (speculate), is itself held back for up to LeaseDefer, as those leases
// would be later in the group's life: when its runs succeed by then, the
// creation, its leases and their outcomes go into one entry. A task of a
// single-task group then costs one commit and one entry, not two, and a
// client that waits for it (POST /v1/tasks?wait=) hears of it after one
// sync. Nothing is acknowledged meanwhile: the submission is answered when
// its creation applies, as always. A run that fails, or takes longer,
// releases the creation alone, and its outcome follows as a speculative
// run's.
//
// No other proposal can name the group while its creation is held: the
// shard does not know it. A second submission of the same group releases
// the held one first, so that the first submission stays the first in the
// log (speculation's guarantee that a run's outcome applies to its own
// creation's task rests on it). A leadership lost meanwhile drops the
// held creation as it drops any proposal (stopServing): the client is
// answered ErrUnavailable and submits again.
type heldSubmit struct {
	group   shard.GroupID
	evs     []shard.Event // the creation and its leases, then the outcomes folded in
	pending int           // runs started and not reported yet
	due     time.Time
}

// holdSubmit holds back the events evs of a submission to p (a creation
// and its leases), whose first runs started (runs of them).
func (n *Node) holdSubmit(p *partition, evs []shard.Event, runs int) {
	due := n.now.Add(n.cfg.LeaseDefer)
	p.heldSubs = append(p.heldSubs, heldSubmit{group: evs[0].Group, evs: evs, pending: runs, due: due})
	n.dueBy(p, due)
}

// heldSubmit returns the index of group g's held creation in p, or -1.
func (p *partition) heldSubmit(g shard.GroupID) int {
	for i := range p.heldSubs {
		if p.heldSubs[i].group == g {
			return i
		}
	}
	return -1
}

// releaseHeldSubmit proposes group g's creation if p holds it back.
func (n *Node) releaseHeldSubmit(p *partition, g shard.GroupID) {
	if i := p.heldSubmit(g); i >= 0 {
		n.releaseHeld(p, i)
	}
}

// releaseHeld proposes p's i-th held creation, with the outcomes folded
// into it.
func (n *Node) releaseHeld(p *partition, i int) {
	p.propose(p.heldSubs[i].evs)
	p.heldSubs = append(p.heldSubs[:i], p.heldSubs[i+1:]...)
	n.markDirty(p.id)
}

// foldHeld takes outcome o of speculative run sr when its creation is
// held back in p, and reports whether it was: a success goes into the
// creation's entry, released once every run it started has reported; a
// failure (its retry policy reads the task's state) or a lost run
// releases the creation now and is reported when it applies.
func (n *Node) foldHeld(p *partition, sr *specRun, o shard.Outcome) bool {
	i := p.heldSubmit(o.Task.Group())
	if i < 0 {
		return false
	}
	h := &p.heldSubs[i]
	if !o.OK || o.Lost || !p.leader || p.abdicated {
		n.releaseHeld(p, i)
		return true
	}
	h.evs = append(h.evs, n.proposeSpeculative(sr, o))
	if h.pending--; h.pending <= 0 {
		n.releaseHeld(p, i)
	}
	return true
}

// takeHeld empties p's held leases, creations and delivery records (a
// leadership lost) and returns their events.
func (n *Node) takeHeld(p *partition) []shard.Event {
	evs := n.takeDeferred(p, nil)
	for i := range p.heldSubs {
		evs = append(evs, p.heldSubs[i].evs...)
	}
	p.heldSubs = nil
	return append(evs, n.takeNotes(p)...)
}

// takeNotes empties p's held delivery records and returns them.
func (n *Node) takeNotes(p *partition) []shard.Event {
	evs := p.notes
	p.notes, p.notesDue = nil, time.Time{}
	return evs
}

// holdGrants sends a thief its leases evs of p at once, as grants, and
// holds the leases back as the own ones are: a thief's outcome that comes
// within LeaseDefer goes into the log with its lease (reportHeld), one
// entry and one commit where there were two, and the thief's run does not
// wait for the lease's commit. It returns the leases to propose now: all
// of them when this leader may not hold any, and those of external
// handlers (their grants go to a peer's workers, after the commit).
func (n *Node) holdGrants(p *partition, evs []shard.Event) []shard.Event {
	if !n.mayHold(p) {
		return evs
	}
	kept := evs[:0:0]
	for _, e := range evs {
		spec, ok := p.shard.LeasedSpec(e.Task)
		if !ok || n.External(spec.Handler) {
			kept = append(kept, e)
			continue
		}
		n.stats.TasksGranted++
		n.steal.grants[e.Holder] = append(n.steal.grants[e.Holder], n.grantOf(p, &e, spec))
		n.holdBack(p, e)
		if len(n.heldGrants) >= maxSpec {
			clear(n.heldGrants)
		}
		n.heldGrants[e.Task] = heldGrant{round: e.Round, holder: e.Holder}
	}
	return kept
}

// heldGrant is a lease granted to a thief before it applied: the round
// and holder its outcome must name (reportHeld). Not the whole event: a
// map stores a value over 128 bytes apart, one allocation per grant.
type heldGrant struct {
	round  shard.Round
	holder string
}

// holds reports whether p holds a lease of task t back.
func (p *partition) holds(t shard.TaskID) bool {
	for i := range p.deferred {
		if p.deferred[i].ev.Task == t {
			return true
		}
	}
	return false
}

// reportHeld takes outcome o, from its holder's peer from, of a lease p
// holds back: the lease and the outcome are proposed together, and the
// outcome is acknowledged when it applies. It reports false for any
// other outcome.
func (n *Node) reportHeld(p *partition, from string, o shard.Outcome) bool {
	if g, ok := n.heldGrants[o.Task]; ok && g.round == o.Round && g.holder == o.Holder && !p.holds(o.Task) {
		// Its lease already left, in a proposal that has not applied:
		// the outcome goes right behind it in the same log (an entry
		// lost with the leadership takes every later one of its term).
		ev, err := p.shard.ReportHeld(n.now, o)
		if err != nil {
			return false
		}
		p.propose([]shard.Event{ev})
		n.markDirty(p.id)
		n.mesh.pendAck[o.Task] = pendingAck{from: from, round: o.Round}
		return true
	}
	for i := range p.deferred {
		e := p.deferred[i].ev
		if e.Task != o.Task || e.Round != o.Round || e.Holder != o.Holder {
			continue
		}
		ev, err := p.shard.ReportHeld(n.now, o)
		if err != nil {
			return false
		}
		p.deferred = append(p.deferred[:i], p.deferred[i+1:]...)
		if sr := n.spec[o.Task]; sr != nil {
			sr.deferred = false
		}
		p.propose([]shard.Event{e, ev})
		n.markDirty(p.id)
		n.mesh.pendAck[o.Task] = pendingAck{from: from, round: o.Round}
		return true
	}
	return false
}

// mayDefer reports whether own lease e of p may start before it commits:
// a task of this peer's own handlers, which no run here holds and no
// speculation may still start (their (task, round) keys would collide).
func (n *Node) mayDefer(p *partition, e *shard.Event) bool {
	spec, ok := p.shard.LeasedSpec(e.Task)
	if !ok || n.External(spec.Handler) {
		return false
	}
	if c, seen := n.started[e.Task]; seen && c.round >= e.Round {
		return false
	}
	if _, running := n.running[e.Task]; running {
		return false
	}
	_, speculating := n.spec[e.Task]
	return !speculating
}

// undefer moves task t's held lease of partition p, if any, to the
// partition's proposals: its run reported, and the outcome (if one goes
// now) joins it in the next entry.
func (n *Node) undefer(p *partition, t shard.TaskID) {
	for i := range p.deferred {
		if p.deferred[i].ev.Task == t {
			p.propose([]shard.Event{p.deferred[i].ev})
			p.deferred = append(p.deferred[:i], p.deferred[i+1:]...)
			n.markDirty(p.id)
			break
		}
	}
	if sr := n.spec[t]; sr != nil {
		sr.deferred = false
	}
}

// takeDeferred empties p's held leases into the front of evs, ahead of
// its events (outcomes that may follow them), marking their runs'
// speculations as proposed-or-dropped like any other lease. The array of
// p.deferred is kept for the next leases: nothing else points into it.
func (n *Node) takeDeferred(p *partition, evs []shard.Event) []shard.Event {
	k := len(p.deferred)
	if k == 0 {
		return evs
	}
	evs = slices.Grow(evs, k)[:len(evs)+k]
	copy(evs[k:], evs)
	for i := range p.deferred {
		evs[i] = p.deferred[i].ev
		if sr := n.spec[evs[i].Task]; sr != nil {
			sr.deferred = false
		}
	}
	clear(p.deferred)
	p.deferred = p.deferred[:0]
	return evs
}

// nextHeld returns when the first thing a partition holds back is due:
// when flushDeferred next has something to do. n.deferDue, which flushes
// set, may be earlier: what it was set for may have gone already (an
// append carried a held commit, a held creation's runs all reported, a
// lost leadership dropped the lot), and a node that woke for it found
// nothing due (a fifth of a mixed run's wakeups). It walks the partitions
// holdParts marks, and unmarks those that hold nothing.
func (n *Node) nextHeld() (at time.Time, ok bool) {
	earlier := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	for w, word := range n.holdParts.w {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			i := w*64 + b
			p := n.parts[i]
			if p == nil || len(p.commits) == 0 && !p.holding() {
				n.holdParts.set(i, false)
				continue
			}
			for _, c := range p.commits {
				earlier(c.due)
			}
			if len(p.notes) > 0 {
				earlier(p.notesDue)
			}
			for _, h := range p.heldSubs {
				earlier(h.due)
			}
			if len(p.deferred) > 0 {
				earlier(p.deferred[0].due)
			}
		}
	}
	return at, ok
}

// flushDeferred proposes the held leases, creations and delivery records,
// and sends the commit-only appends (commit.go), whose time is up (Tick,
// at n.deferDue), and sets n.deferDue to the next one's.
func (n *Node) flushDeferred() {
	n.deferDue = time.Time{}
	for _, i := range n.held {
		p := n.parts[i]
		if p != nil && len(p.commits) > 0 {
			n.flushCommits(p)
		}
		if p == nil || !p.holding() {
			continue
		}
		if len(p.notes) > 0 {
			if n.now.Before(p.notesDue) {
				n.dueBy(p, p.notesDue)
			} else {
				p.propose(n.takeNotes(p))
				n.markDirty(i)
			}
		}
		for j := 0; j < len(p.heldSubs); {
			if n.now.Before(p.heldSubs[j].due) {
				n.dueBy(p, p.heldSubs[j].due)
				j++
				continue
			}
			n.releaseHeld(p, j)
		}
		k := 0
		for k < len(p.deferred) && !n.now.Before(p.deferred[k].due) {
			k++
		}
		if k > 0 {
			for j := range k {
				e := p.deferred[j].ev
				p.propose([]shard.Event{e})
				if sr := n.spec[e.Task]; sr != nil {
					sr.deferred = false
				}
			}
			p.deferred = append(p.deferred[:0], p.deferred[k:]...)
			n.markDirty(i)
		}
		if len(p.deferred) > 0 {
			n.dueBy(p, p.deferred[0].due)
		}
	}
}
