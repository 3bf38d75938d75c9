package peer

import (
	"log/slog"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// TestStartOverflowsWithoutBlocking hands the job queue more runs than it
// holds, as a restarted peer's Node once did under load: start must
// return (the loop that calls it is the one that reads the workers'
// outcomes), and the runs that did not fit go to the workers in order as
// the queue drains (feedJobs).
func TestStartOverflowsWithoutBlocking(t *testing.T) {
	p, err := New(Config{InMemory: true, HTTPAddr: "127.0.0.1:0", Partitions: 16, Slots: 1,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p.runCtx = t.Context() // as Run sets it
	n := cap(p.jobs) + 5
	run := func(i int) node.Run {
		return node.Run{Task: shard.TaskIDOf("gover", i), Round: 1, Handler: "echo"}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			p.start(run(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("start blocked with %d runs queued and %d waiting", len(p.jobs), len(p.overflow))
	}
	if len(p.overflow) != 5 {
		t.Fatalf("overflow holds %d runs, want 5", len(p.overflow))
	}
	var got []shard.TaskID
	for len(p.jobs) > 0 || len(p.overflow) > 0 {
		for range 3 {
			select {
			case j := <-p.jobs:
				got = append(got, j.run.Task)
			default:
			}
		}
		p.feedJobs()
		if len(p.overflow) > 0 && len(p.jobs) != cap(p.jobs) {
			t.Fatalf("feedJobs left %d runs waiting beside a queue with room (%d of %d)", len(p.overflow), len(p.jobs), cap(p.jobs))
		}
	}
	if len(got) != n {
		t.Fatalf("workers got %d runs, want %d", len(got), n)
	}
	for i, id := range got {
		if id != run(i).Task {
			t.Fatalf("run %d is %s, want %s: the overflow changed the order", i, id, run(i).Task)
		}
	}
}
