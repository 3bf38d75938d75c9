package simulate

import (
	"fmt"

	"github.com/needle-mesh/needle/shard"
)

// invGate: a group's tasks in flight (READY, RUNNING or WAITING) never
// outnumber its concurrency, on any replica (shard/gate.go). A gate lets a
// task in only when one leaves, and both happen in the apply of one
// entry, so the counts are checked after each Ready whose changes name a
// group with a concurrency (the gated workload).
const invGate = "gate"

// checkGates checks nd's replicas of the groups with a concurrency that
// cs names.
func (c *checker) checkGates(nd *simNode, cs []shard.Change) {
	for i, ch := range cs {
		if i > 0 && cs[i-1].Group == ch.Group {
			continue
		}
		g := c.groups[ch.Group]
		if g == nil || g.spec.Concurrency == 0 {
			continue
		}
		v, err := nd.n.ReplicaGroupSummary(ch.Group)
		if err != nil {
			continue
		}
		if n := v.Counts[shard.Ready] + v.Counts[shard.Running] + v.Counts[shard.Waiting]; n > g.spec.Concurrency {
			c.s.fail(invGate, fmt.Sprintf("n%d: group %s has %d tasks in flight (%v); its concurrency is %d",
				nd.idx, ch.Group, n, v.Counts, g.spec.Concurrency))
			return
		}
	}
}
