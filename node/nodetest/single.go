// Package nodetest drives Nodes in memory for tests outside package node:
// an in-memory WAL, handlers run by the test, replies collected by request.
package nodetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// Single is one Node, the only member of its mesh, driven the way the
// runtime drives it: Ready persisted to an in-memory WAL, then Advance.
type Single struct {
	tb      testing.TB
	Log     *wal.Memory
	Node    *node.Node
	Now     time.Time             // the node's clock: advanced by Tick
	Replies map[uint64]node.Reply // every reply, by request
	Runs    []node.Run            // tasks handed out to run and not yet reported
}

// NewSingle starts a founder Node with the given number of partitions
// and 2 slots, at a fixed time.
func NewSingle(tb testing.TB, partitions int) *Single {
	tb.Helper()
	s := &Single{tb: tb, Log: wal.NewMemory(), Now: time.Unix(1_700_000_000, 0).UTC(), Replies: map[uint64]node.Reply{}}
	cfg := node.DefaultNodeConfig("p1", "1")
	cfg.Partitions = partitions
	cfg.Slots = 2
	cfg.Rand = rand.New(rand.NewPCG(1, 1))
	var err error
	if s.Node, err = node.NewNode(cfg, map[uint32]wal.PartitionState{}, s.Now); err != nil {
		tb.Fatal(err)
	}
	s.Stabilize()
	return s
}

// Stabilize runs Ready/Advance until the node has nothing left to do.
func (s *Single) Stabilize() {
	for i := 0; s.Node.HasReady(); i++ {
		if i > 1000 {
			s.tb.Fatal("nodetest: node does not settle")
		}
		rd := s.Node.Ready()
		if err := s.Log.Append(&rd.Persist); err != nil {
			s.tb.Fatal(err)
		}
		if rd.MustSync {
			if err := s.Log.Sync(); err != nil {
				s.tb.Fatal(err)
			}
		}
		for _, r := range rd.Replies {
			s.Replies[r.Req] = r
		}
		s.Runs = append(s.Runs, rd.Run...)
		s.Node.Advance(rd)
	}
}

// Tick advances the clock by d, ticks the node and stabilizes.
func (s *Single) Tick(d time.Duration) {
	s.Now = s.Now.Add(d)
	s.Node.Tick(s.Now)
	s.Stabilize()
}

// Submit submits spec and returns the reply.
func (s *Single) Submit(spec shard.GroupSpec) node.Reply {
	s.tb.Helper()
	req := s.Node.NextRequest()
	s.Node.Submit(req, &spec)
	s.Stabilize()
	r, ok := s.Replies[req]
	if !ok {
		s.tb.Fatalf("nodetest: no reply to the submit of %s", spec.ID)
	}
	return r
}

// Do runs f with a new request id on the node, stabilizes and returns the
// reply to it.
func (s *Single) Do(f func(n *node.Node, req uint64)) node.Reply {
	s.tb.Helper()
	req := s.Node.NextRequest()
	f(s.Node, req)
	s.Stabilize()
	r, ok := s.Replies[req]
	if !ok {
		s.tb.Fatal(fmt.Sprintf("nodetest: no reply to request %d", req))
	}
	return r
}
