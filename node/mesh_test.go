package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/ring"
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
	cuts  map[[2]string]bool                 // links that drop every message (both directions)
	check func()                             // run after every step, when set
	trace func(id string, d Duty, rd *Ready) // every driver's Trace, when set
	// notify holds the webhook deliveries each node handed out, for the
	// test to answer.
	notify map[string][]NotifyJob
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
}

func newCluster(tb testing.TB, size, partitions int) *cluster {
	c := &cluster{tb: tb, now: time.Unix(1_700_000_000, 0).UTC(), runs: map[string][]Run{}, cuts: map[[2]string]bool{},
		notify: map[string][]NotifyJob{}}
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
	cfg.Labels = cn.labels
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
			// Took: the tasks stand for real work (100 ms), worth stealing.
			_ = cn.n.Report(shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload, Took: 100 * time.Millisecond})
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
	if to != nil && !to.down && !c.cuts[[2]string{from, to.id}] {
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
				io.c.deliver(io.cn.id, to, Envelope{To: to.id, Msg: g})
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

// A replica that restarts does not know its partitions' leader until it
// hears from it. It used to campaign at once and win with the vote of a
// replica that still followed the live leader (nothing in Raft refused it:
// its election timer, and so CheckQuorum, is off), while the leader, which
// the restarted peer could not reach, kept serving: two owners, one of
// them answering reads from a stale state (simulate: seed 7, --faults
// crash). A replica that follows a leader it heard from within DeadAfter
// now ignores other candidates.
func TestMeshRestartedReplicaDoesNotDeposeLiveLeader(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	c.oneServer(parts)
	part, follower := c.ledBy("n2", parts)
	f := c.node(follower)
	f.down = true
	f.log.Crash()
	c.cut("n2", follower, true) // the restarted replica cannot reach the leader
	c.start(f, parts)
	c.run(8 * time.Second)
	if s := c.servers(part); len(s) != 1 || s[0] == follower {
		t.Fatalf("partition %d is served by %v; want one server, not the restarted %s", part, s, follower)
	}
	c.cut("n2", follower, false)
	c.run(5 * time.Second)
	if s := c.servers(part); len(s) != 1 {
		t.Fatalf("partition %d is served by %v after the cut healed", part, s)
	}
}

// A leader cut off from its replicas used to keep answering reads (and
// ?wait= long-polls) for as long as it did not hear of the new term, while
// the others elected a leader and moved on: a client saw a task SUCCEEDED
// on the new owner, then READY on the old one (simulate: seed 339). A
// leader now answers reads only while a majority of its voters answered it
// within half of DeadAfter, and they vote for no one else for DeadAfter.
func TestMeshIsolatedLeaderStopsServingReads(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	c.oneServer(parts)
	part, _ := c.ledBy("n1", parts)
	g := groupIn(t, c.node("n1").n, part)
	for _, other := range []string{"n2", "n3"} {
		c.cut("n1", other, true)
	}
	c.run(c.node("n1").n.leaseWindow() + 100*time.Millisecond)
	if _, err := c.node("n1").n.GroupState(g); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("isolated leader reads %s: err %v; want ErrUnavailable", g, err)
	}
	if l := c.node("n1").n.List(&shard.Filter{}, false); slices.Contains(l.Parts, part) {
		t.Fatalf("isolated leader lists partition %d (answers for %v); want it missing", part, l.Parts)
	}
	c.run(8 * time.Second)
	if s := c.servers(part); len(s) != 1 || s[0] == "n1" {
		t.Fatalf("partition %d is served by %v; want one of n2, n3", part, s)
	}
	for _, other := range []string{"n2", "n3"} {
		c.cut("n1", other, false)
	}
	c.run(15 * time.Second)
	if s := c.servers(part); len(s) != 1 {
		t.Fatalf("partition %d is served by %v after the cut healed", part, s)
	}
}

// A peer removed from a partition's replica set keeps its copy, and its
// Raft state still names the leader of the day (nobody tells it anything
// any more, it may not even have applied its own removal). Owner used to
// return that leader forever: once it died or lost the partition, requests
// and outcomes routed through the removed peer went to a peer that could
// never answer (simulate: --peers 5 seeds 39, 197). Owner now names the
// ring's preferred owner for a partition this peer is not a replica of.
func TestMeshRemovedReplicaRoutesToOwner(t *testing.T) {
	const parts = 8
	c := newCluster(t, 4, parts)
	c.run(30 * time.Second)
	n1 := c.node("n1").n
	part := -1
	for p := range parts {
		if n1.parts[p] != nil && !n1.replica(n1.parts[p]) && len(c.servers(p)) == 1 {
			part = p
			break
		}
	}
	if part < 0 {
		t.Fatalf("n1 was removed from no partition")
	}
	g := groupIn(t, n1, part)
	victim := c.node(c.servers(part)[0])
	victim.down = true
	victim.log.Crash()
	c.run(15 * time.Second)
	s := c.servers(part)
	if len(s) != 1 {
		t.Fatalf("partition %d is served by %v after %s died", part, s, victim.id)
	}
	for _, cn := range c.nodes {
		if cn.down || cn.id == s[0] {
			continue
		}
		if o := cn.n.Owner(g); o != s[0] {
			t.Errorf("%s: Owner(%s) = %q; want %s, which serves partition %d", cn.id, g, o, s[0], part)
		}
	}
}

