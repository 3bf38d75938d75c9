package simulate

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/ring"
)

// small is a quick scenario: crash, pause and skew on a small mixed load.
func small(seed uint64) Config {
	return Config{Seed: seed, Peers: 3, Tasks: 60, Workload: "mixed", Faults: []string{"crash", "pause", "skew"}}
}

func mustRun(t testing.TB, cfg Config) Report {
	t.Helper()
	r, err := Run(cfg)
	if err != nil {
		t.Fatalf("Run(%v): %v", cfg, err)
	}
	return r
}

func TestDeterministic(t *testing.T) {
	for _, cfg := range []Config{small(7), DefaultConfig()} {
		a, b := mustRun(t, cfg), mustRun(t, cfg)
		a.WallSeconds, b.WallSeconds = 0, 0
		a.WallAfterWarmup, b.WallAfterWarmup = 0, 0
		a.CPUPerTaskUS, b.CPUPerTaskUS = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%v ran twice:\n%+v\n%+v", cfg, a, b)
		}
		if a.Hash == "" || a.Runs == 0 {
			t.Errorf("%v: empty run %+v", cfg, a)
		}
	}
}

// TestSeeds runs a batch of seeds of a small workload under crash, pause
// and skew on one peer: no invariant may break.
func TestSeeds(t *testing.T) {
	t.Parallel()
	seedBatch(t, 1, 50, func(cfg *Config) {})
}

// TestSeedsMesh runs small workloads on meshes of three to five peers
// under every fault: 300 mixed and 50 w4 seeds on three peers, 100 mixed
// seeds on four and on five (where churn also takes a peer out for good).
// With TestSeeds that is 600 seeds, about 20 s on 2 cores.
func TestSeedsMesh(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name         string
		peers, seeds int
		workload     string
	}{
		{"peers3", 3, 300, "mixed"},
		{"peers3-w4", 3, 50, "w4"},
		{"peers4", 4, 100, "mixed"},
		{"peers5", 5, 100, "mixed"},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			seedBatch(t, b.peers, b.seeds, func(cfg *Config) {
				cfg.Workload, cfg.Faults = b.workload, slices.Clone(FaultKinds)
			})
		})
	}
}

// TestRegressionSeeds replays seeds that once broke an invariant, with
// the bug each one found (200 tasks each).
func TestRegressionSeeds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		seed     uint64
		peers    int
		workload string
		faults   []string
		bug      string
	}{
		{40, 4, "mixed", []string{"churn"}, "a restarted peer that knew only itself removed live replicas, and a partition kept 2 voters when one left"},
		{83, 4, "mixed", FaultKinds, "a deposed owner granted a lease another owner committed, so its thief ran a finished task"},
		{99, 4, "placement", FaultKinds, "a task pinned to a peer that left failed in the round of its earlier attempt: two outcomes in one round"},
		{7, 5, "placement", FaultKinds, "a peer left while a partition had 2 voters"},
		{406, 3, "w4", FaultKinds, "a grant for a thief's former run (it restarted since it asked) ran on the new one"},
		{410, 5, "w4", FaultKinds, "the checker took a Created reply sent as a node resumed from a pause for a second creation"},
		{77, 5, "mixed", FaultKinds, "a peer's slots leaked with leases lost with its leadership, so it never stole its pinned broadcast copy"},
		{5247, 4, "sched", FaultKinds, "a peer busy with its own firings never asked for a broadcast copy pinned to it at another owner"},
		{60343, 5, "mixed", FaultKinds, "a peer left while the others were still in the joint configuration that needed its vote"},
		{939, 5, "mixed", FaultKinds, "a dead voter the ring no longer wanted was removed before its replacement could join: two voters, then one left"},
		{70220, 5, "mixed", FaultKinds, "the checker failed a thief's run of a broadcast firing that no running replica had applied yet"},
	} {
		replaySeed(t, Config{Seed: c.seed, Peers: c.peers, Tasks: 200, Workload: c.workload, Faults: slices.Clone(c.faults)}, c.bug)
	}
	replaySeed(t, Config{Seed: 500206, Peers: 5, Tasks: 200, Workload: "mixed", Workers: 1, Faults: slices.Clone(FaultKinds), Start: StartJoin, Placement: ring.PlacementSpread},
		"a replica removed while paused campaigned with its stale log every few ticks; each refused request sent a voter into the preferred owner's campaigns at the same tick, and the two split the vote for good (liveness)")
	replaySeed(t, Config{Seed: 580140, Peers: 2, Tasks: 200, Workload: "mixed", Replicas: 2, Workers: 1, Faults: slices.Clone(FaultKinds), Start: StartTogether, Placement: ring.PlacementSpread},
		"the checker named a lease by worker, task and round, and took a worker's report on a run its node handed back to it in the same round, under a new token, for the late report on the lease lost before (invariant 6-workers)")
	replaySeed(t, Config{Seed: 490284, Peers: 6, Tasks: 200, Workload: "mixed", Replicas: 5, Faults: []string{"partition", "crash", "churn"}, Start: StartTogether, Placement: ring.PlacementSpread},
		"two voters ahead of a behind candidate campaigned at the tick after each of its requests, and retried at the next, and split the vote among four for good (liveness)")
}

