package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// W4 parameters.
const (
	w4SleepMS   = 50 // each task sleeps this long
	w4GroupSize = 10 // tasks per group
	w4Victim    = 1  // index of the peer W4 kills
)

// w4 measures failover: W4Tasks sleep tasks in groups on every peer; once
// a third of them succeeded, peer 1 is killed with SIGKILL; then every group
// is waited for through the survivors. With W4Kill k > 1, peers 1..k are
// killed one at a time, at 1/(k+2), 2/(k+2)... of the tasks: each is
// forgotten by the survivors (needle forget) once they hold it dead, and
// the mesh settles (its replicas moved) before the next kill, as an
// operator replaces failed hosts.
func (r *runner) w4(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	kills := r.cfg.W4Kill
	var survivors []int
	for i := range cl.Len() {
		if i < w4Victim || i >= w4Victim+kills {
			survivors = append(survivors, i)
		}
	}
	kill := func(ctx context.Context, k int) error {
		if err := cl.Kill9(w4Victim + k); err != nil {
			return err
		}
		if k == kills-1 {
			return nil // the last one: the run waits for the groups
		}
		return cl.forgetSettled(ctx, w4Victim+k)
	}
	victimPeer := func(k int) string { return cl.PeerID(w4Victim + k) }
	return r.killMidRun(ctx, cl, rep, W4, "sleep", "peer", kills, victimPeer, kill, survivors)
}

// killed is one kill of a W4 run: the tasks seen RUNNING on the victim
// just before (by id, with their round) and when it was killed.
type killed struct {
	held map[string]int
	at   time.Time
}

// killMidRun submits W4's sleep tasks of handler, kills what (the victim
// peers, or a worker) with kill, the k-th (from 0) once k+1 (k+2)ths of
// the tasks succeeded, and waits for every group through the peers
// readFrom: lost, duplicates, time to finish and the rerun delay of the
// tasks the victims held. victimPeer names the peer whose RUNNING tasks
// the k-th kill takes down.
func (r *runner) killMidRun(ctx context.Context, cl *Cluster, rep int, name, handler, what string, kills int,
	victimPeer func(k int) string, kill func(ctx context.Context, k int) error, readFrom []int) (RepResult, error) {
	extra := fmt.Sprintf(`,"ms":%d`, w4SleepMS)
	bs := batches(r.cfg.W4Tasks, w4GroupSize, cl.Len(), func(i int) (string, json.RawMessage) {
		return handler, payload(name, rep, i, extra)
	})
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	subs, err := submitAll(ctx, cl, bs)
	if err != nil {
		return RepResult{}, err
	}
	var ks []killed
	for k := range kills {
		snap, err := waitProgress(ctx, cl, subs, r.cfg.W4Tasks*(k+1)/(kills+2))
		if err != nil {
			return RepResult{}, err
		}
		kd := killed{held: heldBy(snap, victimPeer(k)), at: time.Now()}
		ks = append(ks, kd)
		if err := kill(ctx, k); err != nil {
			return RepResult{}, err
		}
		r.cfg.Logger.Info("killed "+what, "kill", k+1, "of", kills, "peer", victimPeer(k), "held", len(kd.held))
	}
	ws := waitGroups(ctx, cl, subs, readFrom)
	var ck checks
	checkGroups(&ck, subs, ws)
	m := failoverMetrics(ws, ks, r.cfg.W4Tasks, start)
	return RepResult{Rep: rep, Metrics: m, Problems: ck.list, ProblemCount: ck.count}, nil
}

// waitProgress polls the groups through peer 0 until at least n tasks
// succeeded, and returns that last view of every task. A group whose
// partition is between leaders (after a kill, or as replicas move after
// a forget) answers 503 for a few seconds: it is asked again.
func waitProgress(ctx context.Context, cl *Cluster, subs []submitted, n int) ([]Task, error) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		var tasks []Task
		done := 0
		for _, s := range subs {
			var g Group
			err := retry503(ctx, func() (err error) {
				g, err = cl.Client(0).Group(ctx, s.id, 0)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("bench: w4 progress of group %s: %w", s.id, err)
			}
			done += g.Counts["SUCCEEDED"]
			tasks = append(tasks, g.Tasks...)
		}
		if done >= n {
			return tasks, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bench: w4: %d of %d tasks succeeded before the kill: %w", done, n, ctx.Err())
		case <-tick.C:
		}
	}
}

// heldBy returns the tasks RUNNING on the peer id, by task id with their
// round. A task's "peer" may carry a suffix (a boot nonce) after the id.
func heldBy(tasks []Task, id string) map[string]int {
	held := map[string]int{}
	for _, t := range tasks {
		if t.State == "RUNNING" && id != "" && strings.HasPrefix(t.Peer, id) {
			held[t.ID] = t.Round
		}
	}
	return held
}

// failoverMetrics computes W4's numbers from the final view of the groups:
// lost (acknowledged, not SUCCEEDED), duplicates (round > 1 or attempt > 1),
// time to finish (from the start, and from the last kill), and, for the
// tasks seen RUNNING on a killed peer just before its kill that ran again
// in a later round, how many there were and the delay from that kill to
// their new start.
func failoverMetrics(ws []waited, ks []killed, total int, start time.Time) []Metric {
	succeeded, dups := 0, 0
	var rerun []float64
	for _, w := range ws {
		for _, t := range w.g.Tasks {
			if t.State == "SUCCEEDED" {
				succeeded++
			}
			if t.Round > 1 || t.Attempt > 1 {
				dups++
			}
			for _, k := range ks {
				if r, ok := k.held[t.ID]; ok && t.Round > r && !t.StartedAt.IsZero() {
					rerun = append(rerun, millis(t.StartedAt.Sub(k.at)))
					break
				}
			}
		}
	}
	finish, recovery := math.NaN(), math.NaN()
	if last := lastDone(ws); !last.IsZero() && len(ks) > 0 {
		finish, recovery = last.Sub(start).Seconds(), last.Sub(ks[len(ks)-1].at).Seconds()
	}
	return []Metric{
		{"lost", "tasks", float64(total - succeeded)},
		{"duplicates", "tasks", float64(dups)},
		{"finish", "s", finish},
		{"after kill", "s", recovery},
		{"rerun after kill", "tasks", float64(len(rerun))},
		{"rerun delay p99", "ms", Percentile(rerun, 99)},
	}
}