// groupIn returns a group id that falls in partition part.
func groupIn(t *testing.T, n *Node, part int) shard.GroupID {
	t.Helper()
	for i := range 100_000 {
		if g := shard.GroupID(fmt.Sprint("g", i)); n.PartitionOf(g) == part {
			return g
		}
	}
	t.Fatalf("no group id in partition %d", part)
	return ""
}

// Two peers that cannot reach each other but both reach a third disagree on
// who is alive, hence on each partition's preferred owner. Each handed the
// partitions to the other as soon as it got them, every few Raft ticks for
// as long as the cut lasted; a new leader now keeps a partition for
// transferHold first.
func TestMeshCutLinkDoesNotPingPongLeadership(t *testing.T) {
	const parts = 8
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	c.oneServer(parts)
	c.cut("n1", "n2", true)
	last := make([]string, parts)
	moves := 0
	c.check = func() {
		for p := range parts {
			s := c.servers(p)
			if len(s) > 1 {
				t.Fatalf("at %v partition %d is served by %v", c.now, p, s)
			}
			if len(s) == 1 && s[0] != last[p] {
				moves++
				last[p] = s[0]
			}
		}
	}
	const cut = 20 * time.Second
	c.run(cut)
	// One move per partition to settle, then at most one per transferHold.
	if limit := parts * (2 + int(cut/transferHold)); moves > limit {
		t.Fatalf("leadership moved %d times in %v over %d partitions; want at most %d", moves, cut, parts, limit)
	}
	t.Logf("%d moves", moves)
}

// TestDigestReplicasAgree: after a group ran, the replicas of its
// partition that applied the same index report the same digest, and the
// digest moved from before.
func TestDigestReplicasAgree(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	spec := shard.GroupSpec{ID: "gdigest", Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Name: "a", Handler: "h"}, {Name: "b", Handler: "h"}}}
	part := c.nodes[0].n.PartitionOf(spec.ID)
	_, before, _ := c.nodes[0].n.Digest(part)
	if r := c.submit(spec); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.run(5 * time.Second)
	compared := 0
	sums := map[uint64]uint64{}
	for _, cn := range c.nodes {
		applied, sum, ok := cn.n.Digest(part)
		if !ok {
			continue
		}
		if prev, seen := sums[applied]; seen {
			compared++
			if prev != sum {
				t.Fatalf("%s at index %d: digest %x, another replica %x", cn.id, applied, sum, prev)
			}
		}
		sums[applied] = sum
	}
	if compared == 0 {
		t.Fatal("no two replicas at the same applied index")
	}
	if _, after, _ := c.nodes[0].n.Digest(part); after == before {
		t.Fatal("the digest did not change with the partition's state")
	}
	if _, _, ok := c.nodes[0].n.Digest(99); ok {
		t.Fatal("Digest of a partition that does not exist")
	}
}

// A thief whose ring names another owner than the peer that granted its
// leases (a young mesh, a leadership move not yet done) still gets its
// outcomes to the granter, which leads the partition: they are accepted at
// once, not re-run when the leases expire.
func TestMeshOutcomesReachGranter(t *testing.T) {
	const parts = 8
	c := newCluster(t, 4, parts)
	c.run(30 * time.Second)
	var part int
	var leader, thief, other *cnode
	for part = range parts {
		s := c.servers(part)
		if len(s) != 1 {
			continue
		}
		leader = c.node(s[0])
		thief, other = nil, nil
		for _, cn := range c.nodes {
			switch p := cn.n.parts[part]; {
			case cn == leader:
			case thief == nil && (p == nil || !cn.n.replica(p)):
				thief = cn
			case other == nil:
				other = cn
			}
		}
		if thief != nil && other != nil {
			break
		}
	}
	if thief == nil || other == nil {
		t.Fatal("no partition with a leader, a non-replica and a third peer")
	}
	g := groupIn(t, leader.n, part)
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(40)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := 0; len(c.runs[thief.id]) == 0; i++ {
		if i > 500 {
			t.Fatalf("%s stole nothing from %s in 5 s", thief.id, leader.id)
		}
		c.step(10 * time.Millisecond)
	}
	// The thief's view: the partition's owner is a peer that does not
	// lead it, and drops outcomes for it.
	thief.n.mesh.preferred[part] = ring.PeerID(other.id)
	if o := thief.n.Owner(g); o != other.id {
		t.Fatalf("thief's Owner(%s) = %q; want %s", g, o, other.id)
	}
	c.step(10 * time.Millisecond) // the thief reports its runs
	for i := 0; thief.n.OutboxLen() > 0; i++ {
		if i > 100 {
			t.Fatalf("after 1 s %s still holds %d outcomes for %s, which granted them", thief.id, thief.n.OutboxLen(), leader.id)
		}
		c.step(10 * time.Millisecond)
	}
}

