package node

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
	"github.com/needle-mesh/needle/wal"
)

// cluster drives several Nodes, through the shared Driver, on one virtual
// clock with a network that delivers every message at the next step,
// unless a node is down: the harness of the tests that look inside a Node
// (package node cannot import nodetest, whose Mesh the tests of the
// exported API and the transcripts use).
type cluster struct {
	tb    testing.TB
	now   time.Time
	nodes []*cnode
	runs  map[string][]Run
	cuts  map[[2]string]bool // links that drop every message (both directions)
	// link, when set, decides whether a message from one node reaches
	// another (gossip: it was published, not sent), after the cuts.
	link  func(from, to *cnode, gossip bool) bool
	check func()                             // run after every step, when set
	trace func(id string, d Duty, rd *Ready) // every driver's Trace, when set
	// notify holds the webhook deliveries each node handed out, for the
	// test to answer.
	notify map[string][]NotifyJob
	// hold keeps runs running: none reports (runs keeps them all).
	hold bool
	// initial, when set, is every node's initial membership (a mesh
	// started together, needled --initial-peers): no founder.
	initial []PeerAddrs
}

type cnode struct {
	id      string
	n       *Node
	log     *wal.Memory
	down    bool
	inbox   []Envelope
	replies map[uint64]Reply
	boot    int
	founder bool
	labels  map[string]string // its NodeConfig.Labels
	version string            // its NodeConfig.Version
}

func newCluster(tb testing.TB, size, partitions int) *cluster {
	return newClusterOf(tb, size, partitions, false)
}

// newClusterOf is newCluster, its nodes started together (cluster.initial)
// when together is set.
func newClusterOf(tb testing.TB, size, partitions int, together bool) *cluster {
	c := &cluster{tb: tb, now: time.Unix(1_700_000_000, 0).UTC(), runs: map[string][]Run{}, cuts: map[[2]string]bool{},
		notify: map[string][]NotifyJob{}}
	if together {
		for i := range size {
			id := fmt.Sprintf("n%d", i+1)
			c.initial = append(c.initial, PeerAddrs{ID: id, Addrs: []string{"/c/" + id}})
		}
	}
	for i := range size {
		cn := &cnode{id: fmt.Sprintf("n%d", i+1), log: wal.NewMemory(), founder: i == 0}
		c.nodes = append(c.nodes, cn)
		c.start(cn, partitions)
	}
	return c
}

func (c *cluster) start(cn *cnode, partitions int) {
	c.tb.Helper()
	cn.boot++
	cfg := DefaultNodeConfig(cn.id, fmt.Sprint(cn.boot))
	cfg.Partitions, cfg.Slots, cfg.Founder = partitions, 2, cn.founder
	cfg.Labels, cfg.Version = cn.labels, cn.version
	if c.initial != nil {
		cfg.Founder, cfg.Initial = false, c.initial
	}
	cfg.Shard.Next = cron.Next
	cfg.Addrs = []string{"/c/" + cn.id}
	cfg.Rand = rand.New(rand.NewPCG(RaftID(cn.id), uint64(cn.boot)))
	states := map[uint32]wal.PartitionState{}
	parts, _ := cn.log.Partitions()
	for _, p := range parts {
		st, err := cn.log.Load(p)
		if err != nil {
			c.tb.Fatal(err)
		}
		states[p] = st
	}
	left, _, err := cn.log.Meta(LeftMetaKey)
	if err != nil {
		c.tb.Fatal(err)
	}
	cfg.Left = left
	n, err := NewNode(cfg, states, c.now)
	if err != nil {
		c.tb.Fatal(err)
	}
	cn.n, cn.down, cn.inbox, cn.replies = n, false, nil, map[uint64]Reply{}
	c.runs[cn.id] = nil
}

func (c *cluster) node(id string) *cnode {
	for _, cn := range c.nodes {
		if cn.id == id {
			return cn
		}
	}
	return nil
}

// step advances time by d, delivers queued messages, ticks every node and
// drains every Ready; handlers finish at the next step.
func (c *cluster) step(d time.Duration) {
	c.now = c.now.Add(d)
	for _, cn := range c.nodes {
		if cn.down {
			continue
		}
		cn.n.Tick(c.now)
		if !c.hold {
			for _, r := range c.runs[cn.id] {
				// Took: the tasks stand for real work (100 ms), worth stealing.
				_ = cn.n.Report(shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload, Took: 100 * time.Millisecond})
			}
			c.runs[cn.id] = nil
		}
		inbox := cn.inbox
		cn.inbox = nil
		for _, e := range inbox {
			// Round-trip through the codec, as the transport does.
			b, err := AppendMessage(nil, &e.Msg)
			if err != nil {
				c.tb.Fatal(err)
			}
			m, err := DecodeMessage(b)
			if err != nil {
				c.tb.Fatal(err)
			}
			if err := cn.n.Step(e.Msg.From, m); err != nil {
				c.tb.Logf("%s: step %v from %s: %v", cn.id, m.Type, e.Msg.From, err)
			}
		}
		c.drain(cn)
	}
	if c.check != nil {
		c.check()
	}
}

// cut drops (or, with on false, delivers again) every message between a
// and b.
func (c *cluster) cut(a, b string, on bool) {
	c.cuts[[2]string{a, b}], c.cuts[[2]string{b, a}] = on, on
}

