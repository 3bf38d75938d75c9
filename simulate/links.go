package simulate

import (
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
)

// links model the transport's connections (peer/p2p). A message between
// two peers travels only on a connection; the runtime opens one to a
// member at an address it knows (peer/loop.go, dialMembers: here, at the
// first message either side sends while it knows the other's address), and
// every peer keeps one to the seed it joined through (node 0, the
// --join of every other). So a member whose address neither side knows is
// unreachable, as it was for real: a member learned from a membership list
// alone has no address until someone tells it.
//
// Gossip (pubsub) reaches at once only the peers its publisher is
// connected to: the others hear it once both have been up for
// gossipMeshAfter, when gossipsub has grafted its mesh and relays through
// it. A joiner's first heartbeats reach the seed alone.
type links struct {
	n    int             // nodes (the client is not linked)
	conn []bool          // open connections, n*n, both directions set
	upAt []time.Duration // when each node last started
	// unlinked counts direct messages dropped for want of a connection;
	// gossipLost, gossip not delivered to a peer not yet in the mesh.
	unlinked, gossipLost uint64
}

// gossipMeshAfter is how long after both peers started their gossip
// reaches each other through relays (gossipsub's heartbeat grafts its mesh
// about a second after a peer subscribes).
const gossipMeshAfter = time.Second

// seed is the node every other dials at start (Config.Join).
const seed = 0

func newLinks(n int) *links {
	return &links{n: n, conn: make([]bool, n*n), upAt: make([]time.Duration, n)}
}

// started records a (re)start of node i: its connections died with its
// previous run.
func (l *links) started(i int, now time.Duration) {
	l.upAt[i] = now
	for j := range l.n {
		l.conn[i*l.n+j], l.conn[j*l.n+i] = false, false
	}
}

// open reports whether nodes a and b have a connection: every node keeps
// one to the seed.
func (l *links) open(a, b int) bool {
	return a == seed || b == seed || l.conn[a*l.n+b]
}

// direct reports whether a message from node a to node b finds a
// connection, opening one when either side knows the other's address.
func (l *links) direct(s *sim, a, b int) bool {
	if l.open(a, b) {
		return true
	}
	na, nb := s.nodes[a], s.nodes[b]
	if na.n != nil && knowsAddr(na, nb) || nb.n != nil && knowsAddr(nb, na) {
		l.conn[a*l.n+b], l.conn[b*l.n+a] = true, true
		return true
	}
	l.unlinked++
	return false
}

// gossip reports whether node a's gossip reaches node b now.
func (l *links) gossip(a, b int, now time.Duration) bool {
	if l.open(a, b) ||
		now-l.upAt[a] >= gossipMeshAfter && now-l.upAt[b] >= gossipMeshAfter {
		return true
	}
	l.gossipLost++
	return false
}

// disconnect tells every running node connected to nd that its
// connections closed (the transport's Disconnected), one link latency after
// nd stopped: the kernel of a stopped process closes its sockets at once.
// A partition or a pause closes none.
func (s *sim) disconnect(nd *simNode) {
	l, i := s.net.links, nd.idx
	for j, o := range s.nodes {
		if j == i || !o.up || !l.open(i, j) {
			continue
		}
		gen, id := o.gen, nd.id
		s.at(s.now+s.net.latency[i*s.net.n+j], func() {
			o.input(gen, func() { o.n.Disconnected(id) })
		})
	}
}

// unreachable counts the pairs of running nodes, members of each other,
// with no connection and no address either way: direct messages between
// them are lost for good.
func (s *sim) unreachable() int {
	l := s.net.links
	n := 0
	for a, na := range s.nodes {
		for b := a + 1; b < len(s.nodes); b++ {
			nb := s.nodes[b]
			if !na.up || !nb.up || l.open(a, b) {
				continue
			}
			aAddrs, aKnows := na.n.MemberAddrs(nb.id)
			bAddrs, bKnows := nb.n.MemberAddrs(na.id)
			if aKnows && bKnows && len(aAddrs) == 0 && len(bAddrs) == 0 {
				n++
			}
		}
	}
	return n
}

// knowsAddr reports whether node a knows an address of node b.
func knowsAddr(a, b *simNode) bool {
	addrs, _ := a.n.MemberAddrs(b.id)
	return len(addrs) > 0
}

// killed returns the nodes Config.Kill stops: the last KillCount (one by
// default), or with KillVoters the voters the kill chose (none before it).
func (s *sim) killed() []*simNode {
	if s.cfg.KillSelect == KillVoters {
		return s.victims
	}
	return s.nodes[len(s.nodes)-max(1, s.cfg.KillCount):]
}

