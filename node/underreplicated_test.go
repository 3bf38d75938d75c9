package node

import (
	"testing"
	"time"
)

// A partition is under-replicated while one of its voters is dead: in a
// mesh of three with three replicas, every partition a survivor leads
// counts once the third peer is declared dead, and none before. A lone
// peer, whose partitions cannot have more voters, counts none.
func TestUnderReplicated(t *testing.T) {
	const parts = 8
	one := newCluster(t, 1, parts)
	one.run(5 * time.Second)
	if n := one.node("n1").n; n.Stats().Leading != parts || n.UnderReplicated() != 0 {
		t.Fatalf("a lone peer leads %d partitions, %d under-replicated; want %d, 0", n.Stats().Leading, n.UnderReplicated(), parts)
	}

	c := newCluster(t, 3, parts)
	c.run(30 * time.Second)
	for _, cn := range c.nodes {
		if u := cn.n.UnderReplicated(); u != 0 {
			t.Errorf("%s: %d partitions under-replicated in a whole mesh; want 0", cn.id, u)
		}
	}
	n3 := c.node("n3")
	n3.down = true
	n3.log.Crash()
	c.run(15 * time.Second)
	led := 0
	for _, cn := range c.nodes[:2] {
		if st, ok := cn.n.PeerState("n3"); !ok || st != PeerDead {
			t.Fatalf("%s holds n3 %v (member %v); want dead", cn.id, st, ok)
		}
		leading := cn.n.Stats().Leading
		led += leading
		if u := cn.n.UnderReplicated(); u != leading {
			t.Errorf("%s: %d partitions under-replicated; want all %d it leads (n3, a voter of each, is dead)", cn.id, u, leading)
		}
	}
	if led != parts {
		t.Errorf("the survivors lead %d partitions; want %d", led, parts)
	}
}
