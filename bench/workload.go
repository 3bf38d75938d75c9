package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// runner runs workload repetitions against a started cluster.
type runner struct {
	cfg       Config
	durations []int // W3 task durations, ms
}

// workloadFunc runs one repetition. A failed check goes in the result's
// Problems; the error is for anything that stopped the measurement.
type workloadFunc func(ctx context.Context, cl *Cluster, rep int) (RepResult, error)

// workload returns the function of a workload name.
func (r *runner) workload(name string) workloadFunc {
	return map[string]workloadFunc{W1: r.w1, W2: r.w2, W3: r.w3, W4: r.w4, WS: r.ws, WP: r.wp, WL: r.wl, WG: r.wg,
		W1Go: r.w1External(W1Go), W1Py: r.w1External(W1Py), W2Go: r.w2External(W2Go), W4Go: r.w4Go, WI: r.wi}[name]
}

// skip says why a workload cannot run with this config, or "".
func (r *runner) skip(name string) string {
	if name == W4 && r.cfg.Peers < 3 {
		return fmt.Sprintf("w4 kills one of 3 peers and needs --peers >= 3 (have %d)", r.cfg.Peers)
	}
	if name == W4Go && r.cfg.Peers < 2 {
		return fmt.Sprintf("w4go kills the worker of peer 1 and needs --peers >= 2 (have %d)", r.cfg.Peers)
	}
	if name == WL && r.cfg.Peers < 2 {
		return fmt.Sprintf("wl asks a peer that owns none of the failures and needs --peers >= 2 (have %d)", r.cfg.Peers)
	}
	return ""
}

// allPeers returns 0..n-1.
func allPeers(n int) []int {
	ps := make([]int, n)
	for i := range ps {
		ps[i] = i
	}
	return ps
}

