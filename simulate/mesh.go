package simulate

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// This file holds the plug points between the simulator and the mesh:
// routing, message delivery, gossip and replica agreement. n0 founds the
// mesh (bootstraps every partition); the others join by gossip and get
// replicas through Raft configuration changes.

// route returns the node a request for group g goes to: the owner (Raft
// leader, serving) as the first live node that knows one says, else the
// ring's preferred owner over the full membership (the client's guess, as
// a client that submits to any peer and lets it forward).
func (s *sim) route(g shard.GroupID) int {
	for _, nd := range s.nodes {
		if !nd.up || nd.paused {
			continue
		}
		if nd.n.Serving(g) {
			return nd.idx
		}
		if o := nd.n.Owner(g); o != "" {
			if i := s.peerIndex(o); i >= 0 {
				return i
			}
		}
	}
	return s.owners[ring.PartitionOf(shard.RouteKey(string(g)), s.cfg.Partitions)]
}

// serving returns a live node that serves g's partition, or nil.
func (s *sim) serving(g shard.GroupID) *simNode {
	for _, nd := range s.nodes {
		if nd.up && !nd.paused && nd.n.Serving(g) {
			return nd
		}
	}
	return nil
}

// peerIndex maps a peer id to a node index; -1 when it names no node (the
// network counts the message undeliverable).
func (s *sim) peerIndex(id string) int {
	if i, ok := s.byID[id]; ok {
		return i
	}
	return -1
}

// step hands a message from another node to nd (inside nd.input, so the
// node has ticked to its own now). A refused message is the sender's
// problem, as on a real stream; the count shows in the report.
func (s *sim) step(nd *simNode, from int, m *node.Message) {
	switch m.Type {
	case node.MsgGrant:
		s.starveGrant(nd, from, m)
	case node.MsgStealReq:
		s.starveAsk(nd, from, m)
	}
	if err := nd.n.Step(s.nodes[from].id, *m); err != nil {
		s.st.refusedMsgs++
	}
}

// gossip sends a best-effort message to every other node. What does
// not reach a node (links.gossip) is counted as send counts it, without
// building its envelope: 5,000 peers starting together gossip 25 million
// heartbeats that reach no one.
func (s *sim) gossip(from int, m node.Message) {
	nw := s.net
	kind := trafficKind(&message{env: &node.Envelope{Msg: m}})
	for to := range s.nodes {
		switch {
		case to == from:
		case !nw.links.gossip(from, to, s.now):
			nw.lost(kind)
		default:
			nw.send(from, to, message{env: &node.Envelope{To: s.nodes[to].id, Msg: m}, gossip: true})
		}
	}
}

// partitionOf returns g's partition.
func (s *sim) partitionOf(g shard.GroupID) int {
	return ring.PartitionOf(shard.RouteKey(string(g)), s.cfg.Partitions)
}

// describePartition says what each running node's replica of part is, for
// a liveness report: why nobody serves it.
func (s *sim) describePartition(part int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "partition %d:", part)
	for _, nd := range s.nodes {
		switch {
		case nd.left:
			fmt.Fprintf(&b, " %s left;", nd.id)
		case !nd.up || nd.paused:
			fmt.Fprintf(&b, " %s down;", nd.id)
		default:
			if r, ok := nd.n.Replica(part); ok {
				fmt.Fprintf(&b, " %s %s term %d leader %q applied %d voters %v learners %v outgoing %v serving %v",
					nd.id, r.Raft, r.Term, r.Leader, r.Applied, r.Voters, r.Learners, r.Outgoing, r.Serving)
				if r.Abdicated {
					b.WriteString(" abdicated")
				}
				b.WriteString(";")
			} else {
				fmt.Fprintf(&b, " %s no replica;", nd.id)
			}
		}
	}
	return b.String()
}

// checkPartSets checks that the running nodes' sets of partitions with
// READY tasks and with timers pending (what their per-input walks and
// next deadlines visit) mark each of them: every node when all, else
// the next partSetsPerCheck nodes in turn (the periodic check: at 1,000
// peers a check of every node every second was 3% of an idle run, and a
// mark missed stays missed until a node's next turn).
func (s *sim) checkPartSets(all bool) {
	from, n := 0, len(s.nodes)
	if !all {
		from, n, s.partSetsNext = checkTurn(s.partSetsNext, len(s.nodes), partSetsPerCheck)
	}
	for i := range n {
		nd := s.nodes[(from+i)%len(s.nodes)]
		if !nd.up || nd.n == nil {
			continue
		}
		if err := nd.n.CheckPartSets(); err != nil {
			s.fail(invPartSets, fmt.Sprintf("%s: %v", nd.id, err))
			return
		}
	}
}

