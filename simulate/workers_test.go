package simulate

import (
	"strings"
	"testing"
)

// External workers under faults (a death, a stall past the TTL, repeated
// reports) keep every invariant, and the faults happen: reports are
// refused late and repeats answered as such.
func TestWorkersFaults(t *testing.T) {
	late, repeats := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		r := mustRun(t, Config{Seed: seed, Peers: 3, Tasks: 150, Workers: 2, Faults: FaultKinds})
		if r.Failed() {
			t.Fatalf("seed %d: %v", seed, r.Violations)
		}
		if r.WorkerLeases == 0 || r.WorkerDeaths != 1 || r.WorkerStalls != 1 {
			t.Fatalf("seed %d: worker leases %d deaths %d stalls %d; want leases and one of each fault", seed, r.WorkerLeases, r.WorkerDeaths, r.WorkerStalls)
		}
		late += r.WorkerLate
		repeats += r.WorkerRepeats
	}
	cfg := Config{Seed: 3, Peers: 3, Tasks: 100, Workload: "workers", Faults: FaultKinds}
	if a, b := mustRun(t, cfg), mustRun(t, cfg); a.Hash != b.Hash || a.Failed() {
		t.Fatalf("workers workload: hashes %s and %s for one seed, violations %v", a.Hash, b.Hash, a.Violations)
	}
	if late == 0 || repeats == 0 {
		t.Fatalf("late reports refused %d, repeats answered %d over the seeds; want some of each", late, repeats)
	}
}

// TestWorkerFenceBug seeds a bug (the hub matches a report by its task,
// not its lease): a stalled worker's late report then lands on the task's
// newer lease, and invariant 6 must say so.
func TestWorkerFenceBug(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := Config{Seed: seed, Peers: 1, Tasks: 100, Workload: "workers", Workers: 2, Faults: []string{"worker"}, bugWorkerFence: true}
		r := mustRun(t, cfg)
		if !r.Failed() {
			continue
		}
		if v := r.Violations[0]; v.Invariant != invWorkers || !strings.Contains(v.Message, "as round") {
			t.Fatalf("seed %d: violation %v; want %s, a report handed over for another round", seed, v, invWorkers)
		}
		cfg.bugWorkerFence = false
		if clean := mustRun(t, cfg); clean.Failed() {
			t.Fatalf("seed %d without the bug: %v", seed, clean.Violations)
		}
		t.Logf("seed %d: %s", seed, r.Violations[0].Message)
		return
	}
	t.Fatal("no seed caught the hub that matches reports by task")
}

// Seeds with external workers that found a bug, and the bug (200 tasks).
func TestWorkersRegressionSeeds(t *testing.T) {
	for _, c := range []struct {
		seed  uint64
		peers int
		bug   string
	}{
		{49, 3, "a peer losing a partition answered a pending submission and took the next one of the same key off the pending requests unanswered: the core panicked on its hole"},
	} {
		cfg := Config{Seed: c.seed, Peers: c.peers, Tasks: 200, Workload: "mixed", Workers: 2, Faults: FaultKinds}
		if r := mustRun(t, cfg); r.Failed() {
			t.Errorf("%s\nonce: %s\nreplay: %s", r.Violations[0], c.bug, cfg.ReplayCommand())
		}
	}
}
