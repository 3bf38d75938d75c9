package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testConfig returns a small config run by in-process fake peers.
func testConfig(t *testing.T, n *fakeNet, workloads ...string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Start = n.start
	cfg.Workloads = workloads
	cfg.Reps = 2
	cfg.W1Tasks, cfg.W1Batch, cfg.W2Tasks, cfg.W4Tasks = 2000, 250, 50, 60
	cfg.W3File = writeDurations(t, 5, 5, 5, 5, 5, 5, 5, 5, 5, 40, 40)
	cfg.ReadyTimeout, cfg.WaitTimeout = 10*time.Second, time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	return cfg
}

// writeDurations writes a W3 durations file and returns its path.
func writeDurations(t *testing.T, ms ...int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test durations\n")
	for _, d := range ms {
		b.WriteString(strconv.Itoa(d) + "\n")
	}
	path := filepath.Join(t.TempDir(), "durations.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// metric returns the value of a metric of a repetition.
func metric(t *testing.T, r RepResult, name string) float64 {
	t.Helper()
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value
		}
	}
	t.Fatalf("rep %d has no metric %q: %+v", r.Rep, name, r.Metrics)
	return 0
}

// assertStopped fails unless every fake peer was stopped.
func assertStopped(t *testing.T, n *fakeNet) {
	t.Helper()
	for _, p := range n.peers() {
		if !p.isDead() {
			t.Errorf("peer %s still running after Run", p.id)
		}
	}
}

func TestRunAllWorkloads(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, W1, W2, W3, W4)
	var out, js bytes.Buffer
	cfg.Out, cfg.JSON = &out, &js
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v; want nil\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	if got, want := len(rep.Workloads), 4; got != want {
		t.Fatalf("len(Workloads) = %d; want %d", got, want)
	}
	for _, w := range rep.Workloads {
		if got := len(w.Reps); got != cfg.Reps {
			t.Errorf("%s: %d reps; want %d", w.Name, got, cfg.Reps)
		}
		for _, r := range w.Reps {
			if r.ProblemCount != 0 {
				t.Errorf("%s rep %d: problems %v", w.Name, r.Rep, r.Problems)
			}
		}
	}
	w1 := rep.Workloads[0].Reps[0]
	if v := metric(t, w1, "throughput"); !(v > 0) {
		t.Errorf("w1 throughput = %v; want > 0", v)
	}
	w3 := rep.Workloads[2].Reps[0]
	if got, want := metric(t, w3, "LB"), 0.04; math.Abs(got-want) > 1e-9 {
		t.Errorf("w3 LB = %v; want %v (longest task)", got, want)
	}
	if v := metric(t, w3, "makespan/LB"); !(v >= 1) {
		t.Errorf("w3 makespan/LB = %v; want >= 1", v)
	}
	for _, r := range rep.Workloads[3].Reps {
		if got := metric(t, r, "lost"); got != 0 {
			t.Errorf("w4 rep %d lost = %v; want 0", r.Rep, got)
		}
		if dups, held := metric(t, r, "duplicates"), metric(t, r, "rerun after kill"); dups < held {
			t.Errorf("w4 rep %d duplicates = %v < held %v", r.Rep, dups, held)
		}
	}
	for _, s := range []string{"throughput", "p99", "makespan/LB", "lost", "["} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q", s)
		}
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, js.String())
	}
	if got, want := len(back.Workloads), 4; got != want {
		t.Errorf("JSON workloads = %d; want %d", got, want)
	}
	assertStopped(t, n)
}

func TestRunDetectsWrongResult(t *testing.T) {
	n := &fakeNet{corrupt: func(p json.RawMessage) bool {
		return bytes.HasSuffix(p, []byte(`"i":7}`))
	}}
	cfg := testConfig(t, n, W1, W2)
	cfg.Reps = 1
	var out bytes.Buffer
	cfg.Out = &out
	rep, err := Run(t.Context(), cfg)
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("Run = %v; want a *CheckError\n%s", err, out.String())
	}
	if got, want := len(ce.Failures), 2; got != want {
		t.Errorf("failures = %q; want %d (w1 and w2)", ce.Failures, want)
	}
	if got := rep.Workloads[0].Reps[0].ProblemCount; got != 1 {
		t.Errorf("w1 problems = %d; want 1: %v", got, rep.Workloads[0].Reps[0].Problems)
	}
	if !strings.Contains(out.String(), `result {"wrong":true}`) || !strings.Contains(out.String(), "throughput") {
		t.Errorf("table lacks the metrics or the wrong result:\n%s", out.String())
	}
	assertStopped(t, n)
}

