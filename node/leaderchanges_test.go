package node

import (
	"testing"
	"time"
)

// LeaderChanges counts every partition leadership a node gains or loses:
// a lone peer's start gains each partition once, and when a peer dies the
// survivors gain the partitions it led.
func TestLeaderChanges(t *testing.T) {
	const parts = 8
	one := newCluster(t, 1, parts)
	one.run(5 * time.Second)
	if got := one.node("n1").n.Counters().LeaderChanges; got != parts {
		t.Errorf("a lone peer of %d partitions counts %d leader changes; want %d", parts, got, parts)
	}

	c := newCluster(t, 3, parts)
	c.run(30 * time.Second)
	n3 := c.node("n3")
	lost := n3.n.Stats().Leading
	if lost == 0 {
		t.Fatalf("n3 leads no partition: nothing to fail over")
	}
	before := 0
	for _, cn := range c.nodes[:2] {
		before += cn.n.Counters().LeaderChanges
	}
	n3.down = true
	n3.log.Crash()
	c.run(15 * time.Second)
	after := 0
	for _, cn := range c.nodes[:2] {
		after += cn.n.Counters().LeaderChanges
	}
	if after-before < lost {
		t.Errorf("the survivors counted %d leader changes after n3 died; want at least the %d partitions it led", after-before, lost)
	}
}