// partSetsPerCheck is how many nodes a periodic checkPartSets checks.
const partSetsPerCheck = 64

// checkTurn is the turn of a check of k of nodes nodes starting at next:
// the first node and how many (all when they are k or fewer), and where
// the next turn starts.
func checkTurn(next, nodes, k int) (from, n, after int) {
	if nodes <= k {
		return 0, nodes, 0
	}
	from = next % nodes
	return from, k, (from + k) % nodes
}

// checkSlots runs once every task is terminal: a node's busy slots must be
// its runs (a stale round may still run) and its own lease proposals, and
// its runs the handlers still running or queued. A slot counted and never
// freed stops a peer from stealing for good: a task pinned to it then
// never runs.
func (s *sim) checkSlots() {
	if !s.done() {
		return // the run stopped early (max sim time): slots may be in flight
	}
	for _, nd := range s.nodes {
		if !nd.up {
			continue
		}
		handlers := nd.active
		for _, j := range nd.queue {
			if !j.done {
				handlers++
			}
		}
		// Busy counts runs and own lease proposals (a schedule may have
		// fired as the run ended); runs must be the handlers. External
		// runs take no slot: they are what the hub holds for its workers.
		ext, held := nd.n.ExternalRunning(), 0
		if nd.hub != nil {
			held = nd.hub.holding()
		}
		if ext != held {
			s.fail(invSlots, fmt.Sprintf("%s counts %d external runs; its hub holds %d", nd.id, ext, held))
			return
		}
		if st := nd.n.Stats(); st.Busy != st.Running-ext+st.Superseded+st.Proposed || st.Running-ext+st.Superseded != handlers || st.Orphaned > 0 {
			s.fail(invSlots, fmt.Sprintf("%s counts %d busy slots (running %d, superseded %d, proposed %d, of which %d in partitions it does not serve) with %d handlers running or queued",
				nd.id, st.Busy, st.Running, st.Superseded, st.Proposed, st.Orphaned, handlers))
			return
		}
	}
}

// fullyReplicated reports whether every node is up and running and every
// partition's configuration (as its most advanced replica applied it)
// has all its replicas as voters, no learner, on running nodes, and is
// not joint.
func (s *sim) fullyReplicated() bool {
	for _, nd := range s.nodes {
		if !nd.left && (!nd.up || nd.paused) {
			return false
		}
	}
	for part := range s.cfg.Partitions {
		var best node.ReplicaInfo
		found := false
		for _, nd := range s.nodes {
			if !nd.up {
				continue
			}
			if r, ok := nd.n.Replica(part); ok && (!found || r.Applied > best.Applied) {
				best, found = r, true
			}
		}
		if !found || len(best.Voters) != s.cfg.Replicas || len(best.Learners) > 0 || len(best.Outgoing) > 0 {
			return false
		}
		// Every voter must have applied that configuration too: one still
		// in the joint configuration before it needs the old voters' votes
		// to elect anyone, and the leaver may be one of them.
		for _, v := range best.Voters {
			i, ok := s.byID[v]
			if !ok || !s.nodes[i].up {
				return false
			}
			r, ok := s.nodes[i].n.Replica(part)
			if !ok || len(r.Outgoing) > 0 || len(r.Learners) > 0 || !slices.Equal(r.Voters, best.Voters) {
				return false
			}
		}
	}
	return true
}

