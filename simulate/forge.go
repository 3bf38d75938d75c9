package simulate

import (
	"fmt"
	"math"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// forgerID is the keyed host of the forge fault: it holds the swarm key
// and is no peer the mesh runs.
const forgerID = "forger"

// Forge is a host that holds the swarm key (needle hostile's wire attack):
// it joins with a heartbeat, then every Every sends a random peer grants
// for real tasks in any state to peers that hold a replica of the task's
// partition, with rounds just ahead of the task's and from the far future,
// and outcomes for leases it does not hold, and tells peers that they
// left partitions (MsgReplicaGone) they did not. It
// stops for good at the end of its window and is forgotten. Nothing it sends may start a task before its
// dependencies (invariant 3), be accepted as an outcome (2), or keep a
// committed lease from running (liveness: a lease does not expire while
// its holder lives).
type Forge struct {
	Span
	Every time.Duration
	on    bool
	sent  int
}

func (f *Forge) start(s *sim) {
	f.on = true
	hb := node.Message{Type: node.MsgHeartbeat, From: forgerID, Heartbeat: &node.Heartbeat{Boot: "1",
		Partitions: s.cfg.Partitions, Load: node.Load{Slots: s.cfg.Slots, Ready: 50}, Members: []string{forgerID},
		Features: node.Features}}
	for _, nd := range s.nodes {
		f.deliver(s, nd, hb)
	}
	f.tick(s)
}

// stop ends the attack and forgets the forger on every running peer,
// gossip telling the rest (the operator's recovery, as needle hostile's):
// broadcast copies the mesh pinned to it as a member fail then.
func (f *Forge) stop(s *sim) {
	f.on = false
	s.forgerGone = true
	for _, nd := range s.nodes {
		if nd.up && !nd.paused {
			nd.n.Forget(forgerID)
			nd.queueDrain()
		}
	}
}

// tick sends one forged message and schedules the next, with a heartbeat
// every second as a member's.
func (f *Forge) tick(s *sim) {
	if !f.on {
		return
	}
	if len(s.chk.order) > 0 {
		g := s.chk.order[s.rng.IntN(len(s.chk.order))]
		t := g.tasks[s.rng.IntN(len(g.tasks))]
		if nd := f.target(s, g.id); nd != nil {
			f.deliver(s, nd, f.forged(s, nd, t))
		}
	}
	if s.rng.IntN(4) == 0 {
		f.gone(s)
	}
	at := s.now + f.Every
	if (s.now+f.Every)/time.Second != s.now/time.Second {
		hb := node.Message{Type: node.MsgHeartbeat, From: forgerID, Heartbeat: &node.Heartbeat{Boot: "1",
			Partitions: s.cfg.Partitions, Load: node.Load{Slots: s.cfg.Slots, Ready: 50}, Members: []string{forgerID},
			Features: node.Features}}
		for _, nd := range s.nodes {
			f.deliver(s, nd, hb)
		}
	}
	s.at(at, func() { f.tick(s) })
}

// gone tells a random peer that a random partition's configuration
// excludes it, as of an index past anything logged: the forger is a ring
// member, so on a partition the ring gives it, the peer it pushes off the
// ring would drop its copy if it heeded any member's word.
func (f *Forge) gone(s *sim) {
	nd := s.nodes[s.rng.IntN(len(s.nodes))]
	if !nd.up {
		return
	}
	part := uint32(s.rng.IntN(s.cfg.Partitions))
	f.deliver(s, nd, node.Message{Type: node.MsgReplicaGone, From: forgerID,
		Gone: []node.GoneMsg{{Partition: part, Index: math.MaxUint64 - uint64(s.rng.IntN(2))}}})
}

// target picks a running peer that can tell a forged grant for group g
// (node.GrantSource: it holds a replica of g's partition), or nil. A peer
// that holds none takes any member's grant: what a keyed host grants
// there runs (the swarm key is the trust boundary, docs/operations.md),
// so the fault sends only where the peer can tell.
func (f *Forge) target(s *sim, g shard.GroupID) *simNode {
	var cands []*simNode
	for _, nd := range s.nodes {
		if nd.up && verifies(nd, g) {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[s.rng.IntN(len(cands))]
}

func verifies(nd *simNode, g shard.GroupID) bool {
	_, ok := nd.n.GrantSource(nd.n.PartitionOf(g))
	return ok
}

// forged builds a grant or an outcome for task t, addressed to nd.
func (f *Forge) forged(s *sim, nd *simNode, t *taskRec) node.Message {
	round := shard.Round(1 + s.rng.IntN(3))
	if v, err := nd.n.Task(t.id); err == nil {
		round = v.Round + shard.Round(s.rng.IntN(2))
	}
	if s.rng.IntN(4) == 0 {
		round = math.MaxUint64 - shard.Round(s.rng.IntN(2))
	}
	if s.rng.IntN(4) == 0 {
		holder := nd.n.Holder() // refused: only the holder reports for its lease
		if s.rng.IntN(2) == 0 {
			holder = forgerID + "#1" // refused: the forger holds no lease
		}
		return node.Message{Type: node.MsgOutcome, From: forgerID, Outcomes: []node.OutcomeMsg{{Task: t.id, Round: round,
			Holder: holder, OK: true, Result: []byte(`"forged"`)}}}
	}
	handler := "echo"
	if t.g.spec != nil {
		for i := range t.g.tasks {
			if t.g.tasks[i] == t && i < len(t.g.spec.Tasks) {
				handler = t.g.spec.Tasks[i].Handler
			}
		}
	}
	return node.Message{Type: node.MsgGrant, From: forgerID, Holder: nd.n.Holder(), Load: node.Load{Slots: s.cfg.Slots},
		Grants: []node.Grant{{Task: t.id, Round: round, Handler: handler, Payload: []byte(`"forged"`), Timeout: time.Second}}}
}

func (f *Forge) deliver(s *sim, nd *simNode, m node.Message) {
	f.sent++
	nd.input(nd.gen, func() {
		if !verifiable(nd, m) {
			return // see target: decided when it arrives (a paused peer takes it later)
		}
		if err := nd.n.Step(forgerID, m); err != nil {
			s.st.refusedMsgs++
		}
	})
}

// verifiable reports whether nd can tell every grant of m (target).
func verifiable(nd *simNode, m node.Message) bool {
	for _, g := range m.Grants {
		if !verifies(nd, g.Task.Group()) {
			return false
		}
	}
	return true
}

func (f *Forge) String() string {
	return fmt.Sprintf("forged grants and outcomes every %v at %v for %v (%d sent)", f.Every, f.At, f.For, f.sent)
}
