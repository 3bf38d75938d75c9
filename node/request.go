package node

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/needle-mesh/needle/shard"
)

// Submit proposes a group on behalf of request req (an id the caller picks
// from NextRequest). The reply comes in a later Ready once the group's
// event is committed and applied, or at once for an invalid spec or a
// group that already exists (idempotent repeat).
func (n *Node) Submit(req uint64, spec *shard.GroupSpec) {
	if err := n.ExpandBroadcast(spec); err != nil {
		n.reply(Reply{Req: req, Err: err})
		return
	}
	p := n.parts[n.PartitionOf(spec.ID)]
	if p == nil || !p.leader || p.abdicated || p.stalled {
		// An abdicated leader holds its appends back: the entry would
		// wait for a later term to overwrite it, the client unanswered;
		// a stalled one cannot commit it until a lost voter returns.
		// A leader not serving yet (its first entry of the term not
		// committed) takes it: the entry commits with that one.
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(spec.ID))})
		return
	}
	if spec.Concurrency > 0 && n.refuseLacking(req, p, FeatureGroupConcurrency, "a group's concurrency") {
		return
	}
	ev, exists, err := p.shard.Submit(n.now, spec)
	switch {
	case err != nil:
		n.reply(Reply{Req: req, Err: err})
		return
	case exists:
		ids, _ := p.shard.GroupTasks(spec.ID)
		n.reply(Reply{Req: req, Submit: SubmitResult{Group: spec.ID, Tasks: ids}})
		return
	}
	raced := len(n.submits[spec.ID]) > 0 // another submission of the group waits to apply
	if raced {
		n.releaseHeldSubmit(p, spec.ID) // the first goes into the log first
	}
	evs := append([]shard.Event{ev}, n.initialLeases(p, spec)...)
	evs = append(evs, n.initialExternal(p, spec)...)
	if !n.admitSubmit(p, req, evs) {
		return
	}
	if raced || !n.leaseHeld(p) {
		p.propose(evs)
		// Its initial leases apply only if it applies first, and the
		// first to apply may be another spec under the same key: they
		// start from the log. So do those of a leader without its read
		// lease (a leader not serving yet, or one whose voters may have
		// elected another: a frozen one, resumed), whose entry may never
		// commit while another leader runs the same task in the same
		// round.
		return
	}
	if ev.Spec != nil {
		spec = ev.Spec
	}
	// A creation is held only while it leaves nothing READY behind its
	// leases: tasks READY at creation would wait for it, and thieves with
	// them (a 300-task group held 20 ms kept four idle slots of two
	// thieves waiting that long).
	if runs := n.speculate(p, spec, evs); runs > 0 && len(evs)-1 >= shard.ReadyAtSubmit(spec) && n.mayHold(p) {
		n.holdSubmit(p, evs, runs)
		return
	}
	p.propose(evs)
}

// admitSubmit checks a submission's events (the group and its initial
// leases) against the entry size and notes request req as waiting for
// them; the caller then buffers them with the partition's other events
// (the submissions, outcomes and leases of one loop iteration go into one
// entry at the next Ready; the entry's Req stays 0, the format is the one
// every release applies), or holds them back (holdSubmit). The request is
// answered when its submitted event applies (applySubmitted), or when the
// proposal is dropped (dropSubmits). It reports false, the request
// answered, for a group over the size limit.
func (n *Node) admitSubmit(p *partition, req uint64, evs []shard.Event) bool {
	if size := len(n.encode(&shard.Batch{Origin: n.holder, Req: req, Events: evs})); size > MaxEntryBytes {
		n.releaseLeases(evs)
		n.reply(Reply{Req: req, Err: &shard.FieldError{Task: -1, Field: "tasks",
			Message: fmt.Sprintf("the group encodes to %d bytes, over the limit of %d", size, MaxEntryBytes)}})
		return false
	}
	g := evs[0].Group
	n.reqs[req] = &request{id: req, part: p.id, kind: reqSubmit, group: g}
	n.submits[g] = append(n.submits[g], req)
	n.markDirty(p.id)
	return true
}

