package node

import (
	"fmt"
	"math/bits"
)

// partSet is a set of partitions, a bit each: the Node's readyParts marks
// those whose shard has READY tasks (from the shards' OnReady), dueParts
// those whose timers may be due or whose webhooks may wait (OnDue), loud
// those not quiesced. Each is a superset of what it names (a mark is
// cleared when the Node finds nothing there, or drops the partition), and
// every walk over one still checks what it needs. What the Node does per
// input (its load for the failure detector's and the heartbeat's checks,
// its own leases, a thief's grants, its next deadline) walks these rather
// than every partition it holds: a peer that founded a mesh holds all of
// them until the ring moves them, and at 1,000 simulated peers those
// walks were a fifth of the formation's CPU.
type partSet struct {
	w []uint64
	// nz counts the words not zero: a walk of an empty set (an idle
	// peer's READY marks, read at every input) reads none.
	nz int
}

func newPartSet(partitions int) partSet { return partSet{w: make([]uint64, (partitions+63)/64)} }

func (r *partSet) has(part int) bool { return r.w[part/64]&(1<<(part%64)) != 0 }

func (r *partSet) set(part int, on bool) {
	w := &r.w[part/64]
	was := *w != 0
	if on {
		*w |= 1 << (part % 64)
	} else {
		*w &^= 1 << (part % 64)
	}
	switch now := *w != 0; {
	case now && !was:
		r.nz++
	case was && !now:
		r.nz--
	}
}

// held yields, in increasing order, the partitions r marks that n holds.
func (r *partSet) held(n *Node) func(yield func(*partition) bool) {
	return func(yield func(*partition) bool) {
		if r.nz == 0 {
			return
		}
		for w, word := range r.w {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				if p := n.parts[w*64+b]; p != nil && !yield(p) {
					return
				}
			}
		}
	}
}

// readyHeld yields, in increasing order, the partitions this node holds
// and serves whose READY queue is not empty.
func (n *Node) readyHeld(yield func(*partition) bool) {
	for p := range n.readyParts.held(n) {
		if !p.serving || p.shard.ReadyLen() == 0 {
			continue
		}
		if !yield(p) {
			return
		}
	}
}

// setQuiesced records whether p is quiesced, in p and in loud.
func (n *Node) setQuiesced(p *partition, on bool) {
	p.quiesced = on
	n.loud.set(p.id, !on)
}

// CheckPartSets reports a partition this node holds whose READY queue is
// not empty but which readyParts does not mark (the walks over readyHeld
// would miss its work), or that it serves with a shard timer pending but
// dueParts does not mark (NextDeadline would sleep through it). For
// checks (the simulator's), not for a hot path.
func (n *Node) CheckPartSets() error {
	for _, i := range n.held {
		p := n.parts[i]
		if l := p.shard.ReadyLen(); l > 0 && !n.readyParts.has(i) {
			return fmt.Errorf("partition %d holds %d READY tasks but is not marked ready", i, l)
		}
		if at, due := p.shard.NextDue(); due && p.serving && !n.dueParts.has(i) {
			return fmt.Errorf("partition %d has a timer due at %v but is not marked", i, at)
		}
		if w := p.shard.NotifyPending(); w > 0 && p.serving && !n.dueParts.has(i) {
			return fmt.Errorf("partition %d has %d webhooks waiting but is not marked", i, w)
		}
		if !p.quiesced && !n.loud.has(i) {
			return fmt.Errorf("partition %d is not quiesced but is not marked loud", i)
		}
		if at, due := p.shard.NextDue(); due && p.serving && n.timers.known && (!n.timers.ok || n.timers.at.After(at)) {
			return fmt.Errorf("partition %d has a timer due at %v but the earliest cached is %v (%v)", i, at, n.timers.at, n.timers.ok)
		}
	}
	return nil
}
