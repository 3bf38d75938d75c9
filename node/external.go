package node

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Demand is what the external workers waiting on this peer (long polls)
// ask for: up to Want more tasks of Handler, for workers carrying Labels.
// The runtime computes it from its waiting polls minus the tasks it holds
// for them already, and hands it to the node with SetDemand.
type Demand struct {
	Handler string
	Labels  map[string]string
	Want    int
	// Workers are the ids of the live workers of (Handler, Labels), for
	// scheduled broadcasts to workers (sorted by SetDemand).
	Workers []string
}

// key names the demand's (handler, labels) pair: the node counts its lease
// proposals per key, so that it does not lease twice for the same wait.
func (d *Demand) Key() string {
	return d.Handler + "\x00" + strings.Join(LabelList(d.Labels), ",")
}

// external is the node's side of external workers: what this peer's
// workers serve and wait for, and the leases it proposed or holds for
// them. Leases for external handlers do not take this peer's slots (busy):
// the workers bring their own capacity, which Demand states.
type external struct {
	demand []Demand // sorted by key; Want 0: served, no poll waiting
	// own holds this node's lease proposals for its workers that have not
	// applied, by task: the demand key they were proposed for.
	own map[shard.TaskID]string
	// run holds the external tasks this peer runs (also in Node.running).
	run map[shard.TaskID]bool
	// beatSoon asks for a heartbeat before the next interval: what the
	// workers wait for changed (see mesh.tick).
	beatSoon bool
}

// workerBeatEvery bounds the heartbeats sent early because this peer's
// workers began to wait: an owner learns of them within about this long,
// not a heartbeat interval later.
const workerBeatEvery = 5 * time.Millisecond

// External reports whether handler runs in external workers on this node
// (NodeConfig.Shard.External).
func (n *Node) External(handler string) bool {
	return n.cfg.Shard.External != nil && n.cfg.Shard.External(handler)
}

// SetDemand replaces what this peer's live workers serve and what their
// waiting polls ask for (entries with Want 0: served, nothing asked). The
// node leases READY tasks for it at once from the partitions it serves,
// and heartbeats early when workers began to wait or want more, so that
// owners elsewhere offer theirs without waiting for a gossip round.
func (n *Node) SetDemand(ds []Demand) {
	ds = slices.DeleteFunc(slices.Clone(ds), func(d Demand) bool { return d.Handler == "" })
	slices.SortFunc(ds, func(a, b Demand) int { return strings.Compare(a.Key(), b.Key()) })
	old := map[string]*Demand{}
	for i := range n.ext.demand {
		old[n.ext.demand[i].Key()] = &n.ext.demand[i]
	}
	for i := range ds {
		d := &ds[i]
		d.Workers = slices.Compact(slices.Sorted(slices.Values(d.Workers)))
		// Began to wait, wants more, or another set of workers (what a
		// scheduled broadcast to workers expands over): gossip it soon.
		if o, ok := old[d.Key()]; !ok || (o.Want <= 0) != (d.Want <= 0) || d.Want > o.Want || !slices.Equal(o.Workers, d.Workers) {
			n.ext.beatSoon = true
		}
		delete(old, d.Key())
	}
	if len(old) > 0 {
		n.ext.beatSoon = true
	}
	n.ext.demand = ds
	n.scheduleExternal()
}

// workerAds returns what this peer's workers serve and want, for its
// heartbeat: their demand less the leases this node proposed for them
// and that have not applied yet. An owner elsewhere then leases them only
// what this peer's own READY tasks do not cover: with its own backlog, a
// peer's workers take its tasks (no grant, outcome message or outbox
// write for each), not a surplus that waits in its queue.
func (n *Node) workerAds() []WorkerAd {
	if len(n.ext.demand) == 0 {
		return nil
	}
	proposed := n.ownProposed()
	out := make([]WorkerAd, 0, len(n.ext.demand))
	for _, d := range n.ext.demand {
		out = append(out, WorkerAd{Handler: d.Handler, Labels: LabelList(d.Labels), Want: max(d.Want-proposed[d.Key()], 0),
			Workers: d.Workers})
	}
	return out
}

// ownProposed counts, by demand key, the leases this node proposed for
// its own workers that have not applied yet. A proposal whose task this
// node's replica holds in another state than READY is forgotten first:
// its lease, or another, applied along a path that did not drop it (a
// lease that applied as a speculative run's, among others), and kept, it
// stood for one of the workers' wants for good. Every peer of a mesh
// came to hold as many such as its workers wanted, leased them nothing
// more, and advertised nothing to the others: tasks stayed READY with
// every worker idle (simulate: seed 180012, --peers 4 --tasks 600
// --workers 2).
func (n *Node) ownProposed() map[string]int {
	proposed := map[string]int{}
	for t, k := range n.ext.own {
		if n.ownApplied(t) {
			delete(n.ext.own, t)
			continue
		}
		proposed[k]++
	}
	return proposed
}