// takeSubmit returns the oldest submission of group g still waiting, and
// forgets those answered already (failRequests).
func (n *Node) takeSubmit(g shard.GroupID) (*request, bool) {
	q := n.submits[g]
	defer func() {
		if len(q) == 0 {
			delete(n.submits, g)
		} else {
			n.submits[g] = q
		}
	}()
	for len(q) > 0 {
		id := q[0]
		q = q[1:]
		if r, ok := n.reqs[id]; ok && r.group == g {
			delete(n.reqs, id)
			return r, true
		}
	}
	return nil, false
}

// applySubmitted answers the submission whose event e (proposed by this
// run of the peer with other events) just applied; existed says whether
// the group was there before it.
func (n *Node) applySubmitted(p *partition, e *shard.Event, existed bool) {
	req, ok := n.takeSubmit(e.Group)
	if !ok {
		return
	}
	ids, err := p.shard.GroupTasks(e.Group)
	if err == nil && existed && e.Spec != nil {
		// Two submits with one key raced: the first applied wins.
		err = p.shard.CheckRepeat(e.Spec)
	}
	n.reply(Reply{Req: req.id, Err: err, Submit: SubmitResult{Group: e.Group, Tasks: ids, Created: !existed}})
}

// dropSubmits answers the submissions among evs, whose proposal Raft
// refused on a partition this node no longer serves.
func (n *Node) dropSubmits(evs []shard.Event) {
	for i := range evs {
		if evs[i].Type != shard.EvSubmitted {
			continue
		}
		if req, ok := n.takeSubmit(evs[i].Group); ok {
			n.reply(Reply{Req: req.id, Err: &UnavailableError{Partition: n.PartitionOf(evs[i].Group),
				Reason: "this peer stopped leading it before the submission was logged: nothing was submitted"}})
		}
	}
}

// Cancel proposes the cancellation of a task, or of a whole group when task
// is "". The reply comes once it is applied (at once when there is nothing
// left to cancel).
func (n *Node) Cancel(req uint64, g shard.GroupID, task shard.TaskID, by string) {
	p := n.parts[n.PartitionOf(g)]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(g))})
		return
	}
	evs, err := p.shard.Cancel(n.now, g, task, by)
	if err != nil || len(evs) == 0 {
		n.reply(Reply{Req: req, Err: err})
		return
	}
	n.proposeRequest(p, req, reqCancel, evs)
}

// NextRequest returns a fresh request id.
func (n *Node) NextRequest() uint64 {
	n.reqSeq++
	return n.reqSeq
}

// encode encodes b into the node's scratch buffer: the bytes are valid
// until the next encode. Encoding into a fresh slice grew it by doubling,
// and half of what a batch of a thousand tasks allocated was thrown away.
// Raft keeps the bytes it is proposed (its log and the appends it sends
// share them), so a proposal is a copy of exactly the encoded size: the
// next encode would overwrite a logged entry (TestProposalsOwnTheirBytes).
func (n *Node) encode(b *shard.Batch) []byte {
	if cap(n.enc) > maxKeptEnc {
		n.enc = nil // a large group's buffer goes back to the collector
	}
	n.enc = shard.AppendBatch(n.enc[:0], b)
	return n.enc
}

// maxKeptEnc bounds the scratch buffer a node keeps between encodings.
const maxKeptEnc = 1 << 20

// MaxEntryBytes bounds one Raft entry: a group whose submitted event
// encodes larger is refused (the WAL writes each Ready atomically).
const MaxEntryBytes = 16 << 20

func (n *Node) proposeRequest(p *partition, req uint64, kind requestKind, evs []shard.Event) {
	data := n.encode(&shard.Batch{Origin: n.holder, Req: req, Events: evs})
	if len(data) > MaxEntryBytes {
		n.releaseLeases(evs)
		n.reply(Reply{Req: req, Err: &shard.FieldError{Task: -1, Field: "tasks",
			Message: fmt.Sprintf("the group encodes to %d bytes, over the limit of %d", len(data), MaxEntryBytes)}})
		return
	}
	n.wake(p, false)
	if err := p.rn.Propose(bytes.Clone(data)); err != nil { // Raft keeps data; encode reuses its buffer
		n.releaseLeases(evs)
		n.reply(Reply{Req: req, Err: &UnavailableError{Partition: p.id,
			Reason: fmt.Sprintf("its leader here could not propose the request (%v): leadership is changing", err)}})
		return
	}
	n.stats.Entries++
	n.reqs[req] = &request{id: req, part: p.id, kind: kind}
	n.markDirty(p.id)
}

