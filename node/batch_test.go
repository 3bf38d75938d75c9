package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// TestSubmissionsShareAnEntry: submissions to one partition in one loop
// iteration go into one entry with the iteration's other events, and each
// is answered as if alone: created, or a repeat of a key submitted just
// before it.
func TestSubmissionsShareAnEntry(t *testing.T) {
	h := newHarness(t, 1)
	h.n.cfg.LeaseDefer = 0 // no creation held for its runs (defer.go): all go now
	h.tick(10 * time.Millisecond)
	before := h.n.Counters().Entries
	reqs := map[uint64]shard.GroupID{}
	for _, id := range []shard.GroupID{"a", "b", "c"} {
		req := h.n.NextRequest()
		h.n.Submit(req, &shard.GroupSpec{ID: id, Mode: shard.ModeParallel, Tasks: echoTasks(2)})
		reqs[req] = id
	}
	keyed := shard.KeyedGroupID("k")
	var repeat []uint64
	for range 2 {
		req := h.n.NextRequest()
		h.n.Submit(req, &shard.GroupSpec{ID: keyed, Key: "k", Mode: shard.ModeSingle, Tasks: echoTasks(1)})
		repeat = append(repeat, req)
	}
	h.stabilize()
	if got := h.n.Counters().Entries - before; got != 1 {
		t.Errorf("%d entries for five submissions in one iteration; want 1", got)
	}
	for req, id := range reqs {
		r, ok := h.replies[req]
		if !ok || r.Err != nil || r.Submit.Group != id || !r.Submit.Created || len(r.Submit.Tasks) != 2 {
			t.Errorf("reply to %s: %+v (answered %v); want created with 2 tasks", id, r, ok)
		}
	}
	first, second := h.replies[repeat[0]], h.replies[repeat[1]]
	if first.Err != nil || !first.Submit.Created || second.Err != nil || second.Submit.Created || second.Submit.Group != keyed {
		t.Errorf("keyed submissions answered %+v and %+v; want created, then an idempotent repeat", first, second)
	}
	if len(h.n.reqs) != 0 || len(h.n.submits) != 0 {
		t.Errorf("requests left waiting: %d, by group %d", len(h.n.reqs), len(h.n.submits))
	}
}

// TestBacklogLeasesRideOutcomes: with more READY tasks than slots (but
// within the lease-ahead window), a slot that frees takes its next task
// at once, and that lease waits for its run's outcome to share an entry
// (or rides any other). Two groups in two partitions: the task that takes
// a freed slot is often of the other partition than the outcome that
// freed it, and its lease went alone (43 entries for 40 tasks).
func TestBacklogLeasesRideOutcomes(t *testing.T) {
	h := newHarness(t, 4)
	h.n.cfg.LeaseAhead = 32
	h.tick(time.Second)
	const tasks = 20
	groups := []shard.GroupID{"a"}
	for i := 0; len(groups) < 2; i++ {
		if g := shard.GroupID(fmt.Sprint("b", i)); h.n.PartitionOf(g) != h.n.PartitionOf(groups[0]) {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		if r := h.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(tasks)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	before := h.n.Counters().Entries
	for i := 0; h.groupState(groups[0]) == shard.GroupRunning || h.groupState(groups[1]) == shard.GroupRunning; i++ {
		if i > 20*tasks {
			t.Fatal("the groups do not finish")
		}
		if len(h.runs) == 0 {
			h.tick(10 * time.Millisecond)
			continue
		}
		// One run ends at a time.
		r := h.runs[0]
		h.runs = h.runs[1:]
		_ = h.n.Report(shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload})
		h.stabilize()
	}
	if got := h.n.Counters().Entries - before; got > 2*tasks {
		t.Errorf("%d entries for %d tasks; want one per task", got, 2*tasks)
	}
}