// ownApplied reports whether task t, of an own lease proposal for the
// workers, is no longer READY in this node's replica of its partition (a
// task not there yet, its creation not applied, is not).
func (n *Node) ownApplied(t shard.TaskID) bool {
	p := n.parts[n.PartitionOf(t.Group())]
	if p == nil {
		return false
	}
	st, ok := p.shard.StateOf(t)
	return ok && st != shard.Ready
}

// advertisers returns, in id order, the other members whose last
// heartbeat advertised workers and that may be leased to now.
func (n *Node) advertisers() []*member {
	var out []*member
	for _, id := range n.mesh.memberIDs() {
		mb := n.mesh.members[id]
		if id != n.cfg.ID && len(mb.workers()) > 0 && n.mesh.placeable(id) && mb.boot != "" {
			out = append(out, mb)
		}
	}
	return out
}

// adKey names a WorkerAd as Demand.key names a demand.
func adKey(w *WorkerAd) string { return w.Handler + "\x00" + strings.Join(w.Labels, ",") }

// scheduleExternal leases READY tasks of external handlers, in the
// partitions this node serves, to the peers whose workers wait for them:
// this peer first (its demand less the leases already proposed for it),
// then every live member that advertised waiting workers (what it asked
// for less what this node leased to it since its heartbeat). A lease for
// another peer commits like a thief's and goes out as a grant; the same
// rounds, fencing and outbox apply. Highest priority first across
// partitions, for each (handler, labels) in turn.
func (n *Node) scheduleExternal() {
	if n.draining || !n.anyExternalReady() {
		return
	}
	proposed := n.ownProposed()
	for _, d := range n.ext.demand {
		key := d.Key()
		at := shard.Placement{Peer: n.cfg.ID, Labels: d.Labels, Handlers: []string{d.Handler}}
		if got := n.leaseExternal(at, d.Want-proposed[key], n.holder, ""); len(got) > 0 {
			if n.ext.own == nil {
				n.ext.own = map[shard.TaskID]string{}
			}
			for _, t := range got {
				n.ext.own[t] = key
			}
		}
	}
	for _, mb := range n.advertisers() {
		id := mb.id
		ws := mb.workers()
		for i := range ws {
			w := &ws[i]
			key := adKey(w)
			want := w.Want - mb.offered(key)
			if want <= 0 {
				continue
			}
			at := shard.Placement{Peer: id, Labels: ParseLabels(w.Labels), Handlers: []string{w.Handler}}
			if got := n.leaseExternal(at, want, id+"#"+mb.boot, id); len(got) > 0 {
				mb.offer(key, len(got))
			}
		}
	}
}

// anyExternalReady reports whether a partition this node serves holds a
// READY task of an external handler.
func (n *Node) anyExternalReady() bool {
	if n.cfg.Shard.External == nil {
		return false // no handler is external: no shard counts any (a walk per Ready saved)
	}
	for p := range n.readyHeld {
		if p.shard.ExternalReady() > 0 {
			return true
		}
	}
	return false
}

// leaseExternal proposes up to want leases for holder at placement at,
// highest priority first across the partitions this node serves, and
// returns their tasks. thief, when set, is the peer the leases go to as
// grants once committed.
func (n *Node) leaseExternal(at shard.Placement, want int, holder, thief string) []shard.TaskID {
	var out []shard.TaskID
	for want > 0 {
		best := -1
		var bestPrio int32
		var bestSeq uint64
		for p := range n.readyHeld {
			if p.shard.ExternalReady() == 0 {
				continue
			}
			prio, seq, ok := p.shard.HeadFor(at)
			if ok && (best < 0 || prio > bestPrio || (prio == bestPrio && seq < bestSeq)) {
				best, bestPrio, bestSeq = p.id, prio, seq
			}
		}
		if best < 0 {
			break
		}
		p := n.parts[best]
		evs := p.shard.LeaseFor(n.now, want, holder, at, nil)
		if len(evs) == 0 {
			break
		}
		for i := range evs {
			out = append(out, evs[i].Task)
			if thief != "" {
				n.steal.owed[evs[i].Task] = thief
			}
		}
		want -= len(evs)
		p.propose(evs)
		n.markDirty(best)
	}
	return out
}

