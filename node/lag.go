package node

// ReplicationLag returns, over the partitions this node serves, the largest
// number of log entries a voter is behind the leader's last index (0 when
// every replica is up to date). It reads Raft's progress, which allocates:
// call it for metrics, not on a hot path.
func (n *Node) ReplicationLag() uint64 {
	var lag uint64
	for _, i := range n.held {
		p := n.parts[i]
		if !p.serving || len(p.conf.Voters) < 2 {
			continue // a lone voter lags nobody (and Status allocates)
		}
		st := p.rn.Status()
		last := st.Progress[n.raftID].Match
		for id, pr := range st.Progress {
			if id != n.raftID && !pr.IsLearner && last > pr.Match {
				lag = max(lag, last-pr.Match)
			}
		}
	}
	return lag
}
