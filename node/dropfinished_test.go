package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// TestFinishedRunsOnly: a run is dropped as finished only when its task
// finished in the run's round, or the run is of this node's own lease not
// applied yet. A replica that holds the task finished in an earlier round
// (a thief that has not applied the retry its grant came from) runs it:
// dropping that run left the task RUNNING on the thief (make hostile).
func TestFinishedRunsOnly(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	c.oneServer(4)
	part, follower := c.ledBy("n1", 4)
	g := groupIn(t, c.node("n1").n, part)
	spec := shard.GroupSpec{ID: g, Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Name: "t", Handler: "echo"}}}
	if r := c.submit(spec); r.Err != nil {
		t.Fatal(r.Err)
	}
	task := shard.TaskID(string(g) + ".0")
	f := c.node(follower).n
	done := func() bool { round, ok := f.parts[part].shard.Finished(task); return ok && round == 1 }
	for i := 0; i < 500 && !done(); i++ {
		c.step(10 * time.Millisecond)
	}
	if !done() {
		t.Fatalf("%s never applied %s finished in round 1", follower, task)
	}
	if !f.finished(Run{Task: task, Round: 1}) {
		t.Errorf("a run of round 1, the round the task finished in: not finished")
	}
	if f.finished(Run{Task: task, Round: 2}) {
		t.Errorf("a granted run of round 2 (a retry this replica has not applied): finished; it must run")
	}
	f.spec[task] = &specRun{part: part, round: 2}
	if !f.finished(Run{Task: task, Round: 2}) {
		t.Errorf("this node's own lease of round 2, not applied, of a finished task: not finished")
	}
}