func TestRunDetectsLostTask(t *testing.T) {
	n := &fakeNet{lose: func(p json.RawMessage) bool {
		return bytes.Contains(p, []byte(`"i":3`))
	}}
	cfg := testConfig(t, n, W3)
	cfg.Reps = 1
	cfg.W3File = writeDurations(t, 1, 1, 1, 1, 1)
	_, err := Run(t.Context(), cfg)
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("Run = %v; want a *CheckError", err)
	}
	if !strings.Contains(err.Error(), "state FAILED, want SUCCEEDED") &&
		!strings.Contains(err.Error(), "not terminal") {
		t.Errorf("Run = %v; want it to name the failed task", err)
	}
}

func TestRunSkipsW4WithFewPeers(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, W4)
	cfg.Peers = 2
	var out bytes.Buffer
	cfg.Out = &out
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if rep.Workloads[0].Skipped == "" || !strings.Contains(out.String(), "--peers >= 3") {
		t.Errorf("w4 not skipped with a reason: %+v\n%s", rep.Workloads[0], out.String())
	}
	if got := len(n.peers()); got != 0 {
		t.Errorf("%d peers started; want 0", got)
	}
}

func TestRunStopsOnCanceledContext(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, W1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v; want context.Canceled", err)
	}
	assertStopped(t, n)
}

// TestW4KillsSeveral runs W4 killing two of five fake peers one at a time:
// nothing is lost, the first victim is forgotten by the four peers still
// up before the second is killed, and nothing else is forgotten (the run
// ends waiting for the groups after the last kill).
func TestW4KillsSeveral(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, W4)
	cfg.Peers, cfg.W4Kill, cfg.Reps = 5, 2, 1
	var out bytes.Buffer
	cfg.Out = &out
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v\n%s", err, out.String())
	}
	r := rep.Workloads[0].Reps[0]
	if r.ProblemCount != 0 || metric(t, r, "lost") != 0 {
		t.Fatalf("w4 = %+v; want no problem, 0 lost", r)
	}
	n.mu.Lock()
	m := n.meshes[0]
	n.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	byIndex := map[int]*fakePeer{}
	for _, p := range m.peers {
		byIndex[p.spec.Index] = p
	}
	if got := m.forgets[byIndex[1].id]; got != 4 {
		t.Errorf("peer 1 forgotten %d times; want 4 (by each peer still up)", got)
	}
	if got := m.forgets[byIndex[2].id]; got != 0 {
		t.Errorf("peer 2 forgotten %d times; want 0", got)
	}
	if len(m.forgets) != 1 {
		t.Errorf("forgotten: %v; want peer 1 only", m.forgets)
	}
}

// TestIdleWorkload runs WI on three fake peers, whose /metrics report
// 10 ms more CPU at each read: each peer's CPU over the period, and the
// mesh's, three times that.
func TestIdleWorkload(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, WI)
	cfg.IdleFor, cfg.Reps = 50*time.Millisecond, 1
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Workloads[0].Reps[0]
	p50, mesh := metric(t, r, "cpu/peer p50"), metric(t, r, "cpu mesh")
	// 10 ms over at least IdleFor (50 ms): at most 20% of a core.
	if !(p50 > 0 && p50 <= 20) || math.Abs(mesh-3*p50) > 1e-6*mesh || metric(t, r, "cpu/peer max") != p50 {
		t.Errorf("cpu/peer p50 %v, max %v, mesh %v; want p50 in (0, 20], max = p50, mesh = 3 x p50",
			p50, metric(t, r, "cpu/peer max"), mesh)
	}
}

// TestW1ForSustains: with W1For, W1 keeps W1Tasks in flight for that long,
// a new group as each finishes, checks every one, and starts its peers
// with a short retention; a wrong result still fails it.
func TestW1ForSustains(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, W1)
	cfg.Reps = 1
	cfg.W1Tasks, cfg.W1Batch, cfg.W1For = 400, 100, 500*time.Millisecond
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Workloads[0].Reps[0]
	if tasks := metric(t, r, "tasks"); tasks <= float64(cfg.W1Tasks) || math.Mod(tasks, float64(cfg.W1Batch)) != 0 {
		t.Errorf("%v tasks done; want whole groups, more than the %d in flight at once", tasks, cfg.W1Tasks)
	}
	if el := metric(t, r, "elapsed"); el < cfg.W1For.Seconds() {
		t.Errorf("elapsed %v s; want at least --w1-for", el)
	}
	for _, a := range n.args {
		if i := slices.Index(a, "--retention"); i < 0 || i+1 >= len(a) || a[i+1] != W1Retention.String() {
			t.Errorf("peer args %q; want --retention %v", a, W1Retention)
		}
	}
	assertStopped(t, n)

	bad := &fakeNet{corrupt: func(p json.RawMessage) bool { return bytes.HasSuffix(p, []byte(`"i":107}`)) }}
	cfg = testConfig(t, bad, W1)
	cfg.Reps = 1
	cfg.W1Tasks, cfg.W1Batch, cfg.W1For = 400, 100, 300*time.Millisecond
	if _, err := Run(t.Context(), cfg); !errors.As(err, new(*CheckError)) {
		t.Fatalf("Run = %v; want a *CheckError for the wrong result", err)
	}
}
