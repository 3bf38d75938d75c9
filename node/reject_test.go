package node

import (
	"math"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// TestCommittedEntryThatCannotApply commits what no replica can apply (a
// stream stage concurrency the codec cannot decode, garbage, a spec that
// decodes but could not be restored): the node skips them, counts them,
// keeps serving, and a restart that replays them comes back.
func TestCommittedEntryThatCannotApply(t *testing.T) {
	h := newHarness(t, 1)
	p := h.n.parts[0]
	if p == nil || !p.serving {
		t.Fatal("partition 0 not served")
	}
	big := &shard.GroupSpec{ID: "s", Mode: shard.ModeStream, Stages: []shard.StageSpec{{Name: "a", Concurrency: math.MaxInt32 + 1}},
		Tasks: []shard.TaskSpec{{Handler: "echo"}}}
	cyc := &shard.GroupSpec{ID: "c", Mode: shard.ModeDAG, Tasks: []shard.TaskSpec{
		{Name: "a", Handler: "echo", Deps: []string{"b"}}, {Name: "b", Handler: "echo", Deps: []string{"a"}}}}
	for _, data := range [][]byte{
		shard.AppendBatch(nil, &shard.Batch{Events: []shard.Event{{Type: shard.EvSubmitted, At: h.now, Group: "s", Spec: big}}}),
		shard.AppendBatch(nil, &shard.Batch{Events: []shard.Event{{Type: shard.EvSubmitted, At: h.now, Group: "c", Spec: cyc}}}),
		{0xff, 0x01, 0x02},
	} {
		if err := p.rn.Propose(data); err != nil {
			t.Fatal(err)
		}
	}
	h.n.markDirty(p.id)
	h.stabilize()
	if got := h.n.stats.RejectedEntries; got != 3 {
		t.Fatalf("RejectedEntries = %d; want 3", got)
	}
	for _, g := range []shard.GroupID{"s", "c"} {
		if _, err := h.n.Group(g); err == nil {
			t.Errorf("group %s exists after its entry was rejected", g)
		}
	}
	h.start(1) // replays the rejected entries
	if r := h.submit(shard.GroupSpec{ID: "ok", Mode: shard.ModeParallel, Tasks: echoTasks(3)}); r.Err != nil {
		t.Fatalf("submit after restart: %v", r.Err)
	}
	for range 10 {
		h.step()
	}
	if st := h.groupState("ok"); st != shard.GroupSucceeded {
		t.Fatalf("group after restart = %v; want SUCCEEDED", st)
	}
}
