package node

import (
	"fmt"
	"math/bits"
)

// partSet is a set of partitions, a bit each: the Node's dueParts marks
// those whose timers may be due or whose webhooks may wait (from the
// shards' OnDue; a mark is cleared when the Node finds nothing there, or
// drops the partition), loud those not quiesced. Each is a superset of
// what it names, and every walk over one still checks what it needs. The
// Node's next deadline and its question whether a Raft tick is needed
// walk these rather than every partition it holds: a peer that founded a
// mesh holds all of them until the ring moves them, and at 1,000
// simulated peers those walks, at every input, touched state cold in the
// cache. (A third set, of the partitions with READY tasks, is gone: with
// it the hostile soak, `make hostile`, left a task RUNNING one run in
// three, though the set was never found stale; cause not found. Its
// walks, readyHeld, are over every partition held again.)
type partSet []uint64

func newPartSet(partitions int) partSet { return make(partSet, (partitions+63)/64) }

func (r partSet) has(part int) bool { return r[part/64]&(1<<(part%64)) != 0 }

func (r partSet) set(part int, on bool) {
	if on {
		r[part/64] |= 1 << (part % 64)
	} else {
		r[part/64] &^= 1 << (part % 64)
	}
}

// held yields, in increasing order, the partitions r marks that n holds.
func (r partSet) held(n *Node) func(yield func(*partition) bool) {
	return func(yield func(*partition) bool) {
		for w, word := range r {
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
	for _, i := range n.held {
		p := n.parts[i]
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

// CheckPartSets reports a partition this node serves with a shard timer
// pending or a webhook waiting that dueParts does not mark (NextDeadline
// would sleep through it), or one not quiesced that loud does not mark.
// For checks (the simulator's), not for a hot path.
func (n *Node) CheckPartSets() error {
	for _, i := range n.held {
		p := n.parts[i]
		if at, due := p.shard.NextDue(); due && p.serving && !n.dueParts.has(i) {
			return fmt.Errorf("partition %d has a timer due at %v but is not marked", i, at)
		}
		if w := p.shard.NotifyPending(); w > 0 && p.serving && !n.dueParts.has(i) {
			return fmt.Errorf("partition %d has %d webhooks waiting but is not marked", i, w)
		}
		if !p.quiesced && !n.loud.has(i) {
			return fmt.Errorf("partition %d is not quiesced but is not marked loud", i)
		}
	}
	return nil
}
