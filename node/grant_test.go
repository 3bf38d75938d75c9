package node

import (
	"math"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A peer that holds the swarm key can send any grant, for any task, with
// any round. One for a task this node leads, or one that reached it before
// it led the task's partition, must not keep the task's committed lease
// from running: no lease expires while its holder lives, so the task
// stayed RUNNING on its live owner for good (found by needle hostile).
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
			if tc.led && forgedRuns != 0 {
				t.Fatalf("a forged grant for a partition this node leads ran: %v", h.runs)
			}
			h.step() // the forged runs (when it followed) finish; their outcomes are stale
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
