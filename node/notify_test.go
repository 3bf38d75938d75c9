package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"

	"github.com/needle-mesh/needle/shard"
)

// takeNotify returns the deliveries handed out so far and forgets them.
func (h *harness) takeNotify() []NotifyJob {
	jobs := h.notify
	h.notify = nil
	return jobs
}

func notifiedHistory(tb testing.TB, n *Node, id shard.TaskID) []shard.TaskEvent {
	tb.Helper()
	hist, err := n.TaskEvents(id)
	if err != nil {
		tb.Fatal(err)
	}
	var out []shard.TaskEvent
	for _, e := range hist {
		if e.Type == shard.EvNotified {
			out = append(out, e)
		}
	}
	return out
}

// A finished group's webhook is handed out once, with the group as it
// finished; a failure is retried after the backoff, not before; a success
// ends it; every attempt is in the task's history.
func TestNodeNotifyRetryThenDeliver(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(time.Second) // elections: the single voter leads every partition
	g := shard.GroupID("g1")
	if r := h.submit(shard.GroupSpec{ID: g, Mode: shard.ModeSingle, Notify: "http://hook/x", Tasks: echoTasks(1)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if jobs := h.takeNotify(); len(jobs) != 0 {
		t.Fatalf("delivery before the group finished: %+v", jobs)
	}
	h.step()
	h.tick(100 * time.Millisecond)
	jobs := h.takeNotify()
	if len(jobs) != 1 || jobs[0].NotifyJob.Group != g || jobs[0].Attempt != 1 || jobs[0].URL != "http://hook/x" ||
		jobs[0].Group.State != shard.GroupSucceeded || len(jobs[0].Group.Tasks) != 1 {
		t.Fatalf("jobs = %+v", jobs)
	}
	h.tick(100 * time.Millisecond)
	if again := h.takeNotify(); len(again) != 0 {
		t.Fatalf("an in-flight delivery was handed out again: %+v", again)
	}
	if r := h.n.NotifyDone(jobs[0].NotifyJob, "status 500", false); r != NotifyFailed {
		t.Fatalf("NotifyDone(500) = %v; want failed", r)
	}
	h.stabilize()
	// The attempt's record waits for an entry to ride, notifyDefer at
	// most; the delivery stays in flight meanwhile.
	if v, _ := h.n.Group(g); v.Notify == nil || v.Notify.Attempts != 0 {
		t.Fatalf("notify = %+v before the record went; want no attempt yet", v.Notify)
	}
	h.tick(notifyDefer - 10*time.Millisecond)
	if again := h.takeNotify(); len(again) != 0 {
		t.Fatalf("handed out again while its record waited: %+v", again)
	}
	h.tick(10 * time.Millisecond)
	v, _ := h.n.Group(g)
	if v.Notify == nil || v.Notify.State != "pending" || v.Notify.Attempts != 1 || v.Notify.LastError != "status 500" {
		t.Fatalf("notify = %+v", v.Notify)
	}
	for range 20 {
		h.tick(100 * time.Millisecond)
		if len(h.notify) > 0 {
			break
		}
	}
	jobs = h.takeNotify()
	if len(jobs) != 1 || jobs[0].Attempt != 2 || h.now.Before(v.Notify.Next) {
		t.Fatalf("retry = %+v at %v (next %v)", jobs, h.now, v.Notify.Next)
	}
	if r := h.n.NotifyDone(jobs[0].NotifyJob, "", false); r != NotifyDelivered {
		t.Fatalf("NotifyDone(ok) = %v", r)
	}
	// A record rides the partition's next entry: a submission's here.
	other := shard.GroupID("o0")
	for i := 1; h.n.PartitionOf(other) != h.n.PartitionOf(g); i++ {
		other = shard.GroupID(fmt.Sprint("o", i))
	}
	if r := h.submit(shard.GroupSpec{ID: other, Mode: shard.ModeSingle, Tasks: echoTasks(1)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if v, _ := h.n.Group(g); v.Notify.State != "delivered" {
		t.Fatalf("notify = %+v after an entry of its partition; want delivered", v.Notify)
	}
	h.tick(10 * time.Second)
	if more := h.takeNotify(); len(more) != 0 {
		t.Fatalf("delivered, then handed out again: %+v", more)
	}
	v, _ = h.n.Group(g)
	if v.Notify.State != "delivered" || v.Notify.Attempts != 2 {
		t.Fatalf("notify = %+v", v.Notify)
	}
	hist := notifiedHistory(t, h.n, v.Tasks[0].ID)
	if len(hist) != 2 || hist[0].Error != "status 500" || hist[1].Error != "" || hist[1].Round != 2 {
		t.Fatalf("history = %+v", hist)
	}
}

// The node keeps at most NotifyInflight deliveries outstanding; a refused
// delivery gives up at once.
func TestNodeNotifyBoundAndRefused(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(time.Second)
	const groups = 20
	for i := range groups {
		spec := shard.GroupSpec{ID: shard.GroupID(fmt.Sprint("g", i)), Mode: shard.ModeSingle, Notify: "http://hook", Tasks: echoTasks(1)}
		if r := h.submit(spec); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for range 20 {
		h.step()
	}
	h.tick(100 * time.Millisecond)
	jobs := h.takeNotify()
	if len(jobs) != DefaultNotifyInflight {
		t.Fatalf("handed out %d; want the bound %d", len(jobs), DefaultNotifyInflight)
	}
	h.tick(100 * time.Millisecond)
	if more := h.takeNotify(); len(more) != 0 {
		t.Fatalf("handed out %d over the bound", len(more))
	}
	for _, j := range jobs {
		if r := h.n.NotifyDone(j.NotifyJob, "not on this peer's allow-list", true); r != NotifyGaveUp {
			t.Fatalf("refused = %v; want gave_up", r)
		}
	}
	h.stabilize()
	h.tick(notifyDefer) // the records go
	if rest := h.takeNotify(); len(rest) != groups-DefaultNotifyInflight {
		t.Fatalf("after the first ones were done, %d more; want %d", len(rest), groups-DefaultNotifyInflight)
	}
	v, _ := h.n.Group(jobs[0].NotifyJob.Group)
	if v.Notify.State != "failed" || v.Notify.Attempts != 1 {
		t.Fatalf("refused notify = %+v", v.Notify)
	}
}

// A group over NotifyMaxTasks tasks is delivered as its summary: the body
// says the tasks were left out; a smaller one lists them.
func TestNodeNotifyBigGroupSummary(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	for _, c := range []struct {
		id    shard.GroupID
		tasks int
	}{{"small", NotifyMaxTasks}, {"big", NotifyMaxTasks + 1}} {
		if r := h.submit(shard.GroupSpec{ID: c.id, Mode: shard.ModeParallel, Notify: "http://hook", Tasks: echoTasks(c.tasks)}); r.Err != nil {
			t.Fatal(r.Err)
		}
		for i := 0; h.groupState(c.id) == shard.GroupRunning; i++ {
			if i > 10_000 {
				t.Fatal("group does not finish")
			}
			h.step()
		}
		h.tick(100 * time.Millisecond)
		jobs := h.takeNotify()
		if len(jobs) != 1 || jobs[0].Group.Total != c.tasks || jobs[0].Group.Counts[shard.Succeeded] != c.tasks {
			t.Fatalf("%s: jobs = %d, total %d", c.id, len(jobs), jobs[0].Group.Total)
		}
		body, _ := json.Marshal(api.NewGroup(jobs[0].Group, jobs[0].Group.Tasks != nil))
		listed := len(jobs[0].Group.Tasks)
		omitted := strings.Contains(string(body), `"tasks_omitted":true`)
		if big := c.tasks > NotifyMaxTasks; listed != 0 == big || omitted != big {
			t.Errorf("%s (%d tasks): body lists %d tasks, tasks_omitted %v", c.id, c.tasks, listed, omitted)
		}
		h.n.NotifyDone(jobs[0].NotifyJob, "", false)
		h.stabilize()
	}
}

// A delivery handed out by an owner that dies before reporting is made
// again by the next owner (at least once), and the old owner's late result
// is dropped.
func TestMeshNotifyNewOwnerRedelivers(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	g := shard.GroupID("hooked")
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeSingle, Notify: "http://hook", Tasks: echoTasks(1)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	var owner string
	var first NotifyJob
	for i := 0; i < 300 && owner == ""; i++ {
		c.step(10 * time.Millisecond)
		for id, jobs := range c.notify {
			if len(jobs) > 0 {
				owner, first = id, jobs[0]
			}
		}
	}
	if owner == "" {
		t.Fatal("no owner handed the delivery out")
	}
	old := c.node(owner)
	old.down = true
	old.log.Crash()
	c.notify = map[string][]NotifyJob{}
	var next string
	for i := 0; i < 1000 && next == ""; i++ {
		c.step(10 * time.Millisecond)
		for id, jobs := range c.notify {
			if len(jobs) > 0 {
				next = id
			}
		}
	}
	if next == "" || next == owner {
		t.Fatalf("after %s died the delivery was handed out by %q", owner, next)
	}
	j := c.notify[next][0]
	if j.NotifyJob != first.NotifyJob {
		t.Fatalf("new owner's job = %+v; want the same attempt %+v", j.NotifyJob, first.NotifyJob)
	}
	if r := c.node(next).n.NotifyDone(j.NotifyJob, "", false); r != NotifyDelivered {
		t.Fatalf("NotifyDone on the new owner = %v", r)
	}
	c.start(old, 4)
	if r := old.n.NotifyDone(first.NotifyJob, "", false); r != NotifyDropped {
		t.Fatalf("the restarted old owner's late result = %v; want dropped", r)
	}
	c.run(2 * time.Second)
	v, err := c.node(next).n.Group(g)
	if err != nil || v.Notify.State != "delivered" || v.Notify.Attempts != 1 {
		t.Fatalf("notify = %+v, %v", v.Notify, err)
	}
}
