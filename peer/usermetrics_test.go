package peer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// scrape returns the peer's /metrics text.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUserMetrics: handler outcomes by handler and result, tasks
// submitted, and HTTP requests by route and code are exported, with the
// handler and route series present before anything happened.
func TestUserMetrics(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	before := scrape(t, c.BaseURL)
	for _, want := range []string{
		`needle_handler_outcomes_total{handler="fail",result="failed"} 0`,
		`needle_handler_outcomes_total{handler="echo",result="succeeded"} 0`,
		`needle_tasks_submitted_total 0`,
		`needle_http_request_seconds_count{route="POST /v1/tasks"} 0`,
	} {
		if !strings.Contains(before, want) {
			t.Errorf("before any task, /metrics lacks %s", want)
		}
	}
	g, _ := runGroup(t, c, `{"mode":"parallel","tasks":[{"name":"a","handler":"echo","payload":1},{"name":"b","handler":"fail","payload":{"permanent":true}}]}`)
	if g.State != "FAILED" {
		t.Fatalf("group %s; want FAILED", g.State)
	}
	after := scrape(t, c.BaseURL)
	for _, want := range []string{
		`needle_handler_outcomes_total{handler="fail",result="failed"} 1`,
		`needle_handler_outcomes_total{handler="echo",result="succeeded"} 1`,
		`needle_tasks_submitted_total 2`,
		`needle_http_requests_total{code="201",route="POST /v1/groups"} 1`,
		`needle_http_request_seconds_count{route="POST /v1/groups"} 1`,
	} {
		if !strings.Contains(after, want) {
			t.Errorf("after one group, /metrics lacks %s", want)
		}
	}
}

// TestReadyOldestMetric: needle_ready_oldest_seconds is the age of each
// handler's longest-waiting READY task, constrained tasks included; every
// registered handler has its series (0) before any task, and a handler's
// series stays, at 0, once nothing of it waits.
func TestReadyOldestMetric(t *testing.T) {
	h := nodetest.NewSingle(t, 4)
	reg := NewRegistry()
	if err := reg.Register("echo", func(_ context.Context, c Call) ([]byte, error) { return c.Payload, nil }); err != nil {
		t.Fatal(err)
	}
	m := newMetrics(&Peer{cfg: Config{Slots: 2}, handlers: reg})
	wall := time.Unix(1000, 0)
	m.clock = func() time.Time { return wall }
	observe := func() { // the READY ages are walked again agesEvery later
		wall = wall.Add(agesEvery)
		m.observe(h.Node)
	}
	ages := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range gather(t, m, "needle_ready_oldest_seconds").GetMetric() {
			out[labelsOf(s)["handler"]] = s.GetGauge().GetValue()
		}
		return out
	}
	if got := ages(); len(got) == 0 || got["echo"] != 0 {
		t.Fatalf("before any task: %v; want every registered handler at 0", got)
	}
	// Tasks no peer may run (a label nobody has) stay READY.
	gpu := func(id shard.GroupID, handler string) shard.GroupSpec {
		return shard.GroupSpec{ID: id, Mode: shard.ModeParallel,
			Tasks: []shard.TaskSpec{{Name: "a", Handler: handler, Require: []string{"gpu=true"}}}}
	}
	h.Submit(gpu("g1", "train"))
	h.Tick(30 * time.Second)
	h.Submit(gpu("g2", "train"))
	h.Submit(gpu("g3", "render"))
	h.Tick(10 * time.Second)
	observe()
	got := ages()
	if got["train"] != 40 || got["render"] != 10 || got["echo"] != 0 {
		t.Fatalf("ages = %v; want train 40 (the older of two), render 10, echo 0", got)
	}
	if r := h.Do(func(n *node.Node, req uint64) { n.Cancel(req, "g3", "", "test") }); r.Err != nil {
		t.Fatalf("cancel g3: %v", r.Err)
	}
	h.Tick(time.Second)
	m.observe(h.Node) // no time since the last walk
	if got := ages(); got["render"] != 10 || got["train"] != 40 {
		t.Fatalf("within agesEvery of the last walk: %v; want render 10, train 40 (not walked again)", got)
	}
	observe()
	if got := ages(); got["render"] != 0 || got["train"] != 41 {
		t.Fatalf("after canceling render's task: %v; want render 0, train 41", got)
	}

	// A walk of the READY tasks that takes long (the clock says 50 ms) is
	// not made again before ten times that: the gauge lags, the loop does
	// not spend itself on it.
	m.clock = func() time.Time { wall = wall.Add(50 * time.Millisecond); return wall }
	h.Tick(4 * time.Second)
	observe() // walks: 50 ms
	if got := ages(); got["train"] != 45 {
		t.Fatalf("ages = %v; want train 45", got)
	}
	h.Tick(5 * time.Second)
	for range 8 { // the clock moves 50 ms per read: 400 ms, within the 500
		m.observe(h.Node)
	}
	if got := ages(); got["train"] != 45 {
		t.Fatalf("ages = %v within ten walks' time; want train 45 still (not walked again)", got)
	}
	wall = wall.Add(time.Second)
	m.observe(h.Node)
	if got := ages(); got["train"] != 50 {
		t.Fatalf("ages = %v after ten walks' time; want train 50", got)
	}
}

