package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/shard"
)

// The mesh tests that need nothing but the Node's exported API run on
// nodetest.Mesh, the harness the transcripts and the runtime's tests use;
// those that look inside a Node stay on the internal cluster
// (mesh_test.go).

func echoGroup(id shard.GroupID, n int) shard.GroupSpec {
	spec := shard.GroupSpec{ID: id, Mode: shard.ModeParallel}
	for i := range n {
		spec.Tasks = append(spec.Tasks, shard.TaskSpec{Name: fmt.Sprint(i), Handler: "echo", Payload: []byte(fmt.Sprint(i))})
	}
	return spec
}

// leaders counts the partitions each live peer leads.
func leaders(m *nodetest.Mesh) map[string]int {
	out := map[string]int{}
	for _, p := range m.Peers {
		if !p.Down {
			out[p.ID] = len(p.Node.Leading())
		}
	}
	return out
}

// voterSets returns, per partition, the voters as its server sees them
// (nil without one server).
func voterSets(m *nodetest.Mesh) [][]string {
	out := make([][]string, m.Partitions)
	for part := range m.Partitions {
		if srv := m.Server(part); srv != "" {
			r, _ := m.MustPeer(srv).Node.Replica(part)
			out[part] = slices.Sorted(slices.Values(r.Voters))
		}
	}
	return out
}

func groupState(m *nodetest.Mesh, g shard.GroupID) shard.GroupState {
	srv := m.Server(m.PartitionOf(g))
	if srv == "" {
		return 0
	}
	st, _ := m.MustPeer(srv).Node.GroupState(g)
	return st
}

func TestMeshFormsAndReplicates(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 16)
	m.Run(15 * time.Second)
	for _, p := range m.Peers {
		if got := len(p.Node.Members()); got != 3 {
			t.Fatalf("%s sees %d members; want 3", p.ID, got)
		}
		for part := range 16 {
			r, ok := p.Node.Replica(part)
			if !ok {
				t.Fatalf("%s does not hold partition %d", p.ID, part)
			}
			if len(r.Voters) != 3 {
				t.Fatalf("%s partition %d has voters %v; want 3", p.ID, part, r.Voters)
			}
		}
	}
	lead := leaders(m)
	if lead["n1"]+lead["n2"]+lead["n3"] != 16 || lead["n2"] == 0 || lead["n3"] == 0 {
		t.Fatalf("leadership = %v; want 16 spread over the 3 peers", lead)
	}
}

func TestMeshFailover(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 8)
	m.Run(15 * time.Second)
	var groups []shard.GroupID
	for i := range 8 {
		g := shard.GroupID(fmt.Sprint("g", i))
		if r, ok := m.Submit(echoGroup(g, 4)); !ok || r.Err != nil || !r.Submit.Created {
			t.Fatalf("submit %s: %+v, replied %v", g, r, ok)
		}
		groups = append(groups, g)
	}
	m.Crash("n2", true)
	m.Run(10 * time.Second)
	for _, g := range groups {
		if st := groupState(m, g); st != shard.GroupSucceeded {
			t.Fatalf("%s = %v after n2 died; want SUCCEEDED (leaders %v)", g, st, leaders(m))
		}
	}
	if l := leaders(m); l["n1"]+l["n3"] != 8 {
		t.Fatalf("leaders after failover = %v; want all 8 partitions on n1 and n3", l)
	}
	m.Restart("n2")
	m.Run(15 * time.Second)
	if l := leaders(m); l["n2"] == 0 {
		t.Fatalf("leaders after n2 came back = %v; want n2 to lead its share again", l)
	}
	for _, g := range groups {
		if st := groupState(m, g); st != shard.GroupSucceeded {
			t.Fatalf("%s = %v after n2 came back", g, st)
		}
	}
}

func TestMeshJoinTakesShare(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 16)
	m.Run(15 * time.Second)
	n4 := m.AddPeer("n4")
	m.Run(30 * time.Second)
	held := 0
	for i, vs := range voterSets(m) {
		if len(vs) != 3 {
			t.Fatalf("partition %d has voters %v; want 3", i, vs)
		}
		if slices.Contains(vs, "n4") {
			held++
		}
	}
	if held == 0 || len(n4.Node.Leading()) == 0 {
		t.Fatalf("n4 is a voter of %d partitions and leads %d; want a share of both", held, len(n4.Node.Leading()))
	}
}

func TestMeshForgetMovesReplicas(t *testing.T) {
	m := nodetest.NewMesh(t, 4, 16)
	m.Run(20 * time.Second)
	m.Crash("n4", false)
	m.Run(5 * time.Second)
	m.Forget("n4")
	m.Run(30 * time.Second)
	for i, vs := range voterSets(m) {
		if len(vs) != 3 || slices.Contains(vs, "n4") {
			t.Fatalf("partition %d has voters %v after n4 was forgotten; want 3 without n4", i, vs)
		}
	}
	for _, p := range m.Peers {
		if !p.Down && slices.ContainsFunc(p.Node.Members(), func(mi node.MemberInfo) bool { return mi.ID == "n4" }) {
			t.Fatalf("%s still lists n4", p.ID)
		}
	}
}

// TestGrowthSkipsTwoVoters: a young mesh grows each partition from the
// founder's lone voter to three without passing through two voters (two
// stop for good when either is lost): the two learners are promoted
// together in one joint configuration.
func TestGrowthSkipsTwoVoters(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 8)
	three := 0
	for step := 0; step < 2000 && three < 8; step++ {
		m.Step(10 * time.Millisecond)
		three = 0
		for part := range 8 {
			for _, p := range m.Peers {
				r, ok := p.Node.Replica(part)
				if !ok {
					continue
				}
				if len(r.Voters) == 2 {
					t.Fatalf("at %v %s's partition %d has voters %v (learners %v)", m.Now.Sub(nodetest.Epoch), p.ID, part, r.Voters, r.Learners)
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

// A voter the ring no longer wants stays until its replacement votes, dead
// or not: removing a dead one first left two voters, and a partition with
// two stops for good when either is lost (the simulator's seed 939; the
// transcript testdata/dead_voter_kept.txt shows the steps). Here n4 is
// forgotten while n3, its replacement, is down: the partitions keep n4
// until n3 is back and promoted, and never have two voters.
func TestMeshDeadVoterKeptUntilReplaced(t *testing.T) {
	const parts = 16
	m := nodetest.NewMesh(t, 4, parts)
	m.Run(20 * time.Second)
	m.Check = func() {
		for _, p := range m.Peers {
			for part := range parts {
				// The Raft configuration, forgotten peers included.
				if r, ok := p.Node.Replica(part); ok && !p.Down && r.Serving && len(r.Voters) == 2 {
					t.Fatalf("at %v partition %d has two voters %v", m.Now.Sub(nodetest.Epoch), part, r.Voters)
				}
			}
		}
	}
	m.Crash("n3", false)
	m.Crash("n4", false)
	m.Run(5 * time.Second)
	m.Forget("n4")
	m.Run(20 * time.Second)
	m.Restart("n3")
	m.Run(40 * time.Second)
	for i, vs := range voterSets(m) {
		if !slices.Equal(vs, []string{"n1", "n2", "n3"}) {
			t.Fatalf("partition %d has voters %v after n3 came back; want n1, n2, n3", i, vs)
		}
	}
}