// payload returns a small JSON document unique to (workload, rep, i).
func payload(w string, rep, i int, extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"w":%q,"rep":%d,"i":%d%s}`, w, rep, i, extra))
}

// batches cuts n tasks into groups of size, round-robin over peers; task(i)
// gives the handler and payload of task i.
func batches(n, size, peers int, task func(i int) (string, json.RawMessage)) []batch {
	var bs []batch
	for start := 0; start < n; start += size {
		b := batch{peer: len(bs) % peers, spec: GroupSpec{Mode: "parallel"}}
		for i := start; i < min(start+size, n); i++ {
			h, p := task(i)
			b.spec.Tasks = append(b.spec.Tasks, TaskSpec{Name: "t" + strconv.Itoa(i), Handler: h, Payload: p})
			b.payloads = append(b.payloads, p)
		}
		bs = append(bs, b)
	}
	return bs
}

// checkGroups checks every waited group against its submission and
// returns how many tasks succeeded with the right result.
func checkGroups(ck *checks, subs []submitted, ws []waited) int {
	ok := 0
	for i, w := range ws {
		if !terminal(w.g.State) {
			ck.addf("group %s: not terminal (state %q): %v", subs[i].id, w.g.State, w.err)
		}
		ok += ck.group(w.g, subs[i].want)
	}
	return ok
}

// w1 measures throughput: W1Tasks echo tasks in parallel groups of
// W1Batch, submitted round-robin by a few submitters.
func (r *runner) w1(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	if r.cfg.W1For > 0 {
		return r.sustained(ctx, cl, rep, W1, "echo")
	}
	return r.throughput(ctx, cl, rep, W1, "echo")
}

// sustained runs W1 for W1For at full load: W1Tasks tasks in flight, in
// groups of W1Batch, each submitted to the next peer; a new group goes
// as each one finishes and is checked. Throughput counts the tasks that
// finished right within W1For and the wait for the last ones.
func (r *runner) sustained(ctx context.Context, cl *Cluster, rep int, name, handler string) (RepResult, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.cfg.W1For+r.cfg.WaitTimeout, errors.New("bench: W1's last groups did not finish"))
	defer cancel()
	var (
		mu    sync.Mutex
		ck    checks
		ok    int
		fatal error
		wg    sync.WaitGroup
	)
	inflight := make(chan struct{}, max(1, r.cfg.W1Tasks/r.cfg.W1Batch))
	start := time.Now()
	end := start.Add(r.cfg.W1For)
	for i := 0; time.Now().Before(end); i++ {
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		base := i * r.cfg.W1Batch
		b := batches(r.cfg.W1Batch, r.cfg.W1Batch, 1, func(j int) (string, json.RawMessage) {
			return handler, payload(name, rep, base+j, "")
		})[0]
		b.peer = i % cl.Len()
		wg.Go(func() {
			defer func() { <-inflight }()
			s, err := submitBatch(ctx, cl, b)
			if err != nil {
				mu.Lock()
				fatal = cmp.Or(fatal, err)
				mu.Unlock()
				cancel()
				return
			}
			w := waitGroup(ctx, cl, s.id, allPeers(cl.Len()), i)
			mu.Lock()
			ok += checkGroups(&ck, []submitted{s}, []waited{w})
			mu.Unlock()
		})
	}
	wg.Wait()
	if fatal != nil {
		return RepResult{}, fatal
	}
	elapsed := time.Since(start).Seconds()
	return RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"throughput", "tasks/s", float64(ok) / elapsed},
		{"tasks", "tasks", float64(ok)},
		{"elapsed", "s", elapsed},
	}}, nil
}

// throughput runs W1 for handler: W1Tasks tasks returning their payload.
func (r *runner) throughput(ctx context.Context, cl *Cluster, rep int, name, handler string) (RepResult, error) {
	bs := batches(r.cfg.W1Tasks, r.cfg.W1Batch, cl.Len(), func(i int) (string, json.RawMessage) {
		return handler, payload(name, rep, i, "")
	})
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	subs, err := submitAll(ctx, cl, bs)
	if err != nil {
		return RepResult{}, err
	}
	ws := waitGroups(ctx, cl, subs, allPeers(cl.Len()))
	var ck checks
	checkGroups(&ck, subs, ws)
	elapsed := math.NaN() // no task finished: the checks say why
	if last := lastDone(ws); !last.IsZero() {
		elapsed = last.Sub(start).Seconds()
	}
	return RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"throughput", "tasks/s", float64(r.cfg.W1Tasks) / elapsed},
		{"elapsed", "s", elapsed},
	}}, nil
}

// w2 measures latency: W2Tasks single echo tasks one after another, each
// submitted to the next peer and waited for in the same call (POST
// /v1/tasks?wait=, as a client that wants the result does).
func (r *runner) w2(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	return r.latency(ctx, cl, rep, W2, "echo")
}

// latency runs W2 for handler: W2Tasks tasks returning their payload.
func (r *runner) latency(ctx context.Context, cl *Cluster, rep int, name, handler string) (RepResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	var ck checks
	lat := make([]float64, 0, r.cfg.W2Tasks)
	for i := range r.cfg.W2Tasks {
		c := cl.Client(i % cl.Len())
		p := payload(name, rep, i, "")
		start := time.Now()
		t, err := c.SubmitTaskWait(ctx, TaskSpec{Handler: handler, Payload: p}, longPoll)
		if err != nil {
			return RepResult{}, fmt.Errorf("bench: %s submit to peer %d: %w", name, i%cl.Len(), err)
		}
		if !terminal(t.State) { // the wait passed, or the peer's read of the task failed
			t, err = waitTask(ctx, c, t.ID)
		}
		if err != nil {
			return RepResult{}, fmt.Errorf("bench: %s wait on peer %d: %w", name, i%cl.Len(), err)
		}
		lat = append(lat, millis(time.Since(start)))
		ck.task(t, p)
	}
	return RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"p50", "ms", Percentile(lat, 50)},
		{"p99", "ms", Percentile(lat, 99)},
		{"max", "ms", Percentile(lat, 100)},
	}}, nil
}

// waitTask long-polls a task until it is terminal or ctx ends.
func waitTask(ctx context.Context, c *Client, id string) (Task, error) {
	for {
		t, err := c.Task(ctx, id, longPoll)
		if err != nil || terminal(t.State) {
			return t, err
		}
		if ctx.Err() != nil {
			return t, fmt.Errorf("task %s not terminal (state %s): %w", id, t.State, ctx.Err())
		}
	}
}

// w3 measures skew: one parallel group of sleep tasks, so one peer owns
// them all and the others only get work by stealing.
func (r *runner) w3(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	bs := batches(len(r.durations), len(r.durations), 1, func(i int) (string, json.RawMessage) {
		return "sleep", json.RawMessage(fmt.Sprintf(`{"ms":%d,"i":%d}`, r.durations[i], i))
	})
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	subs, err := submitAll(ctx, cl, bs)
	if err != nil {
		return RepResult{}, err
	}
	ws := waitGroups(ctx, cl, subs, []int{0})
	var ck checks
	checkGroups(&ck, subs, ws)
	makespan := ws[0].seenAt.Sub(start).Seconds()
	if ws[0].seenAt.IsZero() {
		makespan = math.NaN()
	}
	lb := lowerBound(r.durations, cl.Len()*r.cfg.Slots).Seconds()
	return RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"makespan", "s", makespan},
		{"LB", "s", lb},
		{"makespan/LB", "x", makespan / lb},
	}}, nil
}

// lowerBound is the makespan lower bound of durations (ms) on slots:
// max(sum/slots, longest).
func lowerBound(durations []int, slots int) time.Duration {
	sum, longest := 0, 0
	for _, d := range durations {
		sum += d
		longest = max(longest, d)
	}
	lb := max(float64(sum)/float64(slots), float64(longest))
	return time.Duration(lb * float64(time.Millisecond))
}
