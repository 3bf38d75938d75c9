package node

// UnderReplicated returns how many of the partitions this node leads have
// fewer voters than the replica set the mesh can give them
// (min(Replicas, members): a mesh of one peer is not short of replicas),
// or count among their voters a peer the membership holds dead or no
// longer holds at all. Such a partition loses its majority with one
// failure fewer than configured: the runtime exports the count
// (needle_partitions_under_replicated) so an alert can fire before the
// next failure stops the partition.
func (n *Node) UnderReplicated() int {
	want := min(n.cfg.Replicas, len(n.mesh.members))
	under := 0
	for _, i := range n.held {
		p := n.parts[i]
		if !p.serving {
			continue
		}
		voters := p.conf.Voters
		if len(voters) < want {
			under++
			continue
		}
		for _, v := range voters {
			if v == n.raftID {
				continue
			}
			if id, ok := n.mesh.peerOf(v); !ok || !n.mesh.live(id) {
				under++
				break
			}
		}
	}
	return under
}
