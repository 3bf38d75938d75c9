package simulate

import "fmt"

// invIdentity: no node reports an identity conflict (node/twins.go: two
// live processes heard under one peer id, a copied data dir). The
// simulator never runs two processes under one identity: its crashes,
// restarts, churn, partitions and reordered or duplicated messages are
// what the detector must tell apart from that, so any conflict is a false
// positive.
const invIdentity = "identity"

// checkIdentity fails invariant identity when a node declared an
// identity conflict (periodic, and as a node stops).
func (s *sim) checkIdentity(nd *simNode) {
	if !nd.up || nd.n == nil {
		return
	}
	if c := nd.n.IdentityConflicts(); c > 0 {
		var which []string
		for _, m := range nd.n.Members() {
			if m.Conflict {
				which = append(which, m.ID)
			}
		}
		s.fail(invIdentity, fmt.Sprintf("%s declared %d identity conflicts (standing for %v): a false positive, no two processes share an identity here",
			nd.id, c, which))
	}
}
