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

// TestWorkersQuarantine: tasks that kill every worker that runs them (the
// poison fault) become suspects after two deaths, run alone (the checker
// fails a suspect handed to a worker holding another lease, or a lease
// handed to one running a suspect), and the crash limit fails them for
// good, each FAILED at the end with that one outcome (checkCrashLimited).
// Without the rules in the simulated hub no suspect is handed out alone
// and no task fails at the limit.
func TestWorkersQuarantine(t *testing.T) {
	suspects, limited := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		r := mustRun(t, Config{Seed: seed, Peers: 3, Tasks: 150, Workers: 2, Faults: []string{"worker", "poison"}})
		if r.Failed() {
			t.Fatalf("seed %d: %v", seed, r.Violations)
		}
		if r.Poisoned == 0 || r.PoisonDeaths == 0 {
			t.Fatalf("seed %d: %d tasks poisoned, %d workers killed; want some", seed, r.Poisoned, r.PoisonDeaths)
		}
		if r.CrashLimitFailed > r.CrashLimit {
			t.Fatalf("seed %d: %d tasks failed at the crash limit, %d runs; want at most one each", seed, r.CrashLimitFailed, r.CrashLimit)
		}
		suspects += r.SuspectLeases
		limited += r.CrashLimitFailed
	}
	if suspects == 0 || limited == 0 {
		t.Fatalf("suspects handed out alone %d, tasks failed at the crash limit %d; want some of each", suspects, limited)
	}
	t.Logf("suspects handed out alone %d, tasks failed at the crash limit %d", suspects, limited)
}

// TestWorkerIsolationBug seeds a bug (the hub hands a suspect to any
// worker, and anything to a worker running one): invariant 6 must say
// so.
func TestWorkerIsolationBug(t *testing.T) {
	cfg := Config{Seed: 1, Peers: 2, Tasks: 200, Workload: "workers", Faults: []string{"poison"}, bugNoIsolation: true}
	r := mustRun(t, cfg)
	if !r.Failed() || r.Violations[0].Invariant != invWorkers || !strings.Contains(r.Violations[0].Message, "suspect") {
		t.Fatalf("violations %v; want %s, a suspect not handed out alone", r.Violations, invWorkers)
	}
	cfg.bugNoIsolation = false
	if clean := mustRun(t, cfg); clean.Failed() || clean.SuspectLeases == 0 {
		t.Fatalf("without the bug: violations %v, %d suspects handed out alone; want none, and some", clean.Violations, clean.SuspectLeases)
	}
	t.Log(r.Violations[0].Message)
}

// TestWorkersRestart: a worker restarted as another instance (the restart
// fault) polls again well within the TTL, and the hub buries the leases
// of its old process at once (node.WorkerInstance), as the runtime's
// does: the checker fails a hub that hands the worker a lease while one
// of its old process's is still held (TestWorkerBurialBug), and the tasks
// run again and finish (liveness). A worker stopped gracefully (the same
// fault) releases what it holds: each released task ends in a later
// round, with no outcome in the round released (checkUnwanted). Without
// the models no lease is buried at once and none released.
func TestWorkersRestart(t *testing.T) {
	restarts, buried, released, done := 0, 0, 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		r := mustRun(t, Config{Seed: seed, Peers: 4, Tasks: 150, Workload: "workers", Faults: []string{"worker", "restart"}})
		if r.Failed() {
			t.Fatalf("seed %d: %v", seed, r.Violations)
		}
		restarts += r.WorkerRestarts
		buried += r.RestartBuried
		released += r.WorkerReleased
		done += r.UnwantedDone
	}
	if restarts == 0 || buried == 0 || released == 0 || done == 0 {
		t.Fatalf("restarts seen %d, leases buried at once %d, released %d, tasks handed back done later %d; want some of each", restarts, buried, released, done)
	}
	t.Logf("restarts seen %d, leases buried at once %d, released %d, tasks handed back done later %d", restarts, buried, released, done)
}

// TestWorkerBurialBug seeds a bug (the hub takes a restarted worker's new
// instance and keeps its old process's leases): invariant 6 must say so.
func TestWorkerBurialBug(t *testing.T) {
	cfg := Config{Seed: 1, Peers: 4, Tasks: 150, Workload: "workers", Faults: []string{"restart"}, bugNoBurial: true}
	r := mustRun(t, cfg)
	if !r.Failed() || r.Violations[0].Invariant != invWorkers || !strings.Contains(r.Violations[0].Message, "before a restart") {
		t.Fatalf("violations %v; want %s, a lease of a restarted process kept", r.Violations, invWorkers)
	}
	t.Log(r.Violations[0].Message)
}

// TestWorkersExpiry: a worker whose handlers hang past their leases'
// expiry (the hang fault) takes no more tasks, and the copies of
// broadcasts pinned to it wait in the hub's queue, which only it may
// take: once their lease expired the hub hands them back
// (node.QueuedExpired), as the runtime's does, and each such task ends in
// a later round with no outcome in the round handed back
// (checkUnwanted). Without the rule in the simulated hub no run is
// handed back expired.
func TestWorkersExpiry(t *testing.T) {
	expired, done := 0, 0
	for seed := uint64(1); seed <= 4; seed++ {
		r := mustRun(t, Config{Seed: seed, Peers: 4, Tasks: 150, Workload: "workers", Faults: []string{"worker", "hang"}})
		if r.Failed() {
			t.Fatalf("seed %d: %v", seed, r.Violations)
		}
		if r.WorkerHangs != 1 {
			t.Fatalf("seed %d: %d hang faults; want 1", seed, r.WorkerHangs)
		}
		expired += r.WorkerExpired
		done += r.UnwantedDone
	}
	if expired == 0 || done == 0 {
		t.Fatalf("runs handed back expired %d, tasks handed back done later %d; want some of each", expired, done)
	}
	t.Logf("runs handed back expired %d, tasks handed back done later %d", expired, done)
}
