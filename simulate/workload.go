package simulate

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// w3Durations is the W3 list of docs/design.md (bench/testdata/w3-durations-ms.txt):
// 300 sleeps, 90% 20 ms and 10% 400 ms, seed 42.
//
//go:embed w3-durations-ms.txt
var w3Durations string

// arrival is one group the client submits, and what it does after the
// acknowledgement.
type arrival struct {
	at         time.Duration // submission time (ignored by sequential workloads)
	spec       *shard.GroupSpec
	repeat     time.Duration // > 0: submit the same key again this long after the ack
	cancel     time.Duration // > 0: cancel this long after the ack
	cancelTask int           // the task index to cancel; -1 cancels the group
	// later are cancels and retries (opRetry: FAILED and CANCELED tasks
	// run again) at their times after the ack.
	later []laterOp
}

// workload is the client's plan for a run.
type workload struct {
	arrivals   []arrival
	sequential bool          // w2: each group waits until the previous one finished
	idle       bool          // idle: nothing is submitted; the mesh runs for span
	span       time.Duration // when the last arrival is due (estimated for w2)
	lb         time.Duration // makespan lower bound (see lowerBound); 0: none
	scheds     []*schedPlan  // schedules created, paused, resumed, deleted
}

// gen draws groups from the run's random source.
type gen struct {
	cfg  Config
	rng  *rand.Rand
	zipf *rand.Zipf
	n    int  // groups so far
	long bool // batch: mixed's groups with long tasks (see batch)
	// gated: mixed's parallel, dag and pipeline groups get a concurrency
	// (1-4) half the time. The draw is made only then, so the other
	// workloads' draws are as they were.
	gated bool
}

func newWorkload(cfg Config, rng *rand.Rand) *workload {
	g := &gen{cfg: cfg, rng: rng, zipf: rand.NewZipf(rng, 1.3, 1, 300)}
	w := g.draw()
	w.lb = lowerBound(w, cfg.Peers*(cfg.Slots+cfg.Workers*workerSlots)) // external workers add their slots
	return w
}

func (g *gen) draw() *workload {
	cfg := g.cfg
	if cfg.quietCrash {
		return g.batches(max(cfg.Tasks/2, 1), behaviour{dur: 30 * time.Second}, 0)
	}
	switch cfg.Workload {
	case "w1":
		return g.batches(100, behaviour{dur: time.Millisecond}, time.Millisecond)
	case "w2":
		w := g.batches(1, behaviour{dur: time.Millisecond}, 0)
		w.sequential = true
		w.span = time.Duration(cfg.Tasks) * 5 * time.Millisecond
		return w
	case "w3":
		return g.w3()
	case "sched":
		return g.sched()
	case "placement":
		return g.placement()
	case "batch":
		return g.batch()
	case "idle":
		return &workload{idle: true, span: idleFor}
	case "workers":
		return g.workers()
	case "gated":
		g.gated = true
		return g.mixed()
	case "w4":
		w := g.batches(10, behaviour{dur: 50 * time.Millisecond}, 0)
		g.spread(w, 50*time.Millisecond*time.Duration(cfg.Tasks))
		return w
	}
	return g.mixed()
}

// idleFor is how long the idle workload runs the mesh with nothing
// submitted: what the peers cost when there is no work (heartbeats, Raft
// heartbeats, failure detection, timers).
const idleFor = 5 * time.Minute

// batches submits groups of up to size tasks with the same behaviour
// (size 1: single-task groups), gap apart.
// Every group of one size has the same tasks, and they share one slice
// of specs: nothing modifies a workload's specs once drawn but external,
// which copies them first (a million tasks' specs were 196 MB).
func (g *gen) batches(size int, b behaviour, gap time.Duration) *workload {
	w := &workload{}
	var tasks []shard.TaskSpec
	for left := g.cfg.Tasks; left > 0; left -= size {
		k := min(size, left)
		mode := shard.ModeParallel
		if k == 1 {
			mode = shard.ModeSingle
		}
		if len(tasks) != k {
			tasks = make([]shard.TaskSpec, k)
			for i := range tasks {
				tasks[i] = g.task(b, i)
			}
		}
		w.arrivals = append(w.arrivals, arrival{at: time.Duration(len(w.arrivals)) * gap, spec: g.group(mode, "", tasks), cancelTask: -1})
	}
	w.span = time.Duration(len(w.arrivals)) * gap
	return w
}