// With tokens on, the API's routes are counted under their own route
// label, as without (audit s75, F3: the token check's copy of the request
// kept the route, and every route was counted as "/").
func TestUserMetricsWithTokens(t *testing.T) {
	const token = "metrics-token-0123456789"
	_, c := startPeerWith(t, Config{Tokens: api.NewTokens(token)})
	c.Token = token
	get := func(path string) string {
		t.Helper()
		_, b := wcall(t, c, "GET", path, "")
		return string(b)
	}
	get("/v1/tasks/g1.0")
	get("/v1/stats")
	get("/v1/peers")
	m := get("/metrics")
	for _, want := range []string{
		`needle_http_requests_total{code="404",route="GET /v1/tasks/{id}"} 1`,
		`needle_http_requests_total{code="200",route="GET /v1/stats"} 1`,
		`needle_http_requests_total{code="200",route="GET /v1/peers"} 1`,
		`needle_http_request_seconds_count{route="GET /v1/tasks/{id}"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, `route="/"`) {
		t.Errorf("/metrics counts requests under route \"/\":\n%s", grepLines(m, "needle_http_requests_total"))
	}
}

// grepLines returns the lines of text that start with prefix.
func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A task's handler is whatever its submitter wrote: the metrics labelled
// by handler keep the registered handlers and the first others seen, up
// to maxHandlerSeries, and count the rest as "other", so that submitters
// cannot grow /metrics without end (audit F16). Runs of more distinct
// handlers than that, by an external worker, leave at most
// maxHandlerSeries+1 series of needle_handler_outcomes_total per result,
// and every run counted.
func TestHandlerSeriesCapped(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	n := maxHandlerSeries + 40
	names := make([]string, n)
	var tasks []string
	for i := range names {
		names[i] = fmt.Sprintf("h%03d", i)
		tasks = append(tasks, fmt.Sprintf(`{"name": "t%d", "handler": %q, "payload": %d}`, i, names[i], i))
	}
	res, err := c.SubmitGroupJSON(t.Context(), []byte(`{"mode": "parallel", "tasks": [`+strings.Join(tasks, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Poll them (at most 256 handlers a poll) and complete them all.
	leases := map[string]string{} // task -> lease
	for lo := 0; lo < n; lo += 200 {
		chunk := names[lo:min(lo+200, n)]
		var hs []string
		for _, h := range chunk {
			hs = append(hs, strconv.Quote(h))
		}
		for got := 0; got < len(chunk); { // a poll answers once it has any
			for _, task := range poll(t, c, "w1", strings.Join(hs, ","), api.MaxPollTasks, "30s") {
				leases[task.ID] = task.Lease
				got++
			}
		}
	}
	var done []string
	for _, l := range leases {
		done = append(done, `{"lease": "`+l+`", "result": 1}`)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/report", `{"done": [`+strings.Join(done, ",")+`]}`); status != 200 {
		t.Fatalf("report = %d %s", status, data)
	}
	if g, err := c.GetGroup(t.Context(), res.Group, 30*time.Second); err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("group = %+v, %v; want SUCCEEDED", g, err)
	}
	series, sum, other := 0, 0.0, 0.0
	for _, s := range gather(t, p.metrics, "needle_handler_outcomes_total").GetMetric() {
		l := labelsOf(s)
		if l["result"] != "succeeded" {
			continue
		}
		series++
		sum += s.GetCounter().GetValue()
		if l["handler"] == otherHandler {
			other = s.GetCounter().GetValue()
		}
	}
	if series > maxHandlerSeries+1 || sum != float64(n) || other == 0 {
		t.Errorf("needle_handler_outcomes_total{result=succeeded}: %d series summing %v, other %v; want at most %d, summing %d, the rest under other",
			series, sum, other, maxHandlerSeries+1, n)
	}
}

// The handler run time histogram shares the cap (a program may register
// any number of handlers; names past the cap are "other").
func TestRunTimeSeriesCapped(t *testing.T) {
	m := newMetrics(&Peer{cfg: Config{Slots: 2}, handlers: NewRegistry()})
	for i := range maxHandlerSeries + 40 {
		m.runTime(fmt.Sprintf("h%03d", i), time.Millisecond)
	}
	mf := gather(t, m, "needle_task_run_seconds")
	count := uint64(0)
	for _, s := range mf.GetMetric() {
		count += s.GetHistogram().GetSampleCount()
	}
	if len(mf.GetMetric()) > maxHandlerSeries+1 || count != maxHandlerSeries+40 {
		t.Errorf("needle_task_run_seconds: %d series, %d runs; want at most %d series, %d runs", len(mf.GetMetric()), count, maxHandlerSeries+1, maxHandlerSeries+40)
	}
	if l := m.user.handlers.label("h000"); l != "h000" {
		t.Errorf("a handler seen before the cap is %q; want its own series", l)
	}
	if l := m.user.handlers.label("h999"); l != otherHandler {
		t.Errorf("a handler past the cap is %q; want %q", l, otherHandler)
	}
}