// servesExternal says whether a live worker in the mesh (this node's view)
// serves handler, and whether one of those carries the labels require asks.
func (n *Node) servesExternal(handler string, require []string) (served, matched bool) {
	ts := shard.TaskSpec{Require: require}
	for _, d := range n.ext.demand {
		if d.Handler == handler {
			served = true
			matched = matched || ts.Matches("", d.Labels)
		}
	}
	for _, id := range n.mesh.memberIDs() {
		mb := n.mesh.members[id]
		if id == n.cfg.ID || !n.mesh.placeable(id) {
			continue
		}
		for _, w := range mb.workers() {
			if w.Handler == handler {
				served = true
				matched = matched || ts.Matches("", ParseLabels(w.Labels))
			}
		}
	}
	return served, matched
}

// dropExternal forgets an own lease proposal for a worker (it applied, or
// will not) and reports whether there was one.
func (n *Node) dropExternal(t shard.TaskID) bool {
	if _, ok := n.ext.own[t]; !ok {
		return false
	}
	delete(n.ext.own, t)
	return true
}

// takeOwnExternal turns an own lease proposal for a worker into a run
// handed to the workers before the lease applies (speculate): the
// proposal is forgotten and the demand it was made for is one task
// smaller until the runtime states it again (SetDemand, once it holds the
// run). It reports whether t was such a proposal.
func (n *Node) takeOwnExternal(t shard.TaskID) bool {
	k, ok := n.ext.own[t]
	if !ok {
		return false
	}
	delete(n.ext.own, t)
	for i := range n.ext.demand {
		if d := &n.ext.demand[i]; d.Key() == k && d.Want > 0 {
			d.Want--
			break
		}
	}
	return true
}

// releaseLostExternal forgets the own lease proposals for workers in
// partition part, which this node no longer leads.
func (n *Node) releaseLostExternal(part int) {
	for t := range n.ext.own {
		if n.PartitionOf(t.Group()) == part {
			delete(n.ext.own, t)
		}
	}
}

// startExternal records that this peer's workers run task t in round r.
// An older round of t held here is simply replaced: its worker's lease is
// stale, and its outcome is refused (no slot to free).
func (n *Node) startExternal(t shard.TaskID, r shard.Round) {
	if n.ext.run == nil {
		n.ext.run = map[shard.TaskID]bool{}
	}
	n.ext.run[t] = true
	n.running[t] = r
}

// endRun forgets the run of t that ends (reported, or aborted before it
// started) and frees its slot, unless it was an external worker's.
func (n *Node) endRun(t shard.TaskID) {
	delete(n.running, t)
	if n.ext.run[t] {
		delete(n.ext.run, t)
		return
	}
	n.busy--
}

// ExternalRunning returns the number of tasks this peer's external workers
// hold (or it holds for them).
func (n *Node) ExternalRunning() int { return len(n.ext.run) }

// externalReady returns the READY tasks of external handlers in the
// partitions this node serves, by handler (nil when none).
func (n *Node) externalReady() map[string]int {
	var by map[string]int
	for p := range n.readyHeld {
		if p.shard.ExternalReady() > 0 {
			by = p.shard.ExternalHandlers(by)
		}
	}
	return by
}

// ExternalReady returns the handlers with READY tasks waiting for an
// external worker in the partitions this node serves, sorted.
func (n *Node) ExternalReady() []string {
	return slices.Sorted(maps.Keys(n.externalReady()))
}

// readyExternal counts the READY tasks of external handlers in the
// partitions this node serves: work for workers, not for thieves.
func (n *Node) readyExternal() int {
	if n.cfg.Shard.External == nil {
		return 0
	}
	total := 0
	for p := range n.readyHeld {
		total += p.shard.ExternalReady()
	}
	return total
}

// stepOffer starts the leases an owner granted this peer's workers
// (scheduleExternal on the owner): they were not asked for by a steal
// request, so the thief's policy and pacing do not see them.
func (n *Node) stepOffer(from string, m Message) {
	if m.Holder != "" && m.Holder != n.holder {
		n.stats.StaleGrants += len(m.Grants)
		return // for this peer's former run: they expire at the owner
	}
	for _, g := range m.Grants {
		if !n.grantable(g, from) {
			continue
		}
		n.mesh.granter[n.PartitionOf(g.Task.Group())] = from
		n.startOffered(g, from)
	}
}

// startOffered hands one granted lease of an external handler to this
// peer's workers, once (a replica may have started it from the committed
// entry already).
func (n *Node) startOffered(g Grant, from string) {
	if g.Timeout <= 0 || !n.claimGrant(g.Task, g.Round, g.Expiry, from) {
		return
	}
	n.startExternal(g.Task, g.Round)
	n.rd.Run = append(n.rd.Run, Run{Task: g.Task, Round: g.Round, Handler: g.Handler, Payload: g.Payload, Timeout: g.Timeout,
		Inputs: g.Inputs, Attempt: g.Attempt, External: true, Expiry: g.Expiry, Trace: g.Trace,
		Shard: g.Shard, Shards: g.Shards, Require: g.Require, Worker: g.Worker, Deaths: g.Deaths,
		Created: g.Created, Name: g.Name, Pin: g.Pin, Info: g.Info})
}

