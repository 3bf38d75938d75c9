package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// WL measures the mesh-wide lists on a loaded mesh. The cluster first
// holds WLTasks finished tasks, WLFailed of them FAILED (permanent `fail`
// tasks in groups of up to W1Batch, kept out of the partitions the asked
// peer leads), the rest `echo` tasks in groups of W1Batch. Then, asked of
// the last peer (which owns none of the failures, so every page is
// gathered from the other peers):
//
//   - first page: GET /v1/tasks?state=FAILED&limit=100, WLQueries times;
//   - next page: the same with the first page's cursor;
//   - W1 alone and W1 while one client pages through the failures every
//     second (the two runs alternate their order by repetition), and the
//     slowdown between them.
//
// Each page is checked: 100 FAILED tasks, none twice across the two pages,
// no missing partition.
const WL = "wl"

// Defaults of the WL workload.
const (
	DefaultWLTasks  = 1_000_000
	DefaultWLFailed = 10_000
	wlQueries       = 21  // page reads of each kind
	wlPage          = 100 // tasks per page
	wlDelay         = "3s"
)

// stateFailed is the index of FAILED in the node's Counts (shard.State).
const stateFailed = 6

// listPage is the answer of GET /v1/tasks.
type listPage struct {
	Tasks   []Task `json:"tasks"`
	Cursor  string `json:"cursor"`
	Missing []int  `json:"missing_partitions"`
}

// statsPage is the part of GET /v1/stats WL reads.
type statsPage struct {
	Totals map[string]int `json:"totals"`
}

func (r *runner) wl(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	// Loading a million tasks takes minutes: allow 5 ms a task (200 tasks/s).
	ctx, cancel := context.WithTimeout(ctx, max(3*r.cfg.WaitTimeout, time.Duration(r.cfg.WLTasks)*5*time.Millisecond))
	defer cancel()
	ask := cl.Client(cl.Len() - 1)
	var ck checks
	start := time.Now()
	echoes := r.cfg.WLTasks - r.cfg.WLFailed
	if err := r.wlLoad(ctx, cl, rep, echoes); err != nil {
		return RepResult{}, err
	}
	canceled, err := r.wlFailures(ctx, cl, ask)
	if err != nil {
		return RepResult{}, err
	}
	r.cfg.Logger.Info("wl: failures submitted", "rep", rep, "failed", r.cfg.WLFailed, "canceled", canceled)
	if err := r.waitTotals(ctx, cl.Client(0), func(t map[string]int) bool {
		// Nothing left to run: a count alone can run ahead while a
		// partition changes hands and two peers both count it.
		return t["SUCCEEDED"] >= echoes && t["FAILED"] >= r.cfg.WLFailed &&
			t["PENDING"]+t["READY"]+t["RUNNING"]+t["WAITING"] == 0
	}); err != nil {
		return RepResult{}, fmt.Errorf("bench: wl load: %w", err)
	}
	loaded := time.Since(start).Seconds()
	if p, err := ask.Peers(ctx); err != nil || p.Node == nil || p.Node.Counts[stateFailed] != 0 {
		ck.addf("the asked peer owns FAILED tasks (%+v, %v): the pages are not all gathered from other peers", p.Node, err)
	}
	first, next, err := r.wlPages(ctx, ask, &ck)
	if err != nil {
		return RepResult{}, err
	}
	r.cfg.Logger.Info("wl: pages", "rep", rep, "first p50", Percentile(first, 50), "first p99", Percentile(first, 99),
		"next p50", Percentile(next, 50), "next p99", Percentile(next, 99))
	alone, paged, pager, err := r.wlInterference(ctx, cl, rep, ask)
	if err != nil {
		// The pages were measured: keep them, and say why W1 has no number.
		ck.addf("w1 on the loaded mesh: %v", err)
	}
	res := RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"first page p50", "ms", Percentile(first, 50)},
		{"first page p99", "ms", Percentile(first, 99)},
		{"next page p50", "ms", Percentile(next, 50)},
		{"next page p99", "ms", Percentile(next, 99)},
		{"w1 alone", "tasks/s", alone},
		{"w1 with pager", "tasks/s", paged},
		{"w1 slowdown", "%", 100 * (alone - paged) / alone},
		{"pager page p50", "ms", Percentile(pager, 50)},
		{"load", "s", loaded},
		{"canceled probes", "tasks", float64(canceled)},
	}}
	// Stopping a cluster that holds a million tasks takes minutes: say
	// what was measured now.
	r.cfg.Logger.Info("wl: measured", "rep", rep, "metrics", res.Metrics, "problems", res.Problems)
	return res, nil
}