// kill stops the last node(s) for good (Config.Kill, KillCount) and
// watches the others until every running one holds them dead
// (Report.DeadKnownAfter). A node down at the kill is left alone. With
// KillVoters it stops the voters of a partition with a learner
// (learnerVictims), looking again every 10 ms until one has, and
// declares their disks lost UnsafeRecover after.
func (s *sim) kill() {
	if s.cfg.KillSelect == KillVoters {
		if s.victims, s.victimPart = s.learnerVictims(); s.victims == nil {
			s.after(10*time.Millisecond, s.kill)
			return
		}
		if s.cfg.UnsafeRecover > 0 {
			s.after(s.cfg.UnsafeRecover, s.unsafeRecover)
			s.healAt = max(s.healAt, s.now+s.cfg.UnsafeRecover)
		}
	}
	s.killAt = s.now
	if slices.ContainsFunc(s.killed(), func(nd *simNode) bool { return !nd.up }) {
		s.chk.unsafe = nil // fewer lost than two: nothing acknowledged may go
	}
	s.chk.killing()
	for _, nd := range s.killed() {
		if !nd.up {
			continue
		}
		nd.stop(true)
		nd.left = true
		s.watchDeath(nd.id)
	}
	s.chk.observeSurvivors()
}

// learnerVictims returns the voters of the first partition whose leader
// names a learner that applied its own addition (a replica the ring's
// repair is adding, caught up or not), and the partition; nil while
// some node is down or paused (a survivor down at the kill could hold a
// replica nobody reads), or no partition has such a learner. Voters
// that carry the last copies of a label are not killed: the tasks that
// require it would wait for good (as leaver's).
func (s *sim) learnerVictims() ([]*simNode, int) {
	for _, nd := range s.nodes {
		if !nd.up || nd.paused || nd.left {
			return nil, -1
		}
	}
	for p := range s.cfg.Partitions {
		for _, nd := range s.nodes {
			r, ok := nd.n.Replica(p)
			if !ok || r.Leader != nd.id || len(r.Outgoing) > 0 || len(r.Learners) == 0 {
				continue
			}
			var victims []*simNode
			for _, id := range r.Voters {
				i := s.peerIndex(id)
				if i < 0 {
					victims = nil
					break
				}
				victims = append(victims, s.nodes[i])
			}
			if victims == nil || !s.labelsSurvive(victims) {
				break
			}
			for _, id := range r.Learners {
				if i := s.peerIndex(id); i >= 0 {
					if lr, ok := s.nodes[i].n.Replica(p); ok && slices.Contains(lr.Learners, id) {
						slices.SortFunc(victims, func(a, b *simNode) int { return a.idx - b.idx })
						return victims, p
					}
				}
			}
			break
		}
	}
	return nil, -1
}

// unsafeRecover declares the killed nodes' disks lost for good
// (Config.UnsafeRecover): needle forget --unsafe-recover on the first
// running node, as an operator would; a second later if none runs.
// Nothing for a node the kill found down and left alone.
func (s *sim) unsafeRecover() {
	var lost []*simNode
	for _, nd := range s.killed() {
		if nd.left { // (one down at the kill was not killed: it lives on)
			lost = append(lost, nd)
		}
	}
	if len(lost) == 0 {
		return
	}
	for _, nd := range s.nodes {
		if !slices.Contains(lost, nd) && nd.up && !nd.paused {
			s.chk.recovering()
			for _, l := range lost {
				nd.n.ForgetUnsafeRecover(l.id)
			}
			nd.queueDrain()
			return
		}
	}
	s.healAt = max(s.healAt, s.now+time.Second)
	s.after(time.Second, s.unsafeRecover)
}

// watchDeath polls, every 50 ms of virtual time, what the running nodes
// think of id; it stops once all hold it dead (or forgot it).
func (s *sim) watchDeath(id string) {
	for _, nd := range s.nodes {
		if !nd.up || nd.id == id {
			continue
		}
		if st, member := nd.n.PeerState(id); member && st != node.PeerDead {
			s.after(50*time.Millisecond, func() { s.watchDeath(id) })
			return
		}
	}
	s.deadKnown = s.now
}

// labelsSurvive reports whether every label some node carries is carried
// by a node not among victims.
func (s *sim) labelsSurvive(victims []*simNode) bool {
	for i := range s.nodes {
		for key, v := range nodeLabels(s.cfg, i) {
			if !slices.ContainsFunc(s.nodes, func(nd *simNode) bool {
				return !slices.Contains(victims, nd) && nodeLabels(s.cfg, nd.idx)[key] == v
			}) {
				return false
			}
		}
	}
	return true
}
