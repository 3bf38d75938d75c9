package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// TestVoidHolder: the leases a partition's new leader expires as it
// begins serving are those of runs that cannot finish them: this peer's
// former run, a dead peer's, and a live peer's former run, known by the
// boot this node heard from the peer's present run.
func TestVoidHolder(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n1 := c.node("n1").n
	for _, tt := range []struct {
		holder string
		void   bool
	}{
		{n1.Holder(), false},
		{"n1#0", true}, // this peer's former run
		{"n2#1", false},
		{"n2", false},   // an older peer's holder: no boot to compare
		{"n9#1", true},  // no member
		{"n2#7", true},  // a run of n2 this node never heard: not its present one
		{"n3#1", false}, // n3's present run
	} {
		if got := n1.voidHolder(tt.holder); got != tt.void {
			t.Errorf("before n2 restarted: voidHolder(%q) = %v; want %v", tt.holder, got, tt.void)
		}
	}

	// n2 restarts (boot 2); n1 hears its new run. n3 goes down for good.
	c.start(c.node("n2"), 4)
	c.node("n3").down = true
	c.run(10 * time.Second)
	for _, tt := range []struct {
		holder string
		void   bool
	}{
		{"n2#1", true}, // n2's former run: its lease cannot finish
		{"n2#2", false},
		{"n3#1", true}, // dead
	} {
		if got := n1.voidHolder(tt.holder); got != tt.void {
			t.Errorf("after n2 restarted and n3 died: voidHolder(%q) = %v; want %v", tt.holder, got, tt.void)
		}
	}
}

// TestRestartedHolderUnderNewLeader: a task leased to a peer that holds
// no replica of its partition; the partition's leader goes down and the
// holder restarts before the other replicas elect a new one. The new
// leader heard the holder's new run before it began serving, so no
// restart was news to a serving leader: it must still run the task again
// at once (on the code before, the task stayed RUNNING in round 1 for its
// timeout).
func TestRestartedHolderUnderNewLeader(t *testing.T) {
	c := newCluster(t, 4, 4)
	c.run(15 * time.Second)
	const holder = "n4"
	var g shard.GroupID
	var lead *cnode
	for i := 0; i < 1000 && lead == nil; i++ {
		g = shard.GroupID(fmt.Sprintf("vh%d", i))
		for _, cn := range c.nodes {
			p := cn.n.parts[cn.n.PartitionOf(g)]
			if cn.id != holder && p != nil && p.serving && !slices.Contains(cn.n.mesh.voters(p), holder) {
				lead = cn
			}
		}
	}
	if lead == nil {
		t.Fatalf("no partition led without a replica on %s (leaders %v)", holder, c.leaders())
	}
	c.hold = true // runs never finish: the lease stays held
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{placed("pinned", holder)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	id := shard.TaskIDOf(g, 0)
	for range 500 {
		if v := c.task(id); v.State == shard.Running && v.Holder == holder+"#1" {
			break
		}
		c.step(10 * time.Millisecond)
	}
	if v := c.task(id); v.State != shard.Running || v.Holder != holder+"#1" {
		t.Fatalf("task %s: %v held by %q; want RUNNING on %s#1", id, v.State, v.Holder, holder)
	}
	lead.down = true
	c.start(c.node(holder), 4) // its second run: the first one's run of the task is gone
	c.run(10 * time.Second)
	v := c.task(id)
	if v.Round < 2 || v.Holder != holder+"#2" {
		t.Errorf("task %s after %s went down and %s restarted: %v round %d held by %q; want it leased again to %s#2",
			id, lead.id, holder, v.State, v.Round, v.Holder, holder)
	}
}
