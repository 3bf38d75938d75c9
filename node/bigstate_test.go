package node

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/badgerwal"
)

// badgerNode drives a Node over a real Badger WAL as the runtime does.
type badgerNode struct {
	tb      testing.TB
	dir     string
	log     *badgerwal.Log
	n       *Node
	now     time.Time
	replies map[uint64]Reply
	runs    []Run
}

func (b *badgerNode) open(boot int) {
	b.tb.Helper()
	var err error
	if b.log, err = badgerwal.Open(b.dir, badgerwal.Options{MemTableSize: 128 << 20}); err != nil {
		b.tb.Fatal(err)
	}
	states, err := wal.LoadAll(b.log)
	if err != nil {
		b.tb.Fatalf("load after restart: %v", err)
	}
	cfg := DefaultNodeConfig("p1", fmt.Sprint(boot))
	cfg.Partitions, cfg.Slots = 1, 2000
	cfg.Rand = rand.New(rand.NewPCG(1, uint64(boot)))
	if b.n, err = NewNode(cfg, states, b.now); err != nil {
		b.tb.Fatal(err)
	}
	b.runs = nil
	b.drain()
}

func (b *badgerNode) drain() {
	d := Driver{Node: b.n, IO: badgerIO{b}, MaxRounds: 1000}
	if err := d.Drive(); err != nil {
		b.tb.Fatal(err)
	}
}

// badgerIO is badgerNode's DriverIO: a real WAL, synced after every batch.
type badgerIO struct{ b *badgerNode }

func (io badgerIO) Now() time.Time   { return io.b.now }
func (io badgerIO) Send([]Envelope)  {}
func (io badgerIO) Gossip([]Message) {}
func (io badgerIO) Start(rd *Ready)  { io.b.runs = append(io.b.runs, rd.Run...) }
func (io badgerIO) Persist(b *wal.Batch, _ bool) error {
	if err := io.b.log.Append(b); err != nil {
		return fmt.Errorf("wal append: %w", err)
	}
	return io.b.log.Sync()
}

func (io badgerIO) Deliver(rd *Ready) error {
	for _, r := range rd.Replies {
		io.b.replies[r.Req] = r
	}
	return nil
}

func (b *badgerNode) step() {
	runs := b.runs
	b.runs = nil
	for _, r := range runs {
		_ = b.n.Report(shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload})
	}
	b.now = b.now.Add(10 * time.Millisecond)
	b.n.Tick(b.now)
	b.drain()
}

// TestLargestGroupsPersist submits the largest groups the API allows
// (100,000 tasks: a dag chain and a parallel group) to a node over real
// Badger, runs the parallel group to the end and snapshots: the state
// (about 30 MB) is larger than one Badger transaction (19 MB here), which
// crash-looped the peer ("Txn is too big"). The peer restarts from it
// with both groups intact and runs on.
func TestLargestGroupsPersist(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000-task groups")
	}
	b := &badgerNode{tb: t, dir: t.TempDir(), now: time.Unix(1_700_000_000, 0).UTC(), replies: map[uint64]Reply{}}
	b.open(1)
	const n = 100_000
	chain := shard.GroupSpec{ID: "chain", Mode: shard.ModeDAG, Tasks: make([]shard.TaskSpec, n)}
	for i := range chain.Tasks {
		chain.Tasks[i] = shard.TaskSpec{Name: fmt.Sprint("t", i), Handler: "echo", Payload: []byte(`{"step":1}`), Retry: shard.Retry{MaxAttempts: 1}}
		if i > 0 {
			chain.Tasks[i].Deps = []string{fmt.Sprint("t", i-1)}
		}
	}
	par := shard.GroupSpec{ID: "par", Mode: shard.ModeParallel, Tasks: make([]shard.TaskSpec, n)}
	for i := range par.Tasks {
		par.Tasks[i] = shard.TaskSpec{Name: fmt.Sprint("p", i), Handler: "echo", Payload: []byte(`{"n":12345}`)}
	}
	for _, spec := range []*shard.GroupSpec{&par, &chain} {
		req := b.n.NextRequest()
		b.n.Submit(req, spec)
		b.drain()
		if _, ok := b.replies[req]; !ok {
			b.step() // its creation was held for its first runs (defer.go)
		}
		if r, ok := b.replies[req]; !ok || r.Err != nil {
			t.Fatalf("submit %s: %+v", spec.ID, r)
		}
	}
	for i := 0; ; i++ {
		if st, _ := b.n.GroupState("par"); st == shard.GroupSucceeded {
			break
		}
		if i > 2000 {
			t.Fatal("parallel group does not finish")
		}
		b.step()
	}
	p := b.n.parts[0]
	p.forceSnap = true
	b.n.markDirty(p.id)
	b.step()
	if p.snapBytes <= 15*(128<<20)/100 {
		t.Fatalf("snapshot of %d bytes; want one larger than a Badger transaction", p.snapBytes)
	}
	if err := b.log.Close(); err != nil {
		t.Fatal(err)
	}
	b.open(2)
	for _, g := range []shard.GroupID{"par", "chain"} {
		ids, err := b.n.parts[0].shard.GroupTasks(g)
		if err != nil || len(ids) != n {
			t.Fatalf("after restart %s has %d tasks, %v; want %d", g, len(ids), err, n)
		}
	}
	if st, _ := b.n.GroupState("par"); st != shard.GroupSucceeded {
		t.Fatalf("after restart par = %v", st)
	}
	for range 20 {
		b.step()
	}
	if v, err := b.n.Task("chain.5"); err != nil || v.State != shard.Succeeded {
		t.Fatalf("chain.5 after restart = %v, %v; want SUCCEEDED", v.State, err)
	}
}
