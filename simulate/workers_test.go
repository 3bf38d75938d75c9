package simulate

import (
	"strings"
	"testing"

	"github.com/needle-mesh/needle/shard"
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

// The workers workload's schedule broadcasts to the workers: without
// faults, its firings run one copy in each of the workers live then (2
// per peer), each copy named by and run in its worker (the checker's
// invariant 6 holds every run to its copy's worker).
func TestWorkersScheduledBroadcast(t *testing.T) {
	cfg := Config{Seed: 5, Peers: 3, Tasks: 100, Workload: "workers", Workers: 2}
	s, err := newSim(cfg.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	s.loop()
	if s.viol != nil {
		t.Fatalf("violation: %v", s.viol)
	}
	firings, copies := 0, 0
	for _, g := range s.chk.order {
		if _, _, ok := shard.ParseFiringGroupID(g.spec.ID); !ok || g.spec.Mode != shard.ModeBroadcast {
			continue
		}
		firings++
		for _, ts := range g.spec.Tasks {
			if shard.BroadcastWorker(&ts) == "" || ts.Handler != extHandler {
				t.Fatalf("firing %s has copy %+v; want one pinned to a worker", g.spec.ID, ts)
			}
		}
		copies += len(g.spec.Tasks)
		for _, tk := range g.tasks {
			if tk.state != shard.Succeeded || tk.runs != 1 {
				t.Fatalf("copy %s of firing %s: %v after %d runs; want SUCCEEDED once", tk.id, g.spec.ID, tk.state, tk.runs)
			}
		}
	}
	t.Logf("%d firings, %d copies", firings, copies)
	if firings == 0 || copies != firings*cfg.Peers*cfg.Workers {
		t.Fatalf("%d firings with %d copies; want some, each with one copy per worker (%d)", firings, copies, cfg.Peers*cfg.Workers)
	}
}

// TestWorkersBusyHandBack: a peer's workers stop polling while the runs
// their last polls drew are queued there (the busy fault); the hub hands
// them back to their owners node.WorkerUnwantedFor later, as the
// runtime's does, and each such task ends in a later round on another
// peer, with no outcome in the round handed back (the checker's
// checkUnwanted). Without the rule in the simulated hub, no run is
// handed back unwanted.
func TestWorkersBusyHandBack(t *testing.T) {
	unwanted, done, elsewhere := 0, 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		r := mustRun(t, Config{Seed: seed, Peers: 4, Tasks: 150, Workload: "workers", Faults: []string{"busy"}})
		if r.Failed() {
			t.Fatalf("seed %d: %v", seed, r.Violations)
		}
		if r.WorkerBusy != 1 {
			t.Fatalf("seed %d: %d busy faults; want 1", seed, r.WorkerBusy)
		}
		unwanted += r.WorkerUnwanted
		done += r.UnwantedDone
		elsewhere += r.UnwantedElsewhere
	}
	if unwanted == 0 || done == 0 || elsewhere == 0 {
		t.Fatalf("runs handed back unwanted %d, their tasks done later %d (elsewhere %d); want some of each", unwanted, done, elsewhere)
	}
	t.Logf("handed back unwanted %d, done later %d, elsewhere %d", unwanted, done, elsewhere)
}