func (n *Node) reply(r Reply) { n.rd.Replies = append(n.rd.Replies, r) }

// failRequests answers every request pending on a partition this node no
// longer leads.
func (n *Node) failRequests(part int) {
	for _, id := range sortedKeys(n.reqs) {
		if r := n.reqs[id]; r.part == part {
			delete(n.reqs, id)
			if r.group != "" {
				n.dropSubmit(r.group, id)
			}
			n.reply(Reply{Req: id, Err: ErrStopped})
		}
	}
}

// dropSubmit removes request id from the submissions waiting for group g,
// leaving the others (a retry of the same key is another request, which
// failRequests answers in its turn: taking the first waiting one here
// dropped that one unanswered and left a hole in the loop's keys).
func (n *Node) dropSubmit(g shard.GroupID, id uint64) {
	q := slices.DeleteFunc(n.submits[g], func(r uint64) bool { return r == id })
	if len(q) == 0 {
		delete(n.submits, g)
		return
	}
	n.submits[g] = q
}

// applyBatch applies one committed entry's events to the shard and derives
// what follows: replies, runs, aborts, freed slots.
func (n *Node) applyBatch(p *partition, b *shard.Batch) {
	var req *request
	if b.Origin == n.holder && b.Req != 0 {
		req = n.reqs[b.Req]
		delete(n.reqs, b.Req)
	}
	created := false
	if k := leasesTo(b.Events, n.holder); k > 1 {
		n.rd.Run = slices.Grow(n.rd.Run, k) // a Run is large: sized once, not doubled
	}
	for i := range b.Events {
		e := &b.Events[i]
		existed := e.Type == shard.EvSubmitted && p.shard.HasGroup(e.Group)
		p.shard.Apply(b.Events[i : i+1])
		n.rd.Applied++
		switch e.Type {
		case shard.EvSubmitted:
			created = created || !existed
			if b.Origin == n.holder && b.Req == 0 {
				n.applySubmitted(p, e, existed)
			}
		case shard.EvLeased:
			n.applyLease(p, e, b.Origin)
			if w, ok := p.shard.Waited(e.Task); ok && p.serving {
				n.rd.QueueWaits = append(n.rd.QueueWaits, w)
			}
		case shard.EvExpired:
			n.stats.LeaseExpiries++
			if r, ok := n.running[e.Task]; ok && r == e.Round {
				n.rd.Abort = append(n.rd.Abort, RunRef{e.Task, r})
			}
			// An outcome that handed a lease back (an external worker lost)
			// is answered like any outcome.
			n.ackApplied(e)
			if o, ok := n.localOut[e.Task]; ok && o.Round == e.Round {
				delete(n.localOut, e.Task)
			}
		case shard.EvScheduleFired:
			if b.Origin == n.holder && e.By == "" && !e.NotBefore.IsZero() {
				n.rd.ScheduleLags = append(n.rd.ScheduleLags, e.At.Sub(e.NotBefore))
			}
		case shard.EvSucceeded, shard.EvFailed:
			n.ackApplied(e)
			if o, ok := n.localOut[e.Task]; ok && o.Round == e.Round {
				delete(n.localOut, e.Task)
			}
		}
	}
	from := len(n.rd.Changes)
	n.rd.Changes = p.shard.AppendChanges(n.rd.Changes)
	for _, c := range n.rd.Changes[from:] {
		if r, running := n.running[c.Task]; running && c.Abort && c.Holder == n.holder {
			n.rd.Abort = append(n.rd.Abort, RunRef{c.Task, r})
		}
	}
	if req != nil {
		n.replyApplied(p, req, b, created)
	}
}

// leasesTo counts the leases to holder among evs.
func leasesTo(evs []shard.Event, holder string) int {
	k := 0
	for i := range evs {
		if evs[i].Type == shard.EvLeased && evs[i].Holder == holder {
			k++
		}
	}
	return k
}

