package node

import (
	"slices"

	"github.com/needle-mesh/needle/shard"
)

// Audit returns the operator actions (cancels; schedule set, pause, resume,
// delete) recorded in the partitions this node serves, oldest first.
func (n *Node) Audit() []shard.AuditEntry {
	var out []shard.AuditEntry
	for _, i := range n.held {
		p := n.parts[i]
		if p != nil && p.serving {
			out = append(out, p.shard.Audit()...)
		}
	}
	slices.SortStableFunc(out, func(a, b shard.AuditEntry) int { return a.At.Compare(b.At) })
	return out
}
