package node

import (
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/wal"
)

// addNode starts a new joiner in the cluster.
func (c *cluster) addNode(id string, partitions int) *cnode {
	cn := &cnode{id: id, log: wal.NewMemory()}
	c.nodes = append(c.nodes, cn)
	c.start(cn, partitions)
	return cn
}

// voterSets returns, per partition, the voters as seen by its leader.
func (c *cluster) voterSets(partitions int) [][]string {
	out := make([][]string, partitions)
	for _, cn := range c.nodes {
		if cn.down {
			continue
		}
		for i, p := range cn.n.parts {
			if p != nil && p.serving {
				out[i] = cn.n.mesh.voters(p)
			}
		}
	}
	return out
}

func TestMeshJoinTakesShare(t *testing.T) {
	const parts = 16
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	n4 := c.addNode("n4", parts)
	c.run(30 * time.Second)
	held := 0
	for i, vs := range c.voterSets(parts) {
		if len(vs) != 3 {
			t.Fatalf("partition %d has voters %v; want 3", i, vs)
		}
		if slices.Contains(vs, "n4") {
			held++
		}
	}
	if held == 0 || len(n4.n.Leading()) == 0 {
		t.Fatalf("n4 is a voter of %d partitions and leads %d; want a share of both", held, len(n4.n.Leading()))
	}
}

func TestMeshForgetMovesReplicas(t *testing.T) {
	const parts = 16
	c := newCluster(t, 4, parts)
	c.run(20 * time.Second)
	gone := c.node("n4")
	gone.down = true
	c.run(5 * time.Second)
	for _, cn := range c.nodes {
		if !cn.down {
			cn.n.Forget("n4")
		}
	}
	c.run(30 * time.Second)
	for i, vs := range c.voterSets(parts) {
		if len(vs) != 3 || slices.Contains(vs, "n4") {
			t.Fatalf("partition %d has voters %v after n4 was forgotten; want 3 without n4", i, vs)
		}
	}
	for _, cn := range c.nodes {
		if !cn.down && slices.ContainsFunc(cn.n.Members(), func(m MemberInfo) bool { return m.ID == "n4" }) {
			t.Fatalf("%s still lists n4", cn.id)
		}
	}
}

// TestGrowthSkipsTwoVoters: a young mesh grows each partition from the
// founder's lone voter to three without passing through two voters (two
// stop for good when either is lost): the two learners are promoted
// together in one joint configuration.
func TestGrowthSkipsTwoVoters(t *testing.T) {
	c := newLabeledCluster(t, 8, nil, nil, nil)
	three := 0
	for step := 0; step < 2000 && three < 8; step++ {
		c.step(10 * time.Millisecond)
		three = 0
		for part := range 8 {
			for _, cn := range c.nodes {
				r, ok := cn.n.Replica(part)
				if !ok {
					continue
				}
				if len(r.Voters) == 2 {
					t.Fatalf("at %v %s's partition %d has voters %v (learners %v)", time.Duration(step)*10*time.Millisecond, cn.id, part, r.Voters, r.Learners)
				}
				if r.Serving && len(r.Voters) == 3 && len(r.Learners) == 0 {
					three++
				}
			}
		}
	}
	if three < 8 {
		t.Fatalf("after 20 s only %d of 8 partitions have 3 voters", three)
	}
}

// TestGrantForFormerRunDropped: a grant addressed to a thief's former
// incarnation (it restarted since it asked) is not run by the new one.
func TestGrantForFormerRunDropped(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	hb := Message{Type: MsgHeartbeat, From: "victim", Heartbeat: &Heartbeat{Boot: "1", Partitions: 1, Load: Load{Slots: 2}, Members: []string{"p1", "victim"}}}
	if err := h.n.Step("victim", hb); err != nil {
		t.Fatal(err)
	}
	g := Message{Type: MsgGrant, From: "victim", Load: Load{Slots: 2},
		Grants: []Grant{{Task: "g.0", Round: 1, Handler: "echo", Timeout: time.Second}}, Holder: "p1#0"}
	if err := h.n.Step("victim", g); err != nil {
		t.Fatal(err)
	}
	h.stabilize()
	if len(h.runs) != 0 || h.n.Stats().Busy != 0 {
		t.Fatalf("a grant for p1#0 ran on %s: runs %v busy %d", h.n.Holder(), h.runs, h.n.Stats().Busy)
	}
	g.Holder = h.n.Holder()
	if err := h.n.Step("victim", g); err != nil {
		t.Fatal(err)
	}
	h.stabilize()
	if len(h.runs) != 1 {
		t.Fatalf("a grant for this run did not start: runs %v", h.runs)
	}
}

// A voter the ring no longer wants stays until its replacement votes, dead
// or not: removing a dead one first left two voters, and a partition with
// two stops for good when either is lost (the simulator's seed 939).
// Here n4 is forgotten while n3, its replacement, is down: the partitions
// keep n4 until n3 is back and promoted, and never have two voters.
func TestMeshDeadVoterKeptUntilReplaced(t *testing.T) {
	const parts = 16
	c := newCluster(t, 4, parts)
	c.run(20 * time.Second)
	c.check = func() {
		for _, cn := range c.nodes {
			for i, p := range cn.n.parts {
				// The Raft configuration: voters() leaves out forgotten peers.
				if !cn.down && p != nil && p.serving && len(p.conf.GetVoters()) == 2 {
					t.Fatalf("at %v partition %d has two voters %v", c.now, i, cn.n.mesh.voters(p))
				}
			}
		}
	}
	n3, n4 := c.node("n3"), c.node("n4")
	n3.down, n4.down = true, true
	c.run(5 * time.Second)
	for _, cn := range c.nodes {
		if !cn.down {
			cn.n.Forget("n4")
		}
	}
	c.run(20 * time.Second)
	c.start(n3, parts)
	c.run(40 * time.Second)
	for i, vs := range c.voterSets(parts) {
		if len(vs) != 3 || slices.Contains(vs, "n4") {
			t.Fatalf("partition %d has voters %v after n3 came back; want n1, n2, n3", i, vs)
		}
	}
}
