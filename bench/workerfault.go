package bench

import (
	"context"
	"encoding/json"
	"fmt"
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
	extra := fmt.Sprintf(`,"ms":%d`, w4SleepMS)
	bs := batches(r.cfg.W4Tasks, w4GroupSize, cl.Len(), func(i int) (string, json.RawMessage) {
		return WorkerSleepHandler, payload(W4Go, rep, i, extra)
	})
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	subs, err := submitAll(ctx, cl, bs)
	if err != nil {
		return RepResult{}, err
	}
	snap, err := waitProgress(ctx, cl, subs, r.cfg.W4Tasks/3)
	if err != nil {
		return RepResult{}, err
	}
	held := heldBy(snap, cl.PeerID(w4Victim))
	killedAt := time.Now()
	if err := ps[w4Victim].Kill(); err != nil {
		return RepResult{}, err
	}
	r.cfg.Logger.Info("killed worker", "peer", w4Victim, "held", len(held))
	ws := waitGroups(ctx, cl, subs, allPeers(cl.Len()))
	var ck checks
	checkGroups(&ck, subs, ws)
	m := failoverMetrics(ws, held, r.cfg.W4Tasks, start, killedAt)
	return RepResult{Rep: rep, Metrics: m, Problems: ck.list, ProblemCount: ck.count}, nil
}