// replaySeed runs cfg, a seed that once broke an invariant with bug, and
// fails the test if it breaks one now.
func replaySeed(t *testing.T, cfg Config, bug string) {
	t.Helper()
	if r := mustRun(t, cfg); r.Failed() {
		t.Errorf("%s\nonce: %s\nreplay: %s", r.Violations[0], bug, cfg.ReplayCommand())
	}
}

// TestRegressionSeedsTogether replays seeds of meshes started together
// (Config.Start) that once broke an invariant.
func TestRegressionSeedsTogether(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		seed     uint64
		peers    int
		workload string
		workers  int
		bug      string
	}{
		{218, 5, "mixed", 0, "a repeated creation's initial lease and the lease given once the first creation applied were both in the log, and the first started a run in the Ready that applied the second's outcome"},
		{72027, 5, "sched", 0, "a peer restarted after a drain stayed draining at a member its new run's heartbeat missed: two peers handed a partition's leadership to each other every 3 s (invariant flap), and a schedule on it missed ticks"},
		{890008, 5, "sched", 0, "a busy peer's asks for the tasks stranded at another owner took that owner's surplus, and a task pinned to it waited at the head of its own queue for 80 s; with that fixed, an update that allowed overlap on 5.6 s of work every second offered 8.1-8.3 slot-seconds a second on the 8 slots left after a leave, and a firing waited out the bound (liveness)"},
		{490089, 5, "w4", 0, "a peer that restarted as another left heard the forget while the leaver was alive to it and dropped it: its ring kept the leaver for 20 s after its peers dropped it, and two peers handed a partition's leadership to each other every 3 s (invariant flap)"},
		{110017, 3, "mixed", 2, "a repeated creation's initial lease applied after a worker had finished the speculative run of the second creation's, in the Ready that applied its outcome: the first lease's run went to a worker after the task succeeded"},
	} {
		replaySeed(t, Config{Seed: c.seed, Peers: c.peers, Tasks: 200, Workload: c.workload, Workers: c.workers, Faults: slices.Clone(FaultKinds), Start: StartTogether, Placement: ring.PlacementSpread}, c.bug)
	}
	replaySeed(t, Config{Seed: 180012, Peers: 4, Tasks: 600, Workload: "mixed", Workers: 2, Faults: slices.Clone(FaultKinds), Start: StartTogether, Placement: ring.PlacementSpread},
		"every peer held as many lease proposals for its workers as they wanted, their tasks long leased: it leased its workers nothing more, advertised nothing, and tasks stayed READY with every worker idle (liveness)")
}

