package peer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// cluster drives several Nodes on one virtual clock with a network that
// delivers every message at the next step, unless a node is down.
type cluster struct {
	tb    testing.TB
	now   time.Time
	nodes []*cnode
	runs  map[string][]Run
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
}

func newCluster(tb testing.TB, size, partitions int) *cluster {
	c := &cluster{tb: tb, now: time.Unix(1_700_000_000, 0).UTC(), runs: map[string][]Run{}}
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
		for _, r := range c.runs[cn.id] {
			_ = cn.n.Report(shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload})
		}
		c.runs[cn.id] = nil
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
}

func (c *cluster) drain(cn *cnode) {
	for i := 0; cn.n.HasReady(); i++ {
		if i > 100 {
			c.tb.Fatalf("%s does not settle", cn.id)
		}
		rd := cn.n.Ready()
		if err := cn.log.Append(&rd.Persist); err != nil {
			c.tb.Fatal(err)
		}
		if rd.MustSync {
			_ = cn.log.Sync()
		}
		for _, e := range rd.Messages {
			if to := c.node(e.To); to != nil && !to.down {
				to.inbox = append(to.inbox, e)
			}
		}
		for _, g := range rd.Gossip {
			for _, to := range c.nodes {
				if to != cn && !to.down {
					to.inbox = append(to.inbox, Envelope{To: to.id, Msg: g})
				}
			}
		}
		for _, r := range rd.Replies {
			cn.replies[r.Req] = r
		}
		c.runs[cn.id] = append(c.runs[cn.id], rd.Run...)
		cn.n.Advance(rd)
	}
}

func (c *cluster) run(d time.Duration) {
	for t := time.Duration(0); t < d; t += 10 * time.Millisecond {
		c.step(10 * time.Millisecond)
	}
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
			for range 100 {
				c.step(10 * time.Millisecond)
				if r, ok := cn.replies[req]; ok {
					return r
				}
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

func TestMeshFormsAndReplicates(t *testing.T) {
	c := newCluster(t, 3, 16)
	c.run(15 * time.Second)
	for _, cn := range c.nodes {
		if got := len(cn.n.Members()); got != 3 {
			t.Fatalf("%s sees %d members; want 3", cn.id, got)
		}
		for i, p := range cn.n.parts {
			if p == nil {
				t.Fatalf("%s does not hold partition %d", cn.id, i)
			}
			if v := len(p.conf.GetVoters()); v != 3 {
				t.Fatalf("%s partition %d has %d voters; want 3", cn.id, i, v)
			}
		}
	}
	lead := c.leaders()
	if lead["n1"]+lead["n2"]+lead["n3"] != 16 || lead["n2"] == 0 || lead["n3"] == 0 {
		t.Fatalf("leadership = %v; want 16 spread over the 3 peers", lead)
	}
}

func TestMeshFailover(t *testing.T) {
	c := newCluster(t, 3, 8)
	c.run(15 * time.Second)
	var groups []shard.GroupID
	for i := range 8 {
		g := shard.GroupID(fmt.Sprint("g", i))
		r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(4)})
		if r.Err != nil || !r.Submit.Created {
			t.Fatalf("submit %s: %+v", g, r)
		}
		groups = append(groups, g)
	}
	victim := c.node("n2")
	victim.down = true // crash: no more messages, no ticks
	victim.log.Crash()
	c.run(10 * time.Second)
	for _, g := range groups {
		if st := c.groupState(g); st != shard.GroupSucceeded {
			t.Fatalf("%s = %v after n2 died; want SUCCEEDED (leaders %v)", g, st, c.leaders())
		}
	}
	if l := c.leaders(); l["n1"]+l["n3"] != 8 {
		t.Fatalf("leaders after failover = %v; want all 8 partitions on n1 and n3", l)
	}
	c.start(victim, 8)
	c.run(15 * time.Second)
	if l := c.leaders(); l["n2"] == 0 {
		t.Fatalf("leaders after n2 came back = %v; want n2 to lead its share again", l)
	}
	for _, g := range groups {
		if st := c.groupState(g); st != shard.GroupSucceeded {
			t.Fatalf("%s = %v after n2 came back", g, st)
		}
	}
	_ = slices.Contains[[]string]
}