func (n *Node) replyApplied(p *partition, req *request, b *shard.Batch, created bool) {
	if req.kind == reqTrigger {
		n.replyTriggered(p, req, b)
		return
	}
	if req.kind == reqScheduleUpdate {
		n.replyUpdated(p, req, b)
		return
	}
	r := Reply{Req: req.id}
	if req.kind == reqSubmit && len(b.Events) > 0 && b.Events[0].Type == shard.EvSubmitted {
		g := b.Events[0].Group
		ids, err := p.shard.GroupTasks(g)
		if err == nil && !created && b.Events[0].Spec != nil {
			// Two submits with one key raced: the first applied wins.
			err = p.shard.CheckRepeat(b.Events[0].Spec)
		}
		r.Err = err
		r.Submit = SubmitResult{Group: g, Tasks: ids, Created: created}
	}
	n.reply(r)
}

// applyLease starts a committed lease held by this run of the peer, and
// frees the slot of one this node proposed that did not take effect.
func (n *Node) applyLease(p *partition, e *shard.Event, origin string) {
	ours := origin == n.holder
	if e.Holder != n.holder {
		n.grantApplied(p, e)
		return
	}
	if n.appliedSpeculative(p, e) {
		return
	}
	run, ok := p.shard.RunOf(e.Task, e.Round, e.Holder)
	si, sn := p.shard.BroadcastShard(e.Task)
	if ok && n.External(run.Handler) {
		n.dropExternal(e.Task)
		if !n.claimLease(e.Task, e.Round, e.Expiry, origin) {
			return
		}
		n.startExternal(e.Task, e.Round)
		n.rd.Run = append(n.rd.Run, Run{
			Task: e.Task, Round: e.Round, Handler: run.Handler, Trace: p.shard.Trace(e.Task), Payload: p.shard.Payload(e.Task), Shard: si, Shards: sn,
			Timeout: p.shard.Timeout(&run), Inputs: rawInputs(p.shard.Inputs(e.Task)), External: true, Attempt: p.shard.Attempts(e.Task),
			Require: run.Require, Expiry: e.Expiry, Name: run.Name, Pin: run.Pin, Worker: p.shard.BroadcastWorker(e.Task),
			Deaths: p.shard.Deaths(e.Task), Created: p.shard.Created(e.Task), Info: p.shard.RunInfo(e.Task),
		})
		return
	}
	if !ok {
		if ours && !n.dropExternal(e.Task) {
			n.releaseLease(e.Task)
			delete(n.leaseAt, e.Task)
		}
		n.voidClaim(e.Task, e.Round)
		return
	}
	if ours {
		if at, ok := n.leaseAt[e.Task]; ok {
			delete(n.leaseAt, e.Task)
			n.pace.committed(n.now.Sub(at))
		}
	}
	if !n.claimLease(e.Task, e.Round, e.Expiry, origin) {
		if ours {
			n.releaseLease(e.Task)
		}
		return // a grant to this peer, already started from the grant message
	}
	if ours && n.ownLeases[e.Task].n > 0 {
		n.dropOwnLease(e.Task) // its slot was counted when it was proposed
	} else {
		// A stolen lease this replica applied before its grant arrived,
		// or one of ours released when the leadership was lost, which
		// committed after all.
		n.busy++
		if !ours {
			n.steal.took(shard.HolderPeer(origin))
		}
	}
	n.startRun(e.Task, e.Round)
	n.rd.Run = append(n.rd.Run, Run{
		Task: e.Task, Round: e.Round, Handler: run.Handler, Trace: p.shard.Trace(e.Task), Payload: p.shard.Payload(e.Task), Shard: si, Shards: sn,
		Timeout: p.shard.Timeout(&run), Attempt: p.shard.Attempts(e.Task), Inputs: rawInputs(p.shard.Inputs(e.Task)),
	})
}

// startRun records that this peer starts task t in round r (its slot was
// counted in busy). An older round of t still running here is superseded:
// its slot stays taken until its handler reports.
func (n *Node) startRun(t shard.TaskID, r shard.Round) {
	if prev, ok := n.running[t]; ok && prev != r {
		if n.superseded == nil {
			n.superseded = map[shard.TaskID][]shard.Round{}
		}
		n.superseded[t] = append(n.superseded[t], prev)
	}
	n.running[t] = r
}

// releaseLeases frees the slots of local lease proposals that were dropped.
func (n *Node) releaseLeases(evs []shard.Event) {
	for i := range evs {
		if evs[i].Type == shard.EvLeased && evs[i].Holder == n.holder && !n.dropExternal(evs[i].Task) {
			delete(n.spec, evs[i].Task) // its creation will not apply
			n.releaseLease(evs[i].Task)
			delete(n.leaseAt, evs[i].Task)
		}
	}
}

