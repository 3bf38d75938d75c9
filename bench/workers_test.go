package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWorkerWorkloads runs w1go, w2go and w1py (when python3 is there) on one
// real needled, built from cmd/needled, with worker processes: the test
// binary as the Go worker, clients/python as the Python one. Every task's
// result is checked by the workload.
func TestWorkerWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds needled and runs worker processes")
	}
	bin := filepath.Join(t.TempDir(), "needled")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/needled").CombinedOutput(); err != nil {
		t.Fatalf("go build needled: %v\n%s", err, out)
	}
	workloads := []string{W1Go, W2Go}
	if _, err := exec.LookPath("python3"); err == nil {
		workloads = append(workloads, W1Py)
	} else {
		t.Log("python3 not found: w1py not run")
	}
	cfg := DefaultConfig()
	cfg.Needled, cfg.Peers, cfg.Reps = bin, 1, 1
	cfg.Workloads = workloads
	cfg.W1Tasks, cfg.W1Batch, cfg.W2Tasks = 400, 100, 20
	cfg.GoWorker = []string{os.Args[0]}
	cfg.PythonClient = "../clients/python"
	cfg.DataDir = t.TempDir()
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(rep.Workloads) != len(workloads) {
		t.Fatalf("%d workloads reported; want %d", len(rep.Workloads), len(workloads))
	}
	for _, w := range rep.Workloads {
		if len(w.Reps) != 1 || w.Reps[0].ProblemCount != 0 || len(w.Reps[0].Metrics) == 0 || !(w.Reps[0].Metrics[0].Value > 0) {
			t.Errorf("%s: %+v; want one clean repetition with a throughput or latency", w.Name, w)
		}
	}
}

// TestWorkerFailoverWorkload runs w4go on two real peers with a short
// --worker-ttl: the killed worker's tasks run again, none is lost, every
// result is checked by the workload.
func TestWorkerFailoverWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds needled and runs worker processes")
	}
	bin := filepath.Join(t.TempDir(), "needled")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/needled").CombinedOutput(); err != nil {
		t.Fatalf("go build needled: %v\n%s", err, out)
	}
	cfg := DefaultConfig()
	cfg.Needled, cfg.Peers, cfg.Reps = bin, 2, 1
	cfg.Workloads = []string{W4Go}
	cfg.W4Tasks, cfg.WorkerPrefetch = 60, -1
	cfg.ExtraArgs = []string{"--worker-ttl", "1s"}
	cfg.GoWorker = []string{os.Args[0]}
	cfg.DataDir = t.TempDir()
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(rep.Workloads) != 1 || len(rep.Workloads[0].Reps) != 1 {
		t.Fatalf("report = %+v; want one repetition of w4go", rep)
	}
	r := rep.Workloads[0].Reps[0]
	if r.ProblemCount != 0 || len(r.Metrics) == 0 || r.Metrics[0].Name != "lost" || r.Metrics[0].Value != 0 {
		t.Errorf("w4go = %+v; want a clean repetition, 0 lost", r)
	}
	t.Logf("w4go: %+v", r.Metrics)
}
