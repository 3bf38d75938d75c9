package peer

import (
	"maps"
	"slices"
	"strings"

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
}

// key names the demand's (handler, labels) pair: the node counts its lease
// proposals per key, so that it does not lease twice for the same wait.
func (d *Demand) key() string {
	return d.Handler + "\x00" + strings.Join(LabelList(d.Labels), ",")
}

// external is the node's side of external workers: what this peer's
// workers wait for, and the leases it proposed or holds for them. Leases
// for external handlers do not take this peer's slots (busy): the workers
// bring their own capacity, which Demand states.
type external struct {
	demand []Demand
	// own holds this node's lease proposals for its workers that have not
	// applied, by task: the demand key they were proposed for.
	own map[shard.TaskID]string
	// run holds the external tasks this peer runs (also in Node.running).
	run map[shard.TaskID]bool
}

// External reports whether handler runs in external workers on this node
// (NodeConfig.Shard.External).
func (n *Node) External(handler string) bool {
	return n.cfg.Shard.External != nil && n.cfg.Shard.External(handler)
}

// SetDemand replaces what this peer's waiting workers ask for. The next
// Ready leases READY tasks for it from the partitions this node serves.
func (n *Node) SetDemand(ds []Demand) {
	n.ext.demand = slices.DeleteFunc(slices.Clone(ds), func(d Demand) bool { return d.Want <= 0 || d.Handler == "" })
	slices.SortFunc(n.ext.demand, func(a, b Demand) int { return strings.Compare(a.key(), b.key()) })
}

// scheduleExternal leases READY tasks of external handlers to this peer's
// waiting workers, up to their demand less the leases already proposed
// for it, highest priority first across the partitions this node serves.
func (n *Node) scheduleExternal() {
	if n.draining || len(n.ext.demand) == 0 {
		return
	}
	proposed := map[string]int{}
	for _, k := range n.ext.own {
		proposed[k]++
	}
	for _, d := range n.ext.demand {
		key := d.key()
		at := shard.Placement{Peer: n.cfg.ID, Labels: d.Labels, Handlers: []string{d.Handler}}
		for want := d.Want - proposed[key]; want > 0; {
			best := -1
			var bestPrio int32
			var bestSeq uint64
			for _, i := range n.held {
				p := n.parts[i]
				if p == nil || !p.serving {
					continue
				}
				prio, seq, ok := p.shard.HeadFor(at)
				if ok && (best < 0 || prio > bestPrio || (prio == bestPrio && seq < bestSeq)) {
					best, bestPrio, bestSeq = i, prio, seq
				}
			}
			if best < 0 {
				break
			}
			p := n.parts[best]
			evs := p.shard.LeaseFor(n.now, want, n.holder, at, nil)
			if len(evs) == 0 {
				break
			}
			if n.ext.own == nil {
				n.ext.own = map[shard.TaskID]string{}
			}
			for i := range evs {
				n.ext.own[evs[i].Task] = key
			}
			want -= len(evs)
			p.propose(evs)
			n.markDirty(best)
		}
	}
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
	for _, i := range n.held {
		if p := n.parts[i]; p != nil && p.serving && p.shard.ExternalReady() > 0 {
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
	total := 0
	for _, i := range n.held {
		if p := n.parts[i]; p != nil && p.serving {
			total += p.shard.ExternalReady()
		}
	}
	return total
}