// ownLease is the own lease proposals of one task not applied yet: n of
// them, in partition part.
type ownLease struct{ part, n int }

// holdLeases counts the slots of leases this node proposes for itself in
// partition part.
func (n *Node) holdLeases(part int, evs []shard.Event) {
	n.busy += len(evs)
	for i := range evs {
		l := n.ownLeases[evs[i].Task]
		n.ownLeases[evs[i].Task] = ownLease{part: part, n: l.n + 1}
	}
	n.timeLeases(evs)
}

// dropOwnLease forgets one own lease proposal of t (it applied, or will
// not); the caller frees or passes on its slot.
func (n *Node) dropOwnLease(t shard.TaskID) {
	if l := n.ownLeases[t]; l.n > 1 {
		n.ownLeases[t] = ownLease{part: l.part, n: l.n - 1}
	} else {
		delete(n.ownLeases, t)
	}
}

// releaseLease frees the slot of an own lease proposal that will not start
// a run here (if one still holds a slot).
func (n *Node) releaseLease(t shard.TaskID) {
	if n.ownLeases[t].n > 0 {
		n.dropOwnLease(t)
		n.busy--
	}
}

// releaseLostLeases frees the slots of the own lease proposals of
// partition part, which this node no longer leads: their entries may be
// overwritten by the new leader's and never apply here. One that commits
// after all takes its slot again when it applies (applyLease).
func (n *Node) releaseLostLeases(part int) {
	n.releaseLostExternal(part)
	for t, l := range n.ownLeases {
		if l.part == part {
			delete(n.ownLeases, t)
			n.busy -= l.n
		}
	}
}

// Report hands the node a local handler's outcome. The slot is free again;
// the owner (this node when it leads the partition) proposes the outcome if
// it still holds the current round.
func (n *Node) Report(o shard.Outcome) error {
	o.Bound() // before the outbox or the log keeps it
	round, ok := n.running[o.Task]
	if !ok || round != o.Round {
		if rs := n.superseded[o.Task]; slices.Contains(rs, o.Round) {
			// A run a newer round of the same task replaced here: its
			// slot is free; its outcome is stale at the owner anyway.
			if rs = slices.DeleteFunc(rs, func(r shard.Round) bool { return r == o.Round }); len(rs) == 0 {
				delete(n.superseded, o.Task)
			} else {
				n.superseded[o.Task] = rs
			}
			n.busy--
		}
		return shard.ErrStaleRound
	}
	ext := n.ext.run[o.Task]
	n.endRun(o.Task)
	if !ext {
		n.pace.ran(o.Took)
	}
	o.Holder = n.holder
	p := n.parts[n.PartitionOf(o.Task.Group())]
	if n.reportSpeculative(p, o) {
		return nil
	}
	return n.reportOutcome(p, o)
}

// reportOutcome proposes a local outcome as the owner of its partition p,
// or forwards it to the owner.
func (n *Node) reportOutcome(p *partition, o shard.Outcome) error {
	if p == nil || !p.serving {
		n.forward(o)
		return nil
	}
	n.knownDeath(p, &o)
	ev, err := p.shard.Report(n.now, o)
	if errors.Is(err, shard.ErrNotLeased) {
		// A run whose lease this node held back or proposed and then
		// lost with the partition: the task was READY in the log all
		// along, and a lease of the same round and holder may still
		// apply (this node leading again), whose run this one is. The
		// outbox keeps the outcome until it counts or goes stale.
		n.forward(o)
		return nil
	}
	if err != nil {
		n.stats.StaleOutcomes++
		return err
	}
	p.propose([]shard.Event{ev})
	n.markDirty(p.id)
	// Until its event commits, the outcome lives only in this leader's
	// log: if leadership moves first, the entry is lost and the new owner
	// would wait for the lease to expire. Keep it to hand over (handOver).
	n.localOut[o.Task] = o
	return nil
}

// handOver sends the outcomes this node proposed as owner of partition p,
// whose events have not committed, to whoever owns p now (through the
// outbox): it just lost the leadership, and with it those entries.
func (n *Node) handOver(p *partition) {
	for _, id := range sortedKeys(n.localOut) {
		if o := n.localOut[id]; n.PartitionOf(id.Group()) == p.id {
			delete(n.localOut, id)
			n.forward(o)
		}
	}
}

