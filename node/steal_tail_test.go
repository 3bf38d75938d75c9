package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// In a tail that thieves drain, an owner whose slots are busy holds no
// lease ahead (ownAhead), and a thief with a free slot that asks gets the
// READY task: a victim that still counted the lease it would hold ahead
// as a slot of its own granted nothing, and a backlog's last task stayed
// READY until one of the owner's slots freed (a 400 ms task behind 400 ms
// runs: W3's makespan 1.11-1.16 x LB where it was 1.09).
func TestTailGrantsWhatOwnSlotsLeave(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	const g = shard.GroupID("tail")
	var owner *cnode
	for _, cn := range c.nodes {
		if cn.n.Serving(g) {
			owner = cn
		}
	}
	if owner == nil {
		t.Fatalf("nobody serves %s", g)
	}
	// Its tasks so far: 20 ms on average, 400 ms the longest; its leases
	// commit in 2 ms; two thieves drain its backlog.
	p := &owner.n.pace
	p.run, p.slow, p.commit = float64(20*time.Millisecond), float64(400*time.Millisecond), float64(2*time.Millisecond)
	if p.ahead(2, owner.n.cfg.LeaseAhead) == 0 {
		t.Fatal("the pacer holds no lease ahead: the test would prove nothing")
	}
	for _, cn := range c.nodes {
		if cn != owner {
			owner.n.steal.drain.Asked(c.now, cn.id, 2)
		}
	}
	c.hold = true
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(3)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.run(time.Second)
	ran := map[string]int{}
	for id, runs := range c.runs {
		for _, r := range runs {
			if r.Task.Group() == g {
				ran[id]++
			}
		}
	}
	if ran[owner.id] != 2 || ran["n1"]+ran["n2"]+ran["n3"] != 3 {
		t.Fatalf("runs by peer %v: want the owner %s on its 2 slots and a thief on the third", ran, owner.id)
	}
}
