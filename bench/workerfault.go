package bench

import (
	"context"
	"encoding/json"
	"time"

	"github.com/needle-mesh/needle/client"
)

// W4Go is W4 with a worker killed instead of a peer: W4's sleep tasks,
// for WorkerSleepHandler, through one Go worker process per peer; once a
// third succeeded, the worker of peer 1 gets SIGKILL. Its peer sees it
// dead after --worker-ttl (default 10 s) and its tasks run again in the
// other workers.
const W4Go = "w4go"

// WorkerSleepHandler is the worker processes' sleep: it sleeps the
// payload's "ms" and returns the payload.
const WorkerSleepHandler = "bench.sleep"

// workerSleep is WorkerSleepHandler.
func workerSleep(ctx context.Context, t client.Task) (json.RawMessage, error) {
	var p struct{ MS int }
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return nil, client.Permanent(err)
	}
	select {
	case <-time.After(time.Duration(p.MS) * time.Millisecond):
		return t.Payload, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// w4Go runs W4Go: lost (must be 0), duplicates, time to finish, and the
// delay from the kill to the new start of the tasks the killed worker
// held (RUNNING on its peer, which no other worker polls, just before the
// kill): --worker-ttl plus the detection and the new lease.
func (r *runner) w4Go(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	ps, err := r.startWorkers(ctx, W4Go, cl)
	if err != nil {
		return RepResult{}, err
	}
	defer stopWorkers(ps)
	kill := func(context.Context, int) error { return ps[w4Victim].Kill() }
	victimPeer := func(int) string { return cl.PeerID(w4Victim) }
	return r.killMidRun(ctx, cl, rep, W4Go, WorkerSleepHandler, "worker", 1, victimPeer, kill, allPeers(cl.Len()))
}
