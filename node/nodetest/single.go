// Package nodetest drives Nodes in memory for tests outside package node,
// through node.Driver, the path the daemon and the simulator take:
//
//   - Single: one Node alone, its WAL in memory, runs and replies kept for
//     the test;
//   - Mesh: peers on one virtual clock and network (one-way cuts, held
//     links, crashes that lose unsynced writes, restarts as new
//     incarnations), which the transcripts of node/testdata use;
//   - Contract: a driver Trace that checks the Ready contract's order,
//     early sends included (the runtime's and the simulator's tests).
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

// Stabilize runs Ready/Advance through the shared node.Driver until the
// node has nothing left to do.
func (s *Single) Stabilize() {
	d := node.Driver{Node: s.Node, IO: singleIO{s}, MaxRounds: 1000}
	if err := d.Drive(); err != nil {
		s.tb.Fatalf("nodetest: %v", err)
	}
}

// singleIO is Single's node.DriverIO: the in-memory WAL, runs and replies
// kept for the test, no peers.
type singleIO struct{ s *Single }

func (io singleIO) Now() time.Time        { return io.s.Now }
func (io singleIO) Send([]node.Envelope)  {}
func (io singleIO) Gossip([]node.Message) {}
func (io singleIO) Start(rd *node.Ready)  { io.s.Runs = append(io.s.Runs, rd.Run...) }
func (io singleIO) Persist(b *wal.Batch, sync bool) error {
	if err := io.s.Log.Append(b); err != nil {
		return err
	}
	if sync {
		return io.s.Log.Sync()
	}
	return nil
}

func (io singleIO) Deliver(rd *node.Ready) error {
	for _, r := range rd.Replies {
		io.s.Replies[r.Req] = r
	}
	return nil
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
