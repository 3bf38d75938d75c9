package simulate

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// mixed draws groups of every mode, with fixed, bimodal and Zipf
// durations, priorities, failures (some permanent), retries with backoff,
// delays, hangs past the timeout, idempotency keys (some repeated) and
// cancels. Arrivals spread so that the peers are busy but not swamped.
func (g *gen) mixed() *workload {
	w := g.groups()
	// A few schedules, live from within the submissions until 8-20 s
	// after them.
	w.scheds = g.schedPlans(3+g.rng.IntN(3), w.span, w.span+time.Duration(8+g.rng.IntN(13))*time.Second)
	return w
}

// batch is mixed's groups with the run times of production batch jobs:
// log-normal around 3 s (most between 0.5 and 30 s, at most 60 s), 90 s
// timeouts (1% of the attempts hang past them), retry backoffs of seconds,
// delays and cancels tens of seconds apart; no schedules. 10,000 tasks
// keep 5 peers of 2 slots busy for about an hour and a half of virtual
// time: this is the workload that shows what the simulator's speed buys.
func (g *gen) batch() *workload {
	g.long = true
	return g.groups()
}

// groups draws mixed's groups (batch's when g.long) and spreads their
// arrivals so that the peers are about 90% busy (batch: 75%, counting
// retries and timeouts, as a production mesh runs with headroom).
func (g *gen) groups() *workload {
	w := &workload{}
	var work time.Duration
	for left := g.cfg.Tasks; left > 0; {
		a, d := g.mixedGroup(left)
		left -= len(a.spec.Tasks)
		work += d
		w.arrivals = append(w.arrivals, a)
	}
	busy := 9 * time.Duration(g.cfg.Peers*g.cfg.Slots) // tenths
	if g.long {
		busy = busy * 75 / 90
	}
	g.spread(w, work*10/busy)
	return w
}

// mixedGroup draws one group of at most left tasks, and its total work.
func (g *gen) mixedGroup(left int) (arrival, time.Duration) {
	modes := []shard.Mode{shard.ModeSingle, shard.ModeDAG, shard.ModeParallel, shard.ModePipeline, shard.ModeStream}
	mode := modes[g.rng.IntN(len(modes))]
	var stages []shard.StageSpec
	if mode == shard.ModeStream {
		// 1-3 stages of 0-3 items in flight each (0 = unbounded).
		for s := range 1 + g.rng.IntN(3) {
			stages = append(stages, shard.StageSpec{Name: "st" + strconv.Itoa(s), Concurrency: g.rng.IntN(4)})
		}
	}
	size := map[shard.Mode]int{shard.ModeSingle: 1, shard.ModeDAG: 2 + g.rng.IntN(7),
		shard.ModeParallel: 2 + g.rng.IntN(19), shard.ModePipeline: 2 + g.rng.IntN(11),
		shard.ModeStream: (1 + g.rng.IntN(10)) * len(stages)}[mode]
	if mode == shard.ModeStream && size > left {
		stages = stages[:1]
	}
	size = min(size, left)
	if size == 1 {
		mode, stages = shard.ModeSingle, nil
	}
	fail := []uint16{0, 0, 50, 200}[g.rng.IntN(4)]
	durs := g.rng.IntN(3)
	tasks := make([]shard.TaskSpec, size)
	var work time.Duration
	for i := range tasks {
		b := behaviour{dur: g.duration(durs), failPM: fail, permPM: 200}
		if g.rng.IntN(100) == 0 {
			b.dur = g.timeout() + time.Second // hangs past its timeout
		}
		tasks[i] = g.mixedTask(b, i)
		// What the slots will spend: a hung task times out on every
		// attempt; a failing one is retried (expected attempts, ignoring
		// permanent failures). Counting a hung task's run time once, as
		// mixed did, left out about a third of its work (a 1% of tasks
		// that hold a slot 2 s per attempt, up to 4 attempts, against
		// tasks of tens of milliseconds): "90% busy" was over 100%, and
		// past a few thousand tasks the queues grew for as long as the
		// arrivals lasted (10,000 tasks on 5 peers: waits of 30 s).
		if b.dur > g.timeout() {
			work += g.timeout() * time.Duration(tasks[i].Retry.MaxAttempts)
		} else {
			work += time.Duration(float64(b.dur) * (1 + float64(fail)/1000*float64(tasks[i].Retry.MaxAttempts-1)))
		}
	}
	shapeTasks(g, mode, tasks)
	if mode == shard.ModeStream {
		// Item-major: the item's payload (its behaviour) enters stage 0,
		// and each stage passes it on as its result.
		for i := range tasks {
			tasks[i].Item, tasks[i].Stage = i/len(stages), i%len(stages)
			if tasks[i].Stage > 0 {
				tasks[i].Payload = nil
			}
		}
	}
	key := ""
	if g.rng.IntN(10) < 3 {
		key = fmt.Sprintf("key-%d-%d", g.cfg.Seed, g.n)
	}
	a := arrival{spec: g.group(mode, key, tasks), cancelTask: -1}
	a.spec.Stages = stages
	if key != "" && g.rng.IntN(10) < 4 {
		a.repeat = time.Duration(1 + g.rng.Int64N(int64(time.Second)))
	}
	if g.rng.IntN(20) == 0 {
		a.cancel = time.Duration(1 + g.rng.Int64N(int64(g.scale(500*time.Millisecond))))
		if g.rng.IntN(2) == 0 {
			a.cancelTask = g.rng.IntN(size)
		}
	}
	// Retries of the group or one task: after its cancel, or once its
	// tasks may have failed, and then now and then canceled and retried
	// again. What a retry re-arms (FAILED and CANCELED tasks, and the
	// dependents canceled with them) runs again under the same ids.
	at := a.cancel
	switch {
	case a.cancel > 0 && g.rng.IntN(4) > 0:
	case g.rng.IntN(8) == 0:
		at = time.Duration(g.rng.Int64N(int64(g.scale(2 * time.Second))))
	default:
		return a, work
	}
	for {
		at += time.Duration(1 + g.rng.Int64N(int64(g.scale(time.Second))))
		a.later = append(a.later, laterOp{after: at, kind: opRetry, task: g.pick(size)})
		if g.rng.IntN(3) > 0 {
			break
		}
		at += time.Duration(1 + g.rng.Int64N(int64(g.scale(300*time.Millisecond))))
		a.later = append(a.later, laterOp{after: at, kind: opCancel, task: g.pick(size)})
	}
	return a, work
}