func seedBatch(t *testing.T, peers, seeds int, adjust func(*Config)) {
	var tot Totals
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := small(seed)
		cfg.Peers, cfg.Tasks = peers, 40
		adjust(&cfg)
		r := mustRun(t, cfg)
		tot.Add(&r)
		if r.Failed() {
			t.Errorf("%s\nreplay: %s", r.Violations[0], cfg.ReplayCommand())
		}
	}
	t.Logf("peers %d: %d seeds, %d failing, sim %.0fs in %.2fs wall", peers, tot.Seeds, len(tot.FailingSeeds), tot.SimSeconds, tot.WallSeconds)
}

// TestReplicaCheckCatches seeds a bug (one node's replicas disagree with
// the others at the same applied index): invariant 5 must say so, naming
// the partition and both nodes.
func TestReplicaCheckCatches(t *testing.T) {
	for _, tasks := range []int{60, 3000} { // every partition per check; one in turn
		cfg := Config{Seed: 3, Peers: 3, Tasks: tasks, Workload: "mixed", Faults: []string{}}
		clean := mustRun(t, cfg)
		if clean.Failed() {
			t.Fatalf("tasks %d without the bug: %v", tasks, clean.Violations)
		}
		cfg.bugDigest = true
		r := mustRun(t, cfg)
		if !r.Failed() || r.Violations[0].Invariant != invReplicas {
			t.Fatalf("tasks %d: violations %v, want %s", tasks, r.Violations, invReplicas)
		}
		v := r.Violations[0]
		if !strings.Contains(v.Message, "n1") {
			t.Errorf("tasks %d: %q does not name n1", tasks, v.Message)
		}
		// The long run must be caught by a periodic check, before its end.
		if tasks > 60 && v.AtMS >= clean.SimSeconds*1000 {
			t.Errorf("tasks %d: caught at %.0f ms, the run ends at %.0f ms: only the final check caught it", tasks, v.AtMS, clean.SimSeconds*1000)
		}
		t.Logf("tasks %d: %s at %.0f ms (run ends at %.0f ms)", tasks, v.Message, v.AtMS, clean.SimSeconds*1000)
	}
}

// TestNoSyncLosesGroups seeds a bug (the driver never syncs the WAL): a
// crash must then lose an acknowledged group, and the checker must say so.
func TestNoSyncLosesGroups(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 5; seed++ {
		cfg := Config{Seed: seed, Peers: 1, Tasks: 60, Workload: "mixed", Faults: []string{"crash"}, bugNoSync: true}
		r := mustRun(t, cfg)
		if r.Failed() && r.Violations[0].Invariant == invLost {
			caught++
			continue
		}
		t.Logf("seed %d: %v", seed, r.Violations)
	}
	if caught == 0 {
		t.Fatal("no seed caught the missing sync")
	}
}

func TestValidateNamesFlags(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		flag string
	}{
		{Config{Peers: -1}, "--peers"},
		{Config{Peers: ring.MaxMembers + 1, Partitions: 65536}, "--peers"},
		{Config{Workload: "w9"}, "--workload"},
		{Config{Faults: []string{"meteor"}}, "--faults"},
		{Config{Peers: 20, Partitions: 8}, "--partitions"},
		{Config{Slots: -2}, "--slots"},
	} {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("Validate(%+v) = %v; want an error naming %s", tt.cfg, err, tt.flag)
		}
	}
}

// TestSchedSeeds runs the schedule-only workload under every fault: each
// tick fires at most once, and at least once after the faults heal.
// `needle simulate --workload sched --seeds 340 --max-sim-time 22m` is the
// long sweep (about 1,000 schedule-hours).
func TestSchedSeeds(t *testing.T) {
	t.Parallel()
	var hours float64
	var ticks, updates int
	for seed := uint64(1); seed <= 12; seed++ {
		cfg := Config{Seed: seed, Peers: 3, Workload: "sched", Faults: slices.Clone(FaultKinds), MaxSimTime: 3 * time.Minute}
		r := mustRun(t, cfg)
		hours += r.ScheduleHours
		ticks += r.TicksChecked
		updates += r.Updates
		if r.Failed() {
			t.Errorf("%s\nreplay: %s", r.Violations[0], cfg.ReplayCommand())
		}
		if r.Firings == 0 {
			t.Errorf("seed %d: no schedule fired", seed)
		}
	}
	if ticks == 0 {
		t.Error("no tick was checked in a healthy window")
	}
	if updates == 0 {
		t.Error("no schedule was updated")
	}
	t.Logf("12 seeds: %.1f schedule-hours, %d ticks checked", hours, ticks)
}

