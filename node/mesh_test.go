package node

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

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
// recently enough (lease.go; or, quiesced, are alive to it), and they vote
// for no one else meanwhile.
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
	// It stops once its voters are suspect to it (a quiesced partition's
	// lease is the membership's word): how soon depends on when it last
	// heard them (a steal request just before the cut is as good as a
	// probe's ack), never later than they could elect another (DeadAfter
	// of silence; oneServer checks every step that no two serve).
	n1 := c.node("n1").n
	var err error
	for waited := time.Duration(0); waited < n1.cfg.DeadAfter; waited += 10 * time.Millisecond {
		c.run(10 * time.Millisecond)
		if _, err = n1.GroupState(g); errors.Is(err, ErrUnavailable) {
			break
		}
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("isolated leader reads %s %v after the cut: err %v; want ErrUnavailable", g, n1.cfg.DeadAfter, err)
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
		// Removed: n1 left the partition (leave.go), or holds a stale copy.
		if (n1.parts[p] == nil || !n1.replica(n1.parts[p])) && len(c.servers(p)) == 1 {
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
	c, victim, led := leaderMesh(t, parts)
	c.oneServer(parts)
	c.cutOneWay(victim)
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

// The sorted member ids (merged as members are added, sorted again after
// a forget) and the membership's digest stay those of the members map
// through any mix of adds, forgets and reads; a heartbeat naming the
// same members is recognised by its digest, one naming others is not.
func TestMemberIDsAndSum(t *testing.T) {
	c := newCluster(t, 1, 4)
	m := &c.node("n1").n.mesh
	rng := rand.New(rand.NewPCG(3, 4))
	for op := range 5000 {
		id := fmt.Sprint("p", rng.IntN(300))
		switch rng.IntN(4) {
		case 0, 1:
			if m.members[id] == nil && !m.forgotten[id] {
				m.add(&member{id: id, state: PeerAlive})
			}
		case 2:
			if rng.IntN(10) == 0 {
				m.forget(id, c.now)
			}
		case 3:
			got := m.memberIDs()
			if want := slices.Sorted(maps.Keys(m.members)); !slices.Equal(got, want) {
				t.Fatalf("op %d: memberIDs %v; want %v", op, got, want)
			}
		}
		if m.sum != memberSum(slices.Collect(maps.Keys(m.members))) {
			t.Fatalf("op %d: digest %x; want that of the members, %x", op, m.sum, memberSum(slices.Collect(maps.Keys(m.members))))
		}
	}
	ids := m.memberIDs()
	same := &Heartbeat{Members: slices.Clone(ids), Sum: memberSum(ids)}
	if !m.sameMembers(same) {
		t.Errorf("a heartbeat naming this peer's members is not recognised as such")
	}
	other := slices.Clone(ids)
	other[len(other)-1] = "zz"
	if m.sameMembers(&Heartbeat{Members: other, Sum: memberSum(other)}) || m.sameMembers(&Heartbeat{Members: other}) {
		t.Errorf("a heartbeat naming other members is taken for this peer's")
	}
	if !m.sameMembers(&Heartbeat{Members: slices.Clone(ids)}) {
		t.Errorf("a heartbeat without a digest naming this peer's members is not recognised (compared)")
	}
}

// memberSum is the digest mesh.sum keeps, computed afresh: the sum of the
// ids' hashes.
func memberSum(ids []string) uint64 {
	var s uint64
	for _, id := range ids {
		s += RaftID(id)
	}
	return s
}

// The address book, shared until the members or their addresses change,
// is always the one built afresh: every member but this peer with
// addresses, sorted by id; and a book handed out never changes.
func TestBookFollowsMembersAndAddresses(t *testing.T) {
	c := newCluster(t, 1, 4)
	m := &c.node("n1").n.mesh
	rng := rand.New(rand.NewPCG(5, 6))
	want := func() []PeerAddrs {
		var out []PeerAddrs
		for _, id := range slices.Sorted(maps.Keys(m.members)) {
			if mb := m.members[id]; id != m.n.cfg.ID && len(mb.addrs) > 0 {
				out = append(out, PeerAddrs{ID: id, Addrs: mb.addrs})
			}
		}
		return out
	}
	type handed struct{ book, copy []PeerAddrs }
	var out []handed
	for op := range 6000 {
		id := fmt.Sprint("p", rng.IntN(400))
		addrs := []string{fmt.Sprint("/ip4/10.0.0.", rng.IntN(3), "/tcp/1")}
		switch mb := m.members[id]; rng.IntN(8) {
		case 0, 1, 2:
			if mb == nil && !m.forgotten[id] {
				nb := &member{id: id, state: PeerAlive}
				if rng.IntN(2) == 0 {
					nb.addrs = addrs
				}
				m.add(nb)
			}
		case 3, 4:
			if mb != nil && (len(mb.addrs) == 0 || rng.IntN(20) == 0) {
				m.setAddrs(mb, addrs)
			}
		case 5:
			if rng.IntN(20) == 0 {
				m.forget(id, c.now)
			}
		default:
			got := m.book()
			if w := want(); !slices.EqualFunc(got, w, func(a, b PeerAddrs) bool { return a.ID == b.ID && slices.Equal(a.Addrs, b.Addrs) }) {
				t.Fatalf("op %d: book %v; want %v", op, got, w)
			}
			out = append(out, handed{got, slices.Clone(got)})
		}
	}
	for i, h := range out {
		if !slices.EqualFunc(h.book, h.copy, func(a, b PeerAddrs) bool { return a.ID == b.ID && slices.Equal(a.Addrs, b.Addrs) }) {
			t.Fatalf("book %d changed after it was handed out", i)
		}
	}
}

// A quiesced partition's voters start to count their leader's silence
// only when it wakes them, and a leader cut off one way (it hears nobody,
// everybody hears it) wakes its partitions and abdicates in the same
// moment: its quiet must outlast their DeadAfter of silence and the
// longest wait of a voter that is not the preferred owner before it
// campaigns. With two DeadAfters the leader could resume first, and the
// partition went without a server for rounds of abdicating and resuming.
// The cut comes at several moments after the partitions quiesced: each
// is another schedule (the voters' seeded waits differ).
func TestMeshQuiescedLeaderCutOneWayIsReplaced(t *testing.T) {
	const parts = 8
	for shift := range 12 {
		c, victim, led := leaderMesh(t, parts)
		quiet := func() bool {
			for _, p := range led {
				if !victim.n.Quiesced(p) {
					return false
				}
			}
			return true
		}
		for i := 0; !quiet(); i++ {
			if i == 1000 {
				t.Fatalf("n2's partitions %v did not quiesce", led)
			}
			c.run(10 * time.Millisecond)
		}
		c.run(time.Duration(shift) * 170 * time.Millisecond)
		c.oneServer(parts)
		c.cutOneWay(victim)
		c.run(12 * time.Second)
		for _, p := range led {
			if s := c.servers(p); len(s) != 1 || s[0] == victim.id {
				t.Errorf("cut %v after quiescing: partition %d (led by n2) is served by %v 12 s into the cut; want one server other than n2",
					time.Duration(shift)*170*time.Millisecond, p, s)
			}
		}
	}
}

// leaderMesh returns a 3-peer mesh of parts partitions 15 s after it
// formed, its peer n2 and the partitions n2 leads (some).
func leaderMesh(t *testing.T, parts int) (*cluster, *cnode, []int) {
	t.Helper()
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	victim := c.node("n2")
	led := victim.n.Leading()
	if len(led) == 0 {
		t.Fatalf("n2 leads nothing: %v", c.leaders())
	}
	return c, victim, led
}

// cutOneWay cuts the links to victim: it hears nobody, everybody hears it.
func (c *cluster) cutOneWay(victim *cnode) {
	for _, cn := range c.nodes {
		if cn != victim {
			c.cuts[[2]string{cn.id, victim.id}] = true
		}
	}
}

// A peer that drained, stopped and started again is not draining: its
// new run says so in its heartbeat, which gossip may not bring (a link
// from it was cut while it started, and under the probe protocol it does
// not heartbeat again until what it advertises changes). A member that
// heard the drain and learns of the new run some other way (a probe, a
// membership list) used to keep it draining for good: it preferred
// another owner for the partitions the restarted peer should lead, while
// the peers that had the heartbeat preferred it, and the two handed
// leadership to each other every transferHold (simulate: seed 72027,
// --peers 5 --workload sched; a schedule there skipped ticks at each
// hand-over). A new run of a member now voids what its old run
// advertised, and its heartbeat is asked for.
func TestMeshRestartedDrainedPeerNotDraining(t *testing.T) {
	const parts = 4
	c := newClusterOf(t, 3, parts, true)
	c.run(10 * time.Second)
	n2 := c.node("n2")
	n2.n.Drain()
	c.run(2 * time.Second)
	for _, id := range []string{"n1", "n3"} {
		if mb := c.node(id).n.mesh.members["n2"]; !mb.draining {
			t.Fatalf("%s did not hear that n2 drains", id)
		}
	}
	n2.down = true
	c.run(5 * time.Second)
	c.cuts[[2]string{"n2", "n3"}] = true // one way: n3 misses the new run's heartbeats, n2 hears n3
	c.start(n2, parts)
	c.run(5 * time.Second)
	c.cuts[[2]string{"n2", "n3"}] = false
	c.run(10 * time.Second)
	for _, id := range []string{"n1", "n3"} {
		m := c.node(id).n.mesh
		if mb := m.members["n2"]; mb.draining || !m.eligible("n2") || !mb.beat {
			t.Errorf("%s holds the restarted n2 draining (%v), not eligible to lead (%v), or has no heartbeat of its new run (%v)",
				id, mb.draining, m.eligible("n2"), mb.beat)
		}
	}
}

// A leader handing its partitions over keeps counting the answers its
// voters gave before: starting a transfer voids its read lease, not its
// knowledge that the voters hear it. It used to forget both, and a
// leader of more than DeadAfter whose transfer took longer than a Raft
// tick (the target restarted and still catching up, or slow) found no
// voter answered at its next tick and abdicated: in a rolling restart of
// 4 peers, hundreds of partitions at once, with 503s until they were
// led again.
func TestMeshSlowTransferDoesNotAbdicate(t *testing.T) {
	c, ld, led := leaderMesh(t, 8)
	ld.n.Drain()
	// The link from n2 to the first partition's next owner is cut: the
	// transfers start and do not finish, while the other voter still
	// hears n2 and answers it.
	c.step(10 * time.Millisecond)
	p := ld.n.parts[led[0]]
	want := ld.n.mesh.owner(p)
	if want == "" || want == ld.id {
		t.Fatalf("partition %d: next owner %q after %s drains", led[0], want, ld.id)
	}
	c.cuts[[2]string{ld.id, want}] = true
	c.run(2 * time.Second) // under DeadAfter: want does not campaign on its own
	if a := ld.n.stats.Abdications; a != 0 {
		t.Fatalf("%s abdicated %d times while handing over partitions whose voters answered it", ld.id, a)
	}
	if !p.leader || p.rn.BasicStatus().LeadTransferee == 0 && ld.n.now.Sub(p.transferAt) > 2*time.Second {
		t.Fatalf("partition %d: %s leader %v, transfer started %v ago; want a transfer under way", led[0], ld.id, p.leader, ld.n.now.Sub(p.transferAt))
	}
}

// A leader whose two other voters die together abdicates (it hears no
// majority), though nothing cut it off: they were down. When they come
// back it resumes at once, in the same term, pinging them for the proof
// that their links to it work. Before, it stayed silent until they had
// heard nothing from it for DeadAfter and elected another: in a restart
// loop killing two of five peers, a partition that lost two voters
// answered 503 for seconds after they were back.
func TestMeshAbdicatedLeaderResumesWhenVotersReturn(t *testing.T) {
	const parts = 8
	c, ld, led := leaderMesh(t, parts)
	c.oneServer(parts)
	p := led[0]
	term := ld.n.parts[p].term
	others := []*cnode{c.node("n1"), c.node("n3")}
	for _, cn := range others {
		cn.down = true
	}
	c.run(4 * time.Second)
	if !ld.n.parts[p].abdicated {
		t.Fatalf("partition %d: %s did not abdicate 4 s after both its other voters died", p, ld.id)
	}
	for _, cn := range others {
		c.start(cn, parts)
	}
	for i := 0; len(c.servers(p)) == 0; i++ {
		if i > 150 {
			t.Fatalf("partition %d has no server 1.5 s after its voters came back (%s abdicated %v)", p, ld.id, ld.n.parts[p].abdicated)
		}
		c.step(10 * time.Millisecond)
	}
	if s, got := c.servers(p), ld.n.parts[p].term; s[0] != ld.id || got != term {
		t.Fatalf("partition %d served by %v in %s's term %d; want %s resumed in term %d", p, s, ld.id, got, ld.id, term)
	}
}

// Each peer's build version reaches the others' membership views with its
// heartbeats (Heartbeat.Version), so that /v1/peers shows which peer runs
// which build during a rolling upgrade: a peer of an older release (no
// version) shows none, and a restarted peer shows its new build.
func TestMeshPeerVersions(t *testing.T) {
	const parts = 4
	c := newClusterOf(t, 3, parts, true)
	c.node("n1").version, c.node("n2").version = "v1.1.0", "v1.1.0"
	for _, cn := range c.nodes[:2] {
		c.start(cn, parts) // with their versions; n3 is of an older release
	}
	c.run(10 * time.Second)
	versions := func(id string) map[string]string {
		out := map[string]string{}
		for _, m := range c.node(id).n.Members() {
			out[m.ID] = m.Version
		}
		return out
	}
	want := map[string]string{"n1": "v1.1.0", "n2": "v1.1.0", "n3": ""}
	for _, id := range []string{"n1", "n2", "n3"} {
		if got := versions(id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s sees versions %v; want %v", id, got, want)
		}
	}
	n3 := c.node("n3")
	n3.down = true
	c.run(time.Second)
	n3.version = "v1.2.0"
	c.start(n3, parts)
	c.run(10 * time.Second)
	want["n3"] = "v1.2.0"
	for _, id := range []string{"n1", "n2", "n3"} {
		if got := versions(id); !reflect.DeepEqual(got, want) {
			t.Errorf("after n3's upgrade, %s sees versions %v; want %v", id, got, want)
		}
	}
}

// A mesh started together exchanges no heartbeats between peers whose
// heartbeats would say nothing their probes do not (Probe.Plain): their
// plain probes carry their versions instead, so each peer's version
// reaches the others with no gossip at all, after a restart too.
func TestMeshPeerVersionsWithoutHeartbeats(t *testing.T) {
	const parts = 8 // few: many pairs of peers share no partition, and exchange no Raft message
	c := newClusterOf(t, 8, parts, true)
	c.link = func(from, to *cnode, gossip bool) bool { return !gossip }
	want := map[string]string{}
	for _, cn := range c.nodes {
		cn.version = "v1.1.0"
		want[cn.id] = cn.version
		c.start(cn, parts)
	}
	c.run(10 * time.Second)
	check := func(want map[string]string) {
		t.Helper()
		for _, cn := range c.nodes {
			got := map[string]string{}
			for _, m := range cn.n.Members() {
				got[m.ID] = m.Version
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s sees versions %v; want %v", cn.id, got, want)
			}
		}
	}
	check(want)
	n2 := c.node("n2")
	n2.down = true
	c.run(time.Second)
	n2.version = "v1.2.0"
	want["n2"] = n2.version
	c.start(n2, parts)
	c.run(10 * time.Second)
	check(want)
}