// pick returns a task index of a group of size tasks, or -1 (the group)
// half the time.
func (g *gen) pick(size int) int {
	if g.rng.IntN(2) == 0 {
		return -1
	}
	return g.rng.IntN(size)
}

func (g *gen) mixedTask(b behaviour, i int) shard.TaskSpec {
	t := shard.TaskSpec{Name: "t" + strconv.Itoa(i), Handler: "sleep", Payload: b.encode(i),
		Priority: int32(g.rng.IntN(5) - 2), Timeout: g.timeout(),
		Retry: shard.Retry{MaxAttempts: 1 + g.rng.IntN(4), Backoff: g.scale(time.Duration(20+g.rng.IntN(80)) * time.Millisecond),
			MaxBackoff: g.scale(400 * time.Millisecond)}}
	if g.rng.IntN(10) == 0 {
		t.Delay = time.Duration(g.rng.Int64N(int64(g.scale(300 * time.Millisecond))))
	}
	return t
}

// timeout is a task's per-attempt timeout: 2 s (mixed) or 90 s (batch).
func (g *gen) timeout() time.Duration {
	if g.long {
		return 90 * time.Second
	}
	return 2 * time.Second
}

// scale stretches mixed's backoffs, delays and cancel times for batch's
// longer tasks (x 50).
func (g *gen) scale(d time.Duration) time.Duration {
	if g.long {
		return 50 * d
	}
	return d
}

// duration draws one attempt's run time: fixed 10 ms, W3's bimodal 20/400
// ms, or Zipf over 1..301 ms.
func (g *gen) duration(kind int) time.Duration {
	if g.long {
		// Log-normal, median 3 s, sigma 1: mean 4.9 s, 1% over 31 s.
		d := time.Duration(3 * float64(time.Second) * math.Exp(g.rng.NormFloat64()))
		return min(max(d, 100*time.Millisecond), time.Minute)
	}
	switch kind {
	case 0:
		return 10 * time.Millisecond
	case 1:
		if g.rng.IntN(10) == 0 {
			return 400 * time.Millisecond
		}
		return 20 * time.Millisecond
	}
	return time.Duration(1+g.zipf.Uint64()) * time.Millisecond
}

// shapeTasks adds a random DAG's deps (each task depends on up to 3
// earlier ones) or pipeline stages (contiguous, none empty).
func shapeTasks(g *gen, mode shard.Mode, tasks []shard.TaskSpec) {
	switch mode {
	case shard.ModeDAG:
		for i := 1; i < len(tasks); i++ {
			for range g.rng.IntN(min(i, 3) + 1) {
				d := tasks[g.rng.IntN(i)].Name
				if !contains(tasks[i].Deps, d) {
					tasks[i].Deps = append(tasks[i].Deps, d)
				}
			}
		}
	case shard.ModePipeline:
		stages := 2 + g.rng.IntN(min(3, len(tasks)-1))
		for i := range tasks {
			tasks[i].Stage = i * stages / len(tasks)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