// TestGatedSeeds runs the gated workload (mixed with a concurrency on
// half its parallel, dag and staged groups) under every fault: a replica
// that lets more of a group's tasks in flight than its concurrency breaks
// invariant gate.
func TestGatedSeeds(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 12; seed++ {
		cfg := Config{Seed: seed, Peers: 4, Workload: "gated", Faults: slices.Clone(FaultKinds)}
		if r := mustRun(t, cfg); r.Failed() {
			t.Errorf("%s\nreplay: %s", r.Violations[0], cfg.ReplayCommand())
		}
	}
}

// TestLoadedPeersStayVictims runs mixed long enough that every peer stays
// loaded for a minute. Peers announce their load only when it changes
// (READY work or none), so a thief must still ask a peer it last heard
// of three seconds ago, and one it holds as empty because an older load
// overtook the announcement (a steal request the peer sent just before
// its work arrived): otherwise one peer's backlog waited for its own
// slots while others idled, and a group queued behind it outlived the
// liveness bound.
func TestLoadedPeersStayVictims(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 1, Peers: 3, Tasks: 10000, Workload: "mixed"}
	r := mustRun(t, cfg)
	if r.Failed() {
		t.Fatalf("%s\nreplay: %s", r.Violations[0], cfg.ReplayCommand())
	}
	if r.MakespanOverLB > 1.2 {
		t.Errorf("makespan/LB %.2f, want <= 1.2 (stealing evens the load)\nreplay: %s", r.MakespanOverLB, cfg.ReplayCommand())
	}
}

// A run with --warmup reports the time after it apart: the virtual time
// the workload ran and the wall time that took, and the text says so.
func TestWarmupReportsTimeAfter(t *testing.T) {
	cfg := Config{Seed: 2, Peers: 3, Tasks: 20, Workload: "idle", Faults: []string{}, Warmup: 5 * time.Second, MaxSimTime: 40 * time.Second}
	r := mustRun(t, cfg)
	if want := r.SimSeconds - cfg.Warmup.Seconds(); r.SimAfterWarmup != want || r.WallAfterWarmup <= 0 || r.WallAfterWarmup > r.WallSeconds {
		t.Fatalf("after the warmup: sim %v wall %v; want sim %v, wall in (0, %v]", r.SimAfterWarmup, r.WallAfterWarmup, want, r.WallSeconds)
	}
	if !strings.Contains(r.Text(), "after the warmup: sim ") {
		t.Errorf("the report does not give the time after the warmup:\n%s", r.Text())
	}
	if r := mustRun(t, small(3)); r.SimAfterWarmup != 0 || r.WallAfterWarmup != 0 || strings.Contains(r.Text(), "after the warmup: sim") {
		t.Errorf("a run without a warmup reports time after one: %v %v", r.SimAfterWarmup, r.WallAfterWarmup)
	}
}

// An idle run that --max-sim-time ends before its span is over (a large
// mesh's formed minutes are what is measured) stops there without a
// liveness violation; a run with work left at the limit still breaks it.
func TestIdleRunCutShortIsNoViolation(t *testing.T) {
	r := mustRun(t, Config{Seed: 1, Peers: 5, Tasks: 10, Workload: "idle", Faults: []string{}, Warmup: 20 * time.Second, MaxSimTime: 30 * time.Second})
	if r.Failed() || r.SimSeconds != 30 {
		t.Fatalf("an idle run cut short at 30 s: failed %v (%v), ran %v s", r.Failed(), r.Violations, r.SimSeconds)
	}
	r = mustRun(t, Config{Seed: 1, Peers: 3, Tasks: 400, Workload: "w3", Faults: []string{}, MaxSimTime: 2 * time.Second})
	if !r.Failed() {
		t.Fatal("a run with 400 tasks and 2 s of virtual time broke no liveness")
	}
}

