package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A busy peer's ask for the tasks stranded at an owner (askStranded: its
// load counts READY work of its own) is granted those tasks only, never a
// share of the owner's surplus: the surplus would run there ahead of the
// asker's own older tasks, among them tasks pinned to it that nobody else
// may run. Before, an ask that found nothing stranded left took an
// unpinned task instead, and asks kept a peer's two slots on another
// owner's backlog while a task pinned to it stayed READY for 156 s, 80 of
// them at the head of its own queue (simulator, sched seed 890008 on 5
// peers). An idle thief's ask (no READY work of its own, maybeSteal)
// still gets a share.
func TestStrandedAskGetsNoSurplus(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	const g = shard.GroupID("backlog")
	var owner, thief *cnode
	for _, cn := range c.nodes {
		if cn.n.Serving(g) {
			owner = cn
		}
	}
	if owner == nil {
		t.Fatalf("nobody serves %s", g)
	}
	for _, cn := range c.nodes {
		if cn != owner && thief == nil {
			thief = cn
		}
		if cn != owner {
			// The test sends the steal requests itself.
			cn.n.steal.t = nil
		}
	}
	c.hold = true
	tasks := echoTasks(21)
	tasks[20].Pin = thief.id
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: tasks}); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.run(time.Second)
	pinned := shard.TaskIDOf(g, 20)
	ask := func(ready int) {
		t.Helper()
		m := Message{Type: MsgStealReq, From: thief.id, Want: 1, Load: Load{Ready: ready, Running: 1, Slots: 2}, Holder: thief.n.holder}
		if err := owner.n.Step(thief.id, m); err != nil {
			t.Fatal(err)
		}
		c.drain(owner)
		c.run(time.Second)
	}
	ran := func() (pin, other int) {
		for _, r := range c.runs[thief.id] {
			switch {
			case r.Task == pinned:
				pin++
			case r.Task.Group() == g:
				other++
			}
		}
		return pin, other
	}
	if owner.n.readyRunnable() < 10 {
		t.Fatalf("the owner holds %d READY tasks it may run; want a surplus to share", owner.n.readyRunnable())
	}
	// Twice, as a busy peer asks: the pinned task, then nothing.
	ask(5)
	ask(5)
	if pin, other := ran(); pin != 1 || other != 0 {
		t.Fatalf("a busy peer's two asks ran the pinned task %d times and %d tasks of the owner's surplus; want 1 and 0", pin, other)
	}
	// An idle thief gets a share of the surplus.
	ask(0)
	if _, other := ran(); other == 0 {
		t.Fatal("an idle thief's ask got none of the owner's surplus")
	}
}