// A leader that can send but not hear (the links to it cut, those from it
// not) is heard by its voters, so they elect nobody else, and cannot
// commit: before abdication its partitions stayed unavailable for as long
// as the cut lasted. It now abdicates after DeadAfter without a majority's
// answers and falls silent; the voters elect another, and the mesh serves
// every partition again while the cut lasts, never with two servers.
func TestMeshOneWayCutLeaderAbdicates(t *testing.T) {
	const parts = 8
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	victim := c.node("n2")
	led := victim.n.Leading()
	if len(led) == 0 {
		t.Fatalf("n2 leads nothing: %v", c.leaders())
	}
	c.oneServer(parts)
	for _, o := range []string{"n1", "n3"} {
		c.cuts[[2]string{o, victim.id}] = true // n2 hears nobody; everybody hears n2
	}
	c.run(12 * time.Second)
	for p := range parts {
		if s := c.servers(p); len(s) != 1 || s[0] == victim.id {
			t.Fatalf("partition %d is served by %v 12 s into the cut; want one server other than n2 (n2 led %v)", p, s, led)
		}
	}
	if a := victim.n.stats.Abdications; a < len(led) {
		t.Errorf("n2 counted %d abdications; want at least %d (it led %v)", a, len(led), led)
	}
	g := groupIn(t, victim.n, led[0])
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(2)}); r.Err != nil || !r.Submit.Created {
		t.Fatalf("submit to partition %d during the cut: %+v", led[0], r)
	}
	clear(c.cuts)
	c.run(15 * time.Second)
	if l := c.leaders(); l[victim.id] == 0 {
		t.Fatalf("leaders after the cut healed = %v; want n2 to lead its share again", l)
	}
	if st := c.groupState(g); st != shard.GroupSucceeded {
		t.Fatalf("%s = %v after the cut healed; want SUCCEEDED", g, st)
	}
}

// A peer busy with its own queue still takes a task pinned to it that
// another owner holds: before askStranded it stole only when its own
// queue ran dry, so the pinned task (a scheduled broadcast's copy, say)
// waited for all of that queue.
func TestMeshBusyPeerTakesItsPinnedTask(t *testing.T) {
	const parts = 8
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	busy := c.node("n2")
	own, other := -1, -1
	for p := range parts {
		switch s := c.servers(p); {
		case len(s) != 1:
		case s[0] == busy.id && own < 0:
			own = p
		case s[0] != busy.id && other < 0:
			other = p
		}
	}
	if own < 0 || other < 0 {
		t.Fatalf("no partition led by n2 and one led elsewhere: %v", c.leaders())
	}
	queue := echoTasks(400)
	for i := range queue {
		queue[i].Pin = busy.id
	}
	gQueue := groupIn(t, busy.n, own)
	if r := c.submit(shard.GroupSpec{ID: gQueue, Mode: shard.ModeParallel, Tasks: queue}); r.Err != nil {
		t.Fatal(r.Err)
	}
	pinned := echoTasks(1)
	pinned[0].Pin = busy.id
	owner := c.node(c.servers(other)[0])
	gPinned := groupIn(t, owner.n, other)
	if r := c.submit(shard.GroupSpec{ID: gPinned, Mode: shard.ModeParallel, Tasks: pinned}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if c.groupState(gPinned) != shard.GroupSucceeded {
		// Its heartbeat names the one peer that may take it.
		if hb := owner.n.mesh.heartbeat().Heartbeat; hb.Stranded != 1 || !slices.Equal(hb.StrandedFor, []string{busy.id}) {
			t.Errorf("%s's heartbeat: stranded %d for %v; want 1 for [%s]", owner.id, hb.Stranded, hb.StrandedFor, busy.id)
		}
	}
	for i := 0; c.groupState(gPinned) != shard.GroupSucceeded; i++ {
		if c.groupState(gQueue) == shard.GroupSucceeded {
			t.Fatalf("n2 ran its whole queue of 400 before the task pinned to it in partition %d", other)
		}
		if i > 1000 {
			t.Fatal("the pinned task did not finish in 10 s")
		}
		c.step(10 * time.Millisecond)
	}
}