// w3 is one parallel group of the W3 durations, so one peer owns them all.
func (g *gen) w3() *workload {
	var ds []time.Duration
	for line := range strings.Lines(w3Durations) {
		if ms, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			ds = append(ds, time.Duration(ms)*time.Millisecond)
		}
	}
	tasks := make([]shard.TaskSpec, g.cfg.Tasks)
	var sum, longest time.Duration
	for i := range tasks {
		d := ds[i%len(ds)]
		sum += d
		longest = max(longest, d)
		tasks[i] = g.task(behaviour{dur: d}, i)
	}
	return &workload{arrivals: []arrival{{spec: g.group(shard.ModeParallel, "", tasks), cancelTask: -1}}}
}

// lowerBound is the makespan no scheduler can beat on slots task slots,
// from the first submission to the last task's end, if every attempt
// succeeds at once: the larger of the total work spread over every slot
// and, over groups, the arrival plus the group's critical path (delays,
// dependencies, pipeline stages; an attempt runs at most its timeout). For
// w3 that is max(sum/slots, longest), docs/design.md's LB. A sequential
// workload (w2) sums the critical paths. Failures and retries are not in
// it: they only make the ratio larger.
func lowerBound(w *workload, slots int) time.Duration {
	if len(w.arrivals) == 0 || slots <= 0 {
		return 0
	}
	var work, seq, path time.Duration
	first := w.arrivals[0].at
	for _, a := range w.arrivals {
		first = min(first, a.at)
	}
	for _, a := range w.arrivals {
		cp, sum := criticalPath(a.spec)
		work += sum
		seq += cp
		path = max(path, a.at-first+cp)
	}
	if w.sequential {
		return seq
	}
	return max(work/time.Duration(slots), path)
}

// criticalPath returns a group's longest chain of attempts and its total
// work. Deps name earlier tasks and stages are contiguous (workload.go).
func criticalPath(spec *shard.GroupSpec) (cp, work time.Duration) {
	end := make(map[string]time.Duration, len(spec.Tasks))
	stageEnd := map[int]time.Duration{}
	for _, t := range spec.Tasks {
		d := decodeBehaviour(t.Payload).dur
		if t.Timeout > 0 {
			d = min(d, t.Timeout)
		}
		start := time.Duration(0)
		for _, dep := range t.Deps {
			start = max(start, end[dep])
		}
		if spec.Mode == shard.ModePipeline && t.Stage > 0 {
			start = max(start, stageEnd[t.Stage-1])
		}
		e := start + t.Delay + d
		end[t.Name] = e
		stageEnd[t.Stage] = max(stageEnd[t.Stage], e)
		cp, work = max(cp, e), work+d
	}
	return cp, work
}

// task returns a plain task with behaviour b.
func (g *gen) task(b behaviour, i int) shard.TaskSpec {
	return shard.TaskSpec{Name: "t" + strconv.Itoa(i), Handler: "sleep", Payload: b.encode(i),
		Timeout: 10 * time.Second, Retry: shard.Retry{MaxAttempts: 3, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
}

// group returns a spec with an id derived from the key when there is one
// (shard.KeyedGroupID, as the edge does), else drawn from the seed.
func (g *gen) group(mode shard.Mode, key string, tasks []shard.TaskSpec) *shard.GroupSpec {
	g.n++
	id := shard.GroupID(fmt.Sprintf("g%016x", g.rng.Uint64()))
	if key != "" {
		id = shard.KeyedGroupID(key)
	}
	if mode == shard.ModeSingle {
		tasks[0].Name = ""
	}
	spec := &shard.GroupSpec{ID: id, Mode: mode, Key: key, Tasks: tasks}
	if wantsNotify(id) {
		spec.Notify = simHook
	}
	if g.gated && (mode == shard.ModeParallel || mode == shard.ModeDAG || mode == shard.ModePipeline) && g.rng.IntN(2) == 0 {
		spec.Concurrency = 1 + g.rng.IntN(4)
	}
	return spec
}

// spread gives the arrivals sorted uniform times over span.
func (g *gen) spread(w *workload, span time.Duration) {
	span = max(span, time.Millisecond)
	ts := make([]time.Duration, len(w.arrivals))
	for i := range ts {
		ts[i] = time.Duration(g.rng.Int64N(int64(span)))
	}
	slices.Sort(ts)
	for i := range w.arrivals {
		w.arrivals[i].at = ts[i]
	}
	w.span = span
}

// delay moves every arrival and schedule plan d later.
func (w *workload) delay(d time.Duration) {
	for i := range w.arrivals {
		w.arrivals[i].at += d
	}
	for _, p := range w.scheds {
		p.at += d
		if p.deleteAt > 0 {
			p.deleteAt += d
		}
	}
}

// laterOp is a cancel or retry an arrival plans after its ack.
type laterOp struct {
	after time.Duration
	kind  opKind // opCancel or opRetry
	task  int    // the task index; -1 for the whole group
}