// checkReplicas is invariant 5: every replica of a partition on a running
// node that applied the same Raft index holds the same state
// (Node.Digest), over the partitions parts. It runs over every partition
// at the end of the run (all set: every replica encoded), and every few
// virtual seconds once the faults have healed (see periodicReplicas).
// A periodic check skips a run of replicas that all stand, in the same
// incarnation, at the index at which they last agreed: a replica's state
// is a function of the entries it applied, which is the very claim
// checked, and an idle mesh spent a third of its allocations encoding
// the same partitions again every 5 virtual seconds. The end of the run
// checks them all again.
func (s *sim) checkReplicas(parts iter.Seq[int], all bool) {
	// The replicas of each partition, in node order, from the partitions
	// each node holds: asking every node for every partition cost 4
	// million calls a check at 1,000 peers x 4,096 partitions.
	held := make([][]replicaAt, s.cfg.Partitions)
	for i, nd := range s.nodes {
		if !nd.up || nd.n == nil {
			continue
		}
		for _, part := range nd.n.Held() {
			if applied, ok := nd.n.Applied(part); ok {
				held[part] = append(held[part], replicaAt{i, applied})
			}
		}
	}
	for part := range parts {
		// Only replicas that share an applied index are compared, so
		// only those are encoded (Digest encodes the whole partition).
		if part < 0 || part >= len(held) {
			continue
		}
		reps := held[part]
		// Replicas sharing an applied index are adjacent after the sort;
		// each is compared with the first of its run.
		slices.SortStableFunc(reps, func(a, b replicaAt) int { return cmp.Compare(a.applied, b.applied) })
		for i := 0; i < len(reps); {
			j := i + 1
			for j < len(reps) && reps[j].applied == reps[i].applied {
				j++
			}
			if j-i > 1 && (all || !s.agreedRun(part, reps[i:j])) {
				want := s.digest(reps[i].node, part)
				for _, b := range reps[i+1 : j] {
					s.replicaPairs++
					if got := s.digest(b.node, part); got != want {
						s.fail(invReplicas, fmt.Sprintf("partition %d: %s and %s applied index %d but hold different state (%016x vs %016x)",
							part, s.nodes[reps[i].node].id, s.nodes[b.node].id, b.applied, want, got))
						return
					}
				}
				for _, b := range reps[i:j] {
					nd := s.nodes[b.node]
					if nd.agreed == nil {
						nd.agreed = make(map[int]agreedAt)
					}
					nd.agreed[part] = agreedAt{gen: nd.gen, applied: b.applied}
				}
			}
			i = j
		}
	}
}

// replicaAt is a node's replica of a partition and the index it applied.
type replicaAt struct {
	node    int
	applied uint64
}

// agreedAt is the incarnation and applied index at which a node's
// replica of a partition last matched the others' (checkReplicas).
type agreedAt struct {
	gen     int
	applied uint64
}

// agreedRun reports whether every replica of part in reps (all at one
// applied index) last agreed with the others at that index, in the
// incarnation it runs now.
func (s *sim) agreedRun(part int, reps []replicaAt) bool {
	for _, r := range reps {
		nd := s.nodes[r.node]
		if a, ok := nd.agreed[part]; !ok || a.gen != nd.gen || a.applied != r.applied {
			return false
		}
	}
	return true
}

// digest is node i's Digest of part.
func (s *sim) digest(i, part int) uint64 {
	var sum uint64
	_, sum, s.digestBuf, _ = s.nodes[i].n.DigestBuf(part, s.digestBuf)
	if s.cfg.bugDigest && i == 1 {
		sum ^= 1
	}
	return sum
}

// replicaCheckEvery is how often checkReplicas runs after the faults heal,
// in periodic ticks (virtual seconds). Runs of at most replicaCheckAll
// tasks check every partition each time; larger ones check the next
// partition in turn, and only once the logs took replicaCheckEntries
// event entries since the last check, so the checks' cost (encoding whole
// partitions) follows the work done, not the virtual time: a batch run's
// long tasks commit a few entries a virtual second, and checking one
// partition every 5 s was 43% of its CPU. The end of every run checks
// them all.
const (
	replicaCheckEvery   = 5
	replicaCheckAll     = 2_000
	replicaCheckEntries = 100
)

// periodicReplicas is the partitions the next periodic replica check
// covers; none when a large run committed too little since the last.
func (s *sim) periodicReplicas() iter.Seq[int] {
	if s.cfg.Tasks <= replicaCheckAll {
		return allParts(s.cfg.Partitions)
	}
	if s.replicaNext > 0 && s.entries-s.replicaEntries < replicaCheckEntries {
		return func(func(int) bool) {}
	}
	s.replicaEntries = s.entries
	part := s.replicaNext % s.cfg.Partitions
	s.replicaNext++
	return func(yield func(int) bool) { yield(part) }
}

// allParts yields 0..n-1.
func allParts(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// newDisk returns a node's disk.
func newDisk() *wal.Memory { return wal.NewMemory() }