// makespanRatios runs cfg(seed) for seeds 1 to seeds, each of which must
// keep every guarantee, and returns their makespans over LB, sorted.
func makespanRatios(t *testing.T, seeds uint64, cfg func(seed uint64) Config) []float64 {
	t.Helper()
	var ratios []float64
	for seed := uint64(1); seed <= seeds; seed++ {
		c := cfg(seed)
		r := mustRun(t, c)
		if r.Failed() {
			t.Fatalf("%s\nreplay: %s", r.Violations[0], c.ReplayCommand())
		}
		ratios = append(ratios, r.MakespanOverLB)
	}
	slices.Sort(ratios)
	return ratios
}

// TestTailHeldAheadNotBehindLongRun runs W3 on 3 peers, where a 400 ms
// task granted or leased ahead at 49 READY (past the count's tail of 4
// tasks per slot) waited a whole 400 ms run while the other slots ran the
// rest: seeds 1-5 were at 1.095-1.097 x LB. A tail measured in the
// longest runs too (steal.InTail), and no own lease ahead in it
// (Node.ownAhead), bring them to 1.068-1.070.
func TestTailHeldAheadNotBehindLongRun(t *testing.T) {
	t.Parallel()
	ratios := makespanRatios(t, 5, func(seed uint64) Config {
		return Config{Seed: seed, Peers: 3, Tasks: 300, Workload: "w3", Faults: []string{}, Warmup: 5 * time.Second}
	})
	if ratios[2] > 1.085 {
		t.Errorf("makespan/LB over seeds 1-5 %.3f, median %.3f; want <= 1.085", ratios, ratios[2])
	}
}

// TestTailNotLeasedAhead runs W3's durations on 100 peers, one owner and
// 99 thieves. A thief asks for a task beyond its free slots to hide a
// steal's round trip; at the end of the backlog such a task waited behind
// a whole run (up to 400 ms) while other slots idled, and the makespan
// was 1.18-1.31 x LB over seeds 1-3. A victim whose backlog is in its
// tail grants free slots only (steal.TailCap): the median stays within
// what list scheduling promises (LB plus the longest task, about 1.14
// here).
func TestTailNotLeasedAhead(t *testing.T) {
	t.Parallel()
	ratios := makespanRatios(t, 3, func(seed uint64) Config {
		return Config{Seed: seed, Peers: 100, Tasks: 10000, Workload: "w3", Partitions: 512, Warmup: 5 * time.Second, Placement: ring.PlacementSpread}
	})
	if ratios[1] > 1.15 {
		t.Errorf("makespan/LB over seeds 1-3 %.3f, median %.3f; want <= 1.15", ratios, ratios[1])
	}
}

// TestChurnStopsDrain checks that churn's clean stops drain first, as
// needled does on SIGTERM, and that the drains finish (Node.Drained)
// rather than run into the drain timeout: a mesh that cannot hand a
// stopping peer's work over would show here.
func TestChurnStopsDrain(t *testing.T) {
	t.Parallel()
	var drains, timedOut uint64
	for seed := uint64(1); seed <= 20; seed++ {
		r := mustRun(t, Config{Seed: seed, Peers: 5, Tasks: 100, Workload: "mixed", Faults: []string{"churn", "partition"},
			Start: StartJoin})
		if len(r.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, r.Violations)
		}
		drains += r.Drains
		timedOut += r.DrainsTimedOut
	}
	if drains < 20 || timedOut > 0 {
		t.Errorf("20 seeds of churn: %d drains, %d timed out; want at least 20, none timed out", drains, timedOut)
	}
}