// deliver queues a message unless the receiver is down or the link is cut.
func (c *cluster) deliver(from string, to *cnode, e Envelope) {
	c.deliverAs(from, to, e, false)
}

func (c *cluster) deliverAs(from string, to *cnode, e Envelope, gossip bool) {
	if to != nil && !to.down && !c.cuts[[2]string{from, to.id}] && (c.link == nil || c.link(c.node(from), to, gossip)) {
		to.inbox = append(to.inbox, e)
	}
}

func (c *cluster) drain(cn *cnode) {
	d := Driver{Node: cn.n, IO: clusterIO{c, cn}, MaxRounds: 100}
	if c.trace != nil {
		d.Trace = func(duty Duty, rd *Ready) { c.trace(cn.id, duty, rd) }
	}
	if err := d.Drive(); err != nil {
		c.tb.Fatalf("%s: %v", cn.id, err)
	}
}

// clusterIO is one cnode's DriverIO: its in-memory WAL, the cluster's
// network, runs and webhook calls kept for the cluster and the test.
type clusterIO struct {
	c  *cluster
	cn *cnode
}

func (io clusterIO) Now() time.Time { return io.c.now }

func (io clusterIO) Send(envs []Envelope) {
	for _, e := range envs {
		io.c.deliver(io.cn.id, io.c.node(e.To), e)
	}
}

func (io clusterIO) Gossip(msgs []Message) {
	for _, g := range msgs {
		for _, to := range io.c.nodes {
			if to != io.cn {
				io.c.deliverAs(io.cn.id, to, Envelope{To: to.id, Msg: g}, true)
			}
		}
	}
}

func (io clusterIO) Persist(b *wal.Batch, sync bool) error {
	if err := io.cn.log.Append(b); err != nil {
		return err
	}
	if sync {
		return io.cn.log.Sync()
	}
	return nil
}

func (io clusterIO) Start(rd *Ready) {
	io.c.runs[io.cn.id] = append(io.c.runs[io.cn.id], rd.Run...)
	io.c.notify[io.cn.id] = append(io.c.notify[io.cn.id], rd.Notify...)
}

func (io clusterIO) Deliver(rd *Ready) error {
	for _, r := range rd.Replies {
		io.cn.replies[r.Req] = r
	}
	return nil
}

func (c *cluster) run(d time.Duration) {
	for t := time.Duration(0); t < d; t += 10 * time.Millisecond {
		c.step(10 * time.Millisecond)
	}
}

// reply steps the cluster 10 ms at a time, at most steps times, until cn
// answers request req.
func (c *cluster) reply(cn *cnode, req uint64, steps int) (Reply, bool) {
	for range steps {
		c.step(10 * time.Millisecond)
		if r, ok := cn.replies[req]; ok {
			return r, true
		}
	}
	return Reply{}, false
}

// submit sends a group to its owner and returns the reply.
func (c *cluster) submit(spec shard.GroupSpec) Reply {
	c.tb.Helper()
	for range 300 {
		for _, cn := range c.nodes {
			if cn.down || !cn.n.Serving(spec.ID) {
				continue
			}
			req := cn.n.NextRequest()
			cn.n.Submit(req, &spec)
			if r, ok := c.reply(cn, req, 100); ok {
				return r
			}
			c.tb.Fatalf("no reply to %s from %s", spec.ID, cn.id)
		}
		c.step(10 * time.Millisecond)
	}
	c.tb.Fatalf("no node serves %s", spec.ID)
	return Reply{}
}

func (c *cluster) groupState(g shard.GroupID) shard.GroupState {
	for _, cn := range c.nodes {
		if !cn.down && cn.n.Serving(g) {
			st, _ := cn.n.GroupState(g)
			return st
		}
	}
	return 0
}

func (c *cluster) leaders() map[string]int {
	out := map[string]int{}
	for _, cn := range c.nodes {
		if !cn.down {
			out[cn.id] = len(cn.n.Leading())
		}
	}
	return out
}

// servers returns, per partition, the nodes that answer reads for it.
func (c *cluster) servers(part int) []string {
	var out []string
	for _, cn := range c.nodes {
		if !cn.down && cn.n.leaseHeld(cn.n.parts[part]) {
			out = append(out, cn.id)
		}
	}
	return out
}

// oneServer makes every step check that no partition has two nodes
// answering reads (one of them would answer from a stale state).
func (c *cluster) oneServer(parts int) {
	c.check = func() {
		for p := range parts {
			if s := c.servers(p); len(s) > 1 {
				c.tb.Fatalf("at %v partition %d is served by %v", c.now, p, s)
			}
		}
	}
}

// ledBy returns a partition led by id and a voter of it that is not id.
func (c *cluster) ledBy(id string, parts int) (part int, follower string) {
	c.tb.Helper()
	lead := c.node(id)
	for p := range parts {
		if lead.n.parts[p] == nil || !lead.n.parts[p].serving {
			continue
		}
		for _, v := range lead.n.mesh.voters(lead.n.parts[p]) {
			if v != id {
				return p, v
			}
		}
	}
	c.tb.Fatalf("%s leads no replicated partition (leaders %v)", id, c.leaders())
	return 0, ""
}