// schedule leases READY tasks to this peer's free slots, highest priority
// first across the partitions it leads.
func (n *Node) schedule() {
	if n.draining {
		return // a draining peer takes no new leases; thieves may still take its work
	}
	limit := n.cfg.Slots + n.ownAhead()
	if n.busy < limit && n.askStranded() {
		limit-- // kept for what the victim grants
	}
	for n.busy < limit {
		best := -1
		var bestPrio int32
		var bestSeq uint64
		for p := range n.readyHeld {
			prio, seq, ok := p.shard.HeadFor(n.placement)
			if ok && (best < 0 || prio > bestPrio || (prio == bestPrio && seq < bestSeq)) {
				best, bestPrio, bestSeq = p.id, prio, seq
			}
		}
		if best < 0 {
			return
		}
		p := n.parts[best]
		free := limit - n.busy
		evs := p.shard.LeaseFor(n.now, free, n.holder, n.placement, nil)
		if len(evs) == 0 {
			return
		}
		n.holdLeases(best, evs)
		if evs = n.deferLeases(p, evs); len(evs) > 0 {
			p.propose(evs)
			n.markDirty(best)
		}
	}
}

// ownAhead is how many leases this peer holds for its own slots beyond
// them (pacer.ahead). None while thieves drain a backlog short enough
// that this peer starts its tasks before their leases commit
// (deferLeases: a slot that frees takes its next task in the same step),
// and in its tail, with a margin (ownTailSlowRuns): there a task held
// ahead waits behind a run here while a thief's slot could start it.
func (n *Node) ownAhead() int {
	ahead := n.pace.ahead(n.cfg.Slots, n.cfg.LeaseAhead)
	if ahead == 0 || !n.steal.enabled || n.steal.drain.Slots(n.now, 0) == 0 {
		return ahead
	}
	if ready := n.readyRunnable(); ready <= n.cfg.Slots*n.cfg.LeaseAhead && n.inTail(ready, ownTailSlowRuns) {
		return 0
	}
	return ahead
}

// ownTailSlowRuns is steal.TailSlowRuns for this peer's own leases ahead:
// not holding them costs a step between a run's end and the next start,
// where not granting a thief ahead costs it a steal's round trip.
const ownTailSlowRuns = 4

// schedulePeers leases READY tasks to this peer's free slots and to its
// external workers' demand.
func (n *Node) schedulePeers() {
	n.schedule()
	n.scheduleExternal()
}

// initialLeases leases a new group's first tasks to this peer's free slots
// in the submission's own entry, saving a Raft commit before they start
// (W2 latency). Only when this peer serves the partition and nothing else is
// READY anywhere it leads, so the new tasks jump no queue.
func (n *Node) initialLeases(p *partition, spec *shard.GroupSpec) []shard.Event {
	free := n.cfg.Slots - n.busy
	if !p.serving || free <= 0 || n.draining || n.readyRunnable() > 0 {
		return nil
	}
	cfg := p.shard.Config()
	evs := shard.InitialLeases(n.now, spec, free, n.holder, cfg.DefaultTimeout, cfg.LeaseGrace)
	if cfg.External != nil {
		// Tasks of external handlers are for the workers that serve them,
		// never for this peer's own slots.
		evs = slices.DeleteFunc(evs, func(e shard.Event) bool {
			_, i, _ := e.Task.Split()
			return cfg.External(spec.Tasks[i].Handler)
		})
	}
	n.holdLeases(p.id, evs)
	return evs
}

// timeLeases notes when this node proposed its own leases. Entries lost
// without a drop notice (a deposed leader's tail) would leave theirs
// behind, so the map is reset when it grows past any plausible number of
// leases in flight.
func (n *Node) timeLeases(evs []shard.Event) {
	if len(n.leaseAt) > 1<<16 {
		clear(n.leaseAt)
	}
	for i := range evs {
		n.leaseAt[evs[i].Task] = n.now
	}
}

// readyTotal counts READY tasks in the partitions this node serves.
func (n *Node) readyTotal() int {
	total := 0
	for p := range n.readyHeld {
		total += p.shard.ReadyLen()
	}
	return total
}
