package node

import (
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A task this node leases to itself in the entry that creates its group
// (initialLeases) starts when that entry is proposed, not when it
// commits: its run overlaps the creation's commit, and its outcome is
// proposed as soon as it comes, behind the creation in the same log. Log
// order keeps the guarantees: the outcome's entry commits only with or
// after the creation's (an entry that loses its place in the log takes
// every later one of its term with it), it applies only to the task the
// creation made, in the lease's round and holder (shard fencing), and a
// client hears of the result only when it applies. A creation that never
// commits leaves a run whose outcome nothing takes: the client was not
// answered and submits again (at-least-once, like any run whose outcome
// was lost). W2 saves the commit round trip that separated the creation
// from the run.
//
// spec holds these runs until their creation applies here. An outcome
// that comes first is proposed at once while this node still leads the
// partition in the term it speculated in and the outcome succeeded;
// otherwise (a failure, whose retry policy needs the task's state, or a
// leadership that moved) it waits in the run's entry and is reported
// through the usual path once the creation applies here.
type specRun struct {
	part int
	term uint64
	// round, at and expiry are the lease's: they tell its creation's
	// lease from another creation's of the same task (a submission made
	// again after the first never committed).
	round    shard.Round
	at       time.Time
	expiry   time.Time
	out      *shard.Outcome // the run's outcome once reported, until the creation applies
	proposed bool           // out was proposed as owner, in term
	deferred bool           // a lease held back (defer.go), not proposed yet
}

// maxSpec bounds the speculative runs remembered: creations that never
// apply here (overwritten by another leader's log) leave theirs behind.
const maxSpec = 1 << 16

// speculate starts the own initial leases among evs of a group proposed
// in partition p. Each was counted as an own lease (holdLeases), whose
// slot passes to the run, or is one for this peer's waiting workers
// (initialExternal), whose demand it takes. Only a task this node never started does: a run of
// it under way, or a speculation whose creation may still apply, would
// share its (task, round) key.
func (n *Node) speculate(p *partition, spec *shard.GroupSpec, evs []shard.Event) (runs int) {
	for i := range evs {
		e := &evs[i]
		if e.Type != shard.EvLeased || e.Holder != n.holder {
			continue
		}
		_, idx, ok := e.Task.Split()
		if !ok || idx >= len(spec.Tasks) {
			continue
		}
		if _, seen := n.started[e.Task]; seen {
			continue
		}
		if _, running := n.running[e.Task]; running {
			continue
		}
		if len(n.spec) >= maxSpec {
			clear(n.spec)
		}
		ts := &spec.Tasks[idx]
		r := Run{Task: e.Task, Round: e.Round, Handler: ts.Handler, Trace: spec.Trace, Payload: ts.Payload,
			Timeout: p.shard.Timeout(ts)}
		if spec.Mode == shard.ModeBroadcast {
			r.Shard, r.Shards = idx, len(spec.Tasks)
		}
		if n.External(ts.Handler) {
			// For a worker waiting on this peer (initialExternal): its
			// poll is answered now, its demand taken.
			if !n.takeOwnExternal(e.Task) {
				continue
			}
			n.startExternal(e.Task, e.Round)
			r.External, r.Expiry, r.Name = true, e.Expiry, ts.Name
			r.Info = shard.RunInfoOf(spec.Mode, ts, "") // a new group's task: no error yet
			if evs[0].Type == shard.EvSubmitted {
				r.Created = evs[0].At // the group's creation, applied or not
			}
		} else {
			n.dropOwnLease(e.Task)
			n.startRun(e.Task, e.Round)
		}
		n.setClaim(e.Task, claimed{round: e.Round})
		n.spec[e.Task] = &specRun{part: p.id, term: p.term, round: e.Round, at: e.At, expiry: e.Expiry}
		n.rd.Run = append(n.rd.Run, r)
		runs++
	}
	return runs
}

// reportSpeculative takes the outcome of a run whose creation has not
// applied here yet, and reports whether it did.
func (n *Node) reportSpeculative(p *partition, o shard.Outcome) bool {
	sr, ok := n.spec[o.Task]
	if !ok || sr.round != o.Round {
		return false
	}
	sr.out = new(o) // a copy: &o put o on the heap at every call, matched or not
	if sr.deferred && p != nil && p.id == sr.part {
		n.undefer(p, o.Task) // the lease goes first, in the outcome's entry
	}
	if p != nil && p.id == sr.part && n.foldHeld(p, sr, o) {
		return true
	}
	if o.OK && !o.Lost && p != nil && p.id == sr.part && p.leader && p.term == sr.term && !p.abdicated {
		p.propose([]shard.Event{n.proposeSpeculative(sr, o)})
		n.markDirty(p.id)
	}
	return true
}

// proposeSpeculative returns the event of speculative run sr's success o,
// which the caller proposes as owner, behind its creation: it is kept to
// hand over until it applies, and its run needs no report when the
// creation applies.
func (n *Node) proposeSpeculative(sr *specRun, o shard.Outcome) shard.Event {
	n.localOut[o.Task] = o
	sr.proposed = true
	return shard.Event{Type: shard.EvSucceeded, At: n.now, Group: o.Task.Group(), Task: o.Task,
		Round: o.Round, Holder: o.Holder, Result: o.Result}
}

// appliedSpeculative is called when an own lease e applies here, and
// reports whether its run needs no start: it started when its creation
// was proposed. Its outcome, if reported and not proposed in a leadership
// that still holds, goes the usual way now that the task exists. A
// speculation from another creation of the task (one that never
// committed) whose run is still under way would be taken for this
// lease's: that run is aborted and this lease handed back (its task runs
// again in the next round); when that run is over, the lease starts as
// any committed lease.
func (n *Node) appliedSpeculative(p *partition, e *shard.Event) bool {
	sr, ok := n.spec[e.Task]
	if !ok {
		return false
	}
	delete(n.spec, e.Task)
	if sr.round == e.Round && sr.at.Equal(e.At) && sr.expiry.Equal(e.Expiry) {
		if !p.shard.Runs(e.Task, e.Round, e.Holder) {
			// A lease held back (defer.go) while its task was canceled
			// or changed: it took nothing, and its run stops.
			if r, running := n.running[e.Task]; running && r == e.Round {
				n.rd.Abort = append(n.rd.Abort, RunRef{e.Task, r})
			}
			n.voidClaim(e.Task, e.Round)
			return true
		}
		if o := sr.out; o != nil && !(sr.proposed && p.leader && p.term == sr.term) {
			_ = n.reportOutcome(p, *o)
		}
		return true
	}
	if r, running := n.running[e.Task]; running {
		n.rd.Abort = append(n.rd.Abort, RunRef{e.Task, r})
		n.releaseLease(e.Task)
		_ = n.reportOutcome(p, shard.Outcome{Task: e.Task, Round: e.Round, Holder: n.holder, Lost: true})
		return true
	}
	n.setClaim(e.Task, claimed{}) // the stale claim must not keep this lease from running
	return false
}
