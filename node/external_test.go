package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A peer heartbeats early (within workerBeatEvery, not a heartbeat
// interval later) when its workers begin to wait or want more tasks, so
// that owners elsewhere offer them; not when they want fewer.
func TestDemandBeatsEarly(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(2 * h.n.cfg.HeartbeatEvery)
	beats := func(ds ...Demand) int {
		t.Helper()
		h.n.SetDemand(ds)
		h.now = h.now.Add(2 * workerBeatEvery)
		h.n.Tick(h.now)
		n := 0
		for h.n.HasReady() {
			rd := h.n.Ready()
			n += len(rd.Gossip)
			if err := h.log.Append(&rd.Persist); err != nil {
				t.Fatal(err)
			}
			h.n.Advance(rd)
		}
		return n
	}
	steps := []struct {
		name string
		want int
		beat bool
	}{
		{"begins to wait", 2, true},
		{"unchanged", 2, false},
		{"wants fewer", 1, false},
		{"wants more", 5, true},
		{"wants none", 0, true},
	}
	for _, s := range steps {
		if got := beats(Demand{Handler: "resize", Want: s.want}); (got > 0) != s.beat {
			t.Errorf("%s (want %d): %d heartbeats; want early: %v", s.name, s.want, got, s.beat)
		}
	}
	if got := beats(); got != 1 {
		t.Errorf("no worker left: %d heartbeats; want 1", got)
	}
}

// TestAnyExternal: a group leases to external workers at submission only
// if one of its tasks is of an external handler, wherever it is, and the
// handlers are asked once per run of equal ones.
func TestAnyExternal(t *testing.T) {
	spec := func(hs ...string) *shard.GroupSpec {
		g := &shard.GroupSpec{}
		for _, h := range hs {
			g.Tasks = append(g.Tasks, shard.TaskSpec{Handler: h})
		}
		return g
	}
	tests := []struct {
		spec *shard.GroupSpec
		want bool
		asks int
	}{
		{spec(), false, 0},
		{spec("echo", "echo", "echo"), false, 1},
		{spec("ext"), true, 1},
		{spec("echo", "echo", "ext"), true, 2},
		{spec("echo", "other", "echo", "ext", "ext"), true, 4},
		{spec("", "echo"), false, 2},
	}
	for _, tt := range tests {
		asks := 0
		got := anyExternal(tt.spec, func(h string) bool { asks++; return h == "ext" })
		if got != tt.want || asks != tt.asks {
			t.Errorf("anyExternal(%v) = %v after %d asks; want %v after %d", tt.spec.Tasks, got, asks, tt.want, tt.asks)
		}
	}
}

// A lease proposal for this peer's workers whose task is no longer READY
// here (its lease applied along a path that did not forget the proposal)
// counts for nothing and is forgotten: kept, each stood for one of the
// workers' wants for good, and a peer holding as many as its workers
// wanted leased them nothing more (simulate: seed 180012, --peers 4
// --tasks 600 --workers 2). A proposal whose task is still READY, or not
// created yet, still counts.
func TestOwnProposalForgottenOnceApplied(t *testing.T) {
	c := newCluster(t, 1, 4)
	c.run(3 * time.Second)
	spec := shard.GroupSpec{ID: "gdone", Mode: shard.ModeSingle, Tasks: echoTasks(1)}
	if r := c.submit(spec); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.run(time.Second)
	if st := c.groupState("gdone"); st != shard.GroupSucceeded {
		t.Fatalf("group gdone is %v; want it succeeded", st)
	}
	n := c.nodes[0].n
	n.ext.own = map[shard.TaskID]string{"gdone.0": "ext", "gnotyet.0": "ext"}
	if got := n.ownProposed()["ext"]; got != 1 {
		t.Errorf("own proposals counted: %d; want 1 (the finished task's is forgotten, the one not created yet counts)", got)
	}
	if _, ok := n.ext.own["gdone.0"]; ok {
		t.Error("the proposal of a finished task is still held")
	}
}
