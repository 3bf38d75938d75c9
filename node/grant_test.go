package node

import (
	"math"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A peer that holds the swarm key can send any grant, for any task, with
// any round. Only the owner's grants start a run (a forged one could start
// a task whose dependencies have not finished), and none keeps the task's
// committed lease from running: no lease expires while its holder lives,
// so the task stayed RUNNING on its live owner for good (found by needle
// hostile). A grant for a thief's former run: restarted_thief_grant.txt.
func TestForgedGrantKeepsNoLeaseFromRunning(t *testing.T) {
	for _, tc := range []struct {
		name string
		led  bool // the forged grant reaches the node while it leads g's partition
	}{{"to its leader", true}, {"before it led", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.tick(time.Second)
			hb := Message{Type: MsgHeartbeat, From: "stranger", Heartbeat: &Heartbeat{Boot: "1", Partitions: 1,
				Load: Load{Slots: 2}, Members: []string{"p1", "stranger"}}}
			if err := h.n.Step("stranger", hb); err != nil {
				t.Fatal(err)
			}
			p := h.n.parts[h.n.PartitionOf("g")]
			p.serving = tc.led
			for _, round := range []shard.Round{1, math.MaxUint64} {
				forged := Message{Type: MsgGrant, From: "stranger", Holder: h.n.Holder(),
					Grants: []Grant{{Task: "g.0", Round: round, Handler: "echo", Payload: []byte("forged"), Timeout: time.Second}}}
				if err := h.n.Step("stranger", forged); err != nil {
					t.Fatal(err)
				}
			}
			h.stabilize()
			forgedRuns := len(h.runs)
			if forgedRuns != 0 {
				t.Fatalf("a grant from a peer that does not own the partition ran: %v", h.runs)
			}
			p.serving = true
			if r := h.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(1)}); r.Err != nil {
				t.Fatal(r.Err)
			}
			for i := 0; i < 10 && h.groupState("g") == shard.GroupRunning; i++ {
				h.step()
			}
			if st := h.groupState("g"); st != shard.GroupSucceeded {
				v, _ := h.n.Task("g.0")
				t.Fatalf("group %v after a forged grant (%d forged runs); task %+v", st, forgedRuns, v)
			}
			if v, _ := h.n.Task("g.0"); string(v.Result) != "0" {
				t.Fatalf("result %q, want the task's own payload", v.Result)
			}
		})
	}
}

// A grant can pass grantable and still not be the lease's: from a peer
// this node took for the owner (a keyed host the ring made one), with a
// round from the future. The committed lease runs all the same.
func TestClaimedGrantYieldsToCommittedLease(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	if !h.n.claimGrant("g.0", math.MaxUint64, "stranger") {
		t.Fatal("a first claim was refused")
	}
	if r := h.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(1)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := 0; i < 10 && h.groupState("g") == shard.GroupRunning; i++ {
		h.step()
	}
	if st := h.groupState("g"); st != shard.GroupSucceeded {
		v, _ := h.n.Task("g.0")
		t.Fatalf("group %v after a stranger's claim; task %+v", st, v)
	}
	if h.n.claimLease("g.0", 1, h.n.Holder()) {
		t.Fatal("a committed lease started twice")
	}
}
