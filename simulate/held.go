package simulate

import (
	"fmt"
	"slices"

	"github.com/needle-mesh/needle/node"
)

// heldCounts returns how many partitions each up peer still in the mesh
// holds a replica of, and how many of those replicas the partition's
// latest configuration (as the replica that applied the most has it)
// names in no role: copies a peer kept after it was removed.
func (s *sim) heldCounts() (held []int, extra int) {
	latest := make([]*node.ReplicaInfo, s.cfg.Partitions)
	for _, nd := range s.nodes {
		if !nd.up || nd.n == nil {
			continue
		}
		for _, part := range nd.n.Held() {
			if r, ok := nd.n.Replica(part); ok && (latest[part] == nil || r.Applied > latest[part].Applied) {
				latest[part] = &r
			}
		}
	}
	for _, nd := range s.nodes {
		if !nd.up || nd.left || nd.n == nil {
			continue
		}
		h := nd.n.Held()
		held = append(held, len(h))
		for _, part := range h {
			if r := latest[part]; !slices.Contains(r.Voters, nd.id) && !slices.Contains(r.Learners, nd.id) && !slices.Contains(r.Outgoing, nd.id) {
				extra++
			}
		}
	}
	return held, extra
}

// checkHeld is invariant "held": at the end of an idle run without
// faults, whose replica sets all settled (fullyReplicated), every peer
// holds exactly the partitions whose configuration names it. A peer that
// kept the partitions it was removed from held every partition it ever
// held, forever (docs/design.md, "Replica lifecycle").
func (s *sim) checkHeld(extra int) {
	if !s.wl.idle || len(s.cfg.Faults) > 0 || extra == 0 || !s.fullyReplicated() {
		return
	}
	for _, nd := range s.nodes {
		if !nd.up || nd.left || nd.n == nil {
			continue
		}
		var stale []int
		for _, part := range nd.n.Held() {
			if r, _ := nd.n.Replica(part); !slices.Contains(r.Voters, nd.id) {
				stale = append(stale, part)
			}
		}
		if len(stale) > 0 {
			s.fail(invHeld, fmt.Sprintf("%s holds %d partitions, %d of them (%v) as no voter of their settled configuration",
				nd.id, len(nd.n.Held()), len(stale), stale[:min(len(stale), 8)]))
			return
		}
	}
	s.fail(invHeld, fmt.Sprintf("%d replicas held by peers their partitions' settled configurations do not name", extra))
}
