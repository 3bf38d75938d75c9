package simulate

import (
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/needle-mesh/needle/peer"
	"github.com/needle-mesh/needle/shard"
)

// w3Durations is DESIGN.md's W3 list (../shared/workloads/w3-durations-ms.txt):
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
}

// workload is the client's plan for a run.
type workload struct {
	arrivals   []arrival
	sequential bool          // w2: each group waits until the previous one finished
	span       time.Duration // when the last arrival is due (estimated for w2)
	lb         time.Duration // w3: makespan lower bound max(sum/slots, longest)
	scheds     []*schedPlan  // schedules created, paused, resumed, deleted
}

// gen draws groups from the run's random source.
type gen struct {
	cfg  Config
	rng  *rand.Rand
	zipf *rand.Zipf
	n    int // groups so far
}

func newWorkload(cfg Config, rng *rand.Rand) *workload {
	g := &gen{cfg: cfg, rng: rng, zipf: rand.NewZipf(rng, 1.3, 1, 300)}
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
	case "w4":
		w := g.batches(10, behaviour{dur: 50 * time.Millisecond}, 0)
		g.spread(w, 50*time.Millisecond*time.Duration(cfg.Tasks))
		return w
	}
	return g.mixed()
}

// batches submits groups of up to size tasks with the same behaviour
// (size 1: single-task groups), gap apart.
func (g *gen) batches(size int, b behaviour, gap time.Duration) *workload {
	w := &workload{}
	for left := g.cfg.Tasks; left > 0; left -= size {
		k := min(size, left)
		mode := shard.ModeParallel
		if k == 1 {
			mode = shard.ModeSingle
		}
		tasks := make([]shard.TaskSpec, k)
		for i := range tasks {
			tasks[i] = g.task(b, i)
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
	lb := max(sum/time.Duration(g.cfg.Peers*g.cfg.Slots), longest)
	return &workload{arrivals: []arrival{{spec: g.group(shard.ModeParallel, "", tasks), cancelTask: -1}}, lb: lb}
}

// task returns a plain task with behaviour b.
func (g *gen) task(b behaviour, i int) shard.TaskSpec {
	return shard.TaskSpec{Name: "t" + strconv.Itoa(i), Handler: "sleep", Payload: b.encode(i),
		Timeout: 10 * time.Second, Retry: shard.Retry{MaxAttempts: 3, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
}

// group returns a spec with an id derived from the key when there is one
// (peer.GroupIDFor, as the edge does), else drawn from the seed.
func (g *gen) group(mode shard.Mode, key string, tasks []shard.TaskSpec) *shard.GroupSpec {
	g.n++
	id := shard.GroupID(fmt.Sprintf("g%016x", g.rng.Uint64()))
	if key != "" {
		id = peer.GroupIDFor(key)
	}
	if mode == shard.ModeSingle {
		tasks[0].Name = ""
	}
	spec := &shard.GroupSpec{ID: id, Mode: mode, Key: key, Tasks: tasks}
	if wantsNotify(id) {
		spec.Notify = simHook
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