// wlLoad submits n echo tasks in parallel groups of W1Batch, round-robin
// over the peers, by a few submitters; it does not wait for them.
func (r *runner) wlLoad(ctx context.Context, cl *Cluster, rep, n int) error {
	size := r.cfg.W1Batch
	groups := (n + size - 1) / size
	next := make(chan int)
	errs := make(chan error, submitters)
	var wg sync.WaitGroup
	for range submitters {
		wg.Go(func() {
			for g := range next {
				spec := GroupSpec{Mode: "parallel"}
				for i := g * size; i < min((g+1)*size, n); i++ {
					spec.Tasks = append(spec.Tasks, TaskSpec{Handler: "echo", Payload: json.RawMessage(strconv.Itoa(i))})
				}
				err := retry503(ctx, func() error {
					_, err := cl.Client(g%cl.Len()).SubmitGroup(ctx, spec)
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("bench: wl submit group %d: %w", g, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for g := range groups {
		select {
		case next <- g:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	r.cfg.Logger.Info("wl: echo tasks submitted", "rep", rep, "tasks", n, "err", err)
	return err
}

// wlFailures submits WLFailed permanent failures in groups the asked peer
// does not lead: each group is delayed (its tasks wait before they run),
// and a group that raised the asked peer's own task count is canceled and
// submitted again (under another id, so most likely elsewhere). It returns
// how many tasks were canceled that way.
func (r *runner) wlFailures(ctx context.Context, cl *Cluster, ask *Client) (int, error) {
	canceled := 0
	for placed, g := 0, 0; placed < r.cfg.WLFailed; g++ {
		if g > 20*(r.cfg.WLFailed/r.cfg.W1Batch+1) {
			return canceled, fmt.Errorf("bench: wl: could not place the failures outside the asked peer after %d groups", g)
		}
		size := min(r.cfg.W1Batch, r.cfg.WLFailed-placed)
		var tasks []map[string]any
		for i := range size {
			tasks = append(tasks, map[string]any{"handler": "fail", "delay": wlDelay,
				"payload": map[string]any{"message": fmt.Sprintf("wl failure %d.%d", g, i), "permanent": true}})
		}
		before, err := ownedTotal(ctx, ask)
		if err != nil {
			return canceled, err
		}
		var s Submitted
		err = retry503(ctx, func() error {
			return cl.Client(g%(cl.Len()-1)).do(ctx, http.MethodPost, "/v1/groups", 0,
				map[string]any{"mode": "parallel", "tasks": tasks}, &s)
		})
		if err != nil {
			return canceled, fmt.Errorf("bench: wl submit failures: %w", err)
		}
		after, err := ownedTotal(ctx, ask)
		if err != nil {
			return canceled, err
		}
		if after-before < size {
			placed += size
			continue
		}
		if err := ask.do(ctx, http.MethodPost, "/v1/groups/"+s.Group+"/cancel", 0, nil, nil); err != nil {
			return canceled, fmt.Errorf("bench: wl cancel a group of the asked peer: %w", err)
		}
		canceled += size
	}
	return canceled, nil
}

// ownedTotal is the number of tasks in the partitions the peer leads.
func ownedTotal(ctx context.Context, c *Client) (int, error) {
	p, err := c.Peers(ctx)
	if err != nil || p.Node == nil {
		return 0, fmt.Errorf("bench: wl peers: %v (node %v)", err, p.Node)
	}
	n := 0
	for _, v := range p.Node.Counts {
		n += v
	}
	return n, nil
}

// waitTotals polls GET /v1/stats (every 5 s: it counts every task of the
// mesh) until done holds.
func (r *runner) waitTotals(ctx context.Context, c *Client, done func(map[string]int) bool) error {
	for i := 0; ; i++ {
		var s statsPage
		err := c.do(ctx, http.MethodGet, "/v1/stats", 0, nil, &s)
		if err == nil && done(s.Totals) {
			return nil
		}
		if i%6 == 0 {
			r.cfg.Logger.Info("wl: waiting for the load to finish", "totals", s.Totals, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("totals %v (%v): %w", s.Totals, err, ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
}

// failedPage reads one page of FAILED tasks and times it.
func failedPage(ctx context.Context, c *Client, cursor string) (listPage, float64, error) {
	q := url.Values{"state": {"FAILED"}, "limit": {strconv.Itoa(wlPage)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var p listPage
	start := time.Now()
	err := c.do(ctx, http.MethodGet, "/v1/tasks?"+q.Encode(), 0, nil, &p)
	return p, millis(time.Since(start)), err
}

// wlPages times the first and the next page wlQueries times each.
func (r *runner) wlPages(ctx context.Context, c *Client, ck *checks) (first, next []float64, err error) {
	for q := range wlQueries {
		p1, ms1, err := failedPage(ctx, c, "")
		if err != nil {
			return nil, nil, fmt.Errorf("bench: wl first page: %w", err)
		}
		p2, ms2, err := failedPage(ctx, c, p1.Cursor)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: wl next page: %w", err)
		}
		first, next = append(first, ms1), append(next, ms2)
		if q == 0 {
			checkPages(ck, p1, p2)
		}
	}
	return first, next, nil
}

// checkPages checks two consecutive pages of FAILED tasks.
func checkPages(ck *checks, p1, p2 listPage) {
	seen := map[string]bool{}
	for i, p := range []listPage{p1, p2} {
		if len(p.Tasks) != wlPage || len(p.Missing) > 0 {
			ck.addf("page %d: %d tasks, missing partitions %v; want %d, none", i+1, len(p.Tasks), p.Missing, wlPage)
		}
		for _, t := range p.Tasks {
			if t.State != "FAILED" || seen[t.ID] {
				ck.addf("page %d: task %s %s (seen before: %v)", i+1, t.ID, t.State, seen[t.ID])
			}
			seen[t.ID] = true
		}
	}
	if p1.Cursor == "" {
		ck.addf("the first page has no cursor")
	}
}

// wlInterference runs W1 alone and with a client paging through the
// failures every second, in an order that alternates by repetition.
func (r *runner) wlInterference(ctx context.Context, cl *Cluster, rep int, ask *Client) (alone, paged float64, pager []float64, err error) {
	w1 := func() (float64, error) {
		res, err := r.w1(ctx, cl, rep)
		if err != nil {
			return math.NaN(), err
		}
		if len(res.Problems) > 0 {
			return math.NaN(), fmt.Errorf("bench: wl w1: %v", res.Problems)
		}
		return res.Metrics[0].Value, nil
	}
	withPager := func() (float64, error) {
		pctx, stop := context.WithCancel(ctx)
		done := make(chan []float64)
		go func() { done <- pageEverySecond(pctx, ask) }()
		v, err := w1()
		stop()
		pager = <-done
		return v, err
	}
	if rep%2 == 1 {
		if alone, err = w1(); err == nil {
			paged, err = withPager()
		}
	} else {
		if paged, err = withPager(); err == nil {
			alone, err = w1()
		}
	}
	return alone, paged, pager, err
}

// pageEverySecond reads the next page of FAILED tasks every second (from
// the first again after the last) until ctx ends, and returns the times.
func pageEverySecond(ctx context.Context, c *Client) []float64 {
	var lat []float64
	cursor := ""
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		p, ms, err := failedPage(ctx, c, cursor)
		if err == nil {
			lat = append(lat, ms)
			cursor = p.Cursor
		}
		select {
		case <-ctx.Done():
			slices.Sort(lat)
			return lat
		case <-tick.C:
		}
	}
}