// initialExternal leases a new group's first tasks of external handlers
// in the submission's own entry, as initialLeases does for built-in ones,
// to the peers whose workers wait for them: this peer first (its demand
// less the leases proposed for it), then each live member whose last
// heartbeat advertised waiting workers (less what this node leased to it
// since), as scheduleExternal would once the group applied. The lease
// then applies with the group: this peer hands the run to its waiting
// poll from that Ready (applyLease), another gets its grant in it
// (grantApplied), one Raft commit earlier than a lease entry of its own
// (W2 through workers). Only when nothing external is READY in the
// partitions this node serves, so the new tasks jump no queue; tasks
// with labels or a pin are left to scheduleExternal, which matches them.
func (n *Node) initialExternal(p *partition, spec *shard.GroupSpec) []shard.Event {
	cfg := p.shard.Config()
	if cfg.External == nil || !p.serving || n.draining || !anyExternal(spec, cfg.External) || n.anyExternalReady() {
		return nil
	}
	handler := func(t shard.TaskID) string {
		_, i, _ := t.Split()
		return spec.Tasks[i].Handler
	}
	evs := shard.InitialLeases(n.now, spec, len(spec.Tasks), "", cfg.DefaultTimeout, cfg.LeaseGrace)
	evs = slices.DeleteFunc(evs, func(e shard.Event) bool { return !cfg.External(handler(e.Task)) })
	if len(evs) == 0 {
		return nil
	}
	targets := n.externalTargets()
	out := evs[:0]
	for _, e := range evs {
		h := handler(e.Task)
		i := slices.IndexFunc(targets, func(t extTarget) bool { return t.want > 0 && t.handler == h })
		if i < 0 {
			continue
		}
		t := &targets[i]
		t.want--
		e.Holder = t.holder
		if t.thief == "" {
			if n.ext.own == nil {
				n.ext.own = map[shard.TaskID]string{}
			}
			n.ext.own[e.Task] = t.key
		} else {
			mb := n.mesh.members[t.thief]
			mb.offer(t.key, 1)
			n.steal.owed[e.Task] = t.thief
		}
		out = append(out, e)
	}
	return out
}

// anyExternal reports whether a task of spec is of an external handler,
// asking external once per run of equal handlers (a group's tasks mostly
// share one). A group of in-process tasks makes no leases here.
func anyExternal(spec *shard.GroupSpec, external func(handler string) bool) bool {
	var last string
	for i := range spec.Tasks {
		h := spec.Tasks[i].Handler
		if i > 0 && h == last {
			continue
		}
		if external(h) {
			return true
		}
		last = h
	}
	return false
}

// extTarget is a holder whose workers wait for tasks of handler: this
// peer (thief "") or a member, with what it still waits for under its
// demand key.
type extTarget struct {
	handler, key, holder, thief string
	want                        int
}

// externalTargets lists the holders whose workers wait, in
// scheduleExternal's order: this peer's demands, then the members' ads in
// id order.
func (n *Node) externalTargets() []extTarget {
	var out []extTarget
	if len(n.ext.demand) > 0 && n.mesh.placeable(n.cfg.ID) {
		proposed := n.ownProposed()
		for _, d := range n.ext.demand {
			if k := d.Key(); d.Want-proposed[k] > 0 {
				out = append(out, extTarget{handler: d.Handler, key: k, holder: n.holder, want: d.Want - proposed[k]})
			}
		}
	}
	for _, mb := range n.advertisers() {
		id := mb.id
		ws := mb.workers()
		for i := range ws {
			w := &ws[i]
			if k := adKey(w); w.Want-mb.offered(k) > 0 {
				out = append(out, extTarget{handler: w.Handler, key: k, holder: id + "#" + mb.boot, thief: id, want: w.Want - mb.offered(k)})
			}
		}
	}
	return out
}

// FeatureWorkerDeath (a Heartbeat feature): the peer applies an expired
// event that says its external worker died (shard.Event.Died), which an
// older peer refuses (an unknown flag).
const FeatureWorkerDeath = FeatureShortPromise << 1

// knownDeath keeps an outcome's worker death (shard.Outcome.Died) only
// when every replica of p can apply it; otherwise the lease is handed
// back as before, without counting the death.
func (n *Node) knownDeath(p *partition, o *shard.Outcome) {
	if o.Died == 0 {
		return
	}
	if who, unsure := n.lacking(p, FeatureWorkerDeath); who != "" || unsure {
		o.Died = 0
	}
}
