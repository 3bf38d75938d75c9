package simulate

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/ring"
)

// Workload names accepted by Config.Workload (docs/design.md, "Workloads shared
// by bench/ and simulate/").
var Workloads = []string{"w1", "w2", "w3", "w4", "mixed", "sched", "placement", "batch", "idle", "workers", "gated"}

// FaultKinds are the fault kinds of the default set (Config.Faults).
var FaultKinds = []string{"partition", "crash", "drop", "dup", "reorder", "pause", "skew", "churn", "slow", "worker", "busy"}

// OptInFaults are accepted in Config.Faults but not in the default set:
// forge, a keyed host's forged grants and outcomes (make simulate runs it
// on its own); poison, tasks that kill their external workers
// (workerquarantine.go); restart, workers restarted as another instance
// or stopped (releasing their leases), and hang, a worker's handlers hung
// past their leases' expiry (workerrestart.go).
var OptInFaults = []string{"forge", "poison", "restart", "hang"}

// allFaults is every kind Config.Faults accepts, in planning order.
var allFaults = append(slices.Clone(FaultKinds), OptInFaults...)

// Config is one simulated run. Everything the run does is a function of
// Config: the same Config replays the same run, event for event.
type Config struct {
	// Seed seeds the one random source of the run. --seed.
	Seed uint64
	// Peers is the number of simulated peers (node.Node), 1..ring.MaxMembers
	// (and at most Partitions). Default 3.
	// --peers.
	Peers int
	// Tasks is the number of tasks the workload submits. Default 200 (300
	// for w3, the list of docs/design.md; ignored by sched, whose ten schedules
	// live for MaxSimTime less two minutes, and by idle, which submits
	// nothing for idleFor). --tasks.
	Tasks int
	// Workload is one of Workloads. Default "mixed". --workload.
	Workload string
	// Faults are the kinds of fault injected (FaultKinds), each a few times
	// at seeded times during the fault window. --faults.
	Faults []string
	// Partitions is the ring's partition count of every Node. Default 16
	// (production uses 256; fewer keeps the simulation fast). --partitions.
	Partitions int
	// Slots is the number of tasks each peer runs at once. Default 2.
	// --slots.
	Slots int
	// Replicas is R, the replica set size of each partition (fewer while
	// the mesh is smaller). Default 3. --replicas.
	Replicas int
	// Placement picks each partition's replicas after the primary
	// (ring.Config.Placement), the same on every node. DefaultConfig (and
	// so `needle simulate`) takes spread, what a new needled data dir
	// takes; the zero value is circle, what an older mesh keeps.
	// --placement.
	Placement ring.Placement
	// MaxSimTime bounds the virtual time of the run; reaching it is a
	// liveness violation. Default 10 min. --max-sim-time.
	MaxSimTime time.Duration
	// Liveness is how long after the later of its acknowledgement and the
	// end of the last fault a task may stay non-terminal (and a submission
	// unacknowledged) before the run reports a liveness violation. Default
	// 60 s. --liveness.
	Liveness time.Duration
	// Workers is the number of external workers polling each peer (0:
	// none; the workers workload defaults to 2). With workers, every other
	// task of the workload (all of the workers workload's) is of an
	// external handler they serve, the "worker" fault kills one,
	// stalls one past the TTL and makes one repeat its reports, and the
	// "busy" fault stops one peer's workers polling for a while
	// (workers.go, workerfaults.go). --workers.
	Workers int
	// Warmup is how long the mesh runs before the client's first request
	// (0: at once). A large mesh spends its first seconds building the
	// ring and moving replicas; a scale run that submits during them
	// measures the founder doing everything. --warmup.
	Warmup time.Duration
	// Kill, when set, stops the last peer for good at that time (kill -9
	// of a host that never comes back): the report says how long until
	// every other peer held it dead (DeadKnownAfter). --kill.
	Kill time.Duration
	// KillCount is how many peers Kill stops for good, the last ones (0:
	// one). With UnsafeRecover all their disks are declared lost; with
	// two, a partition that had both among its three voters recovers from
	// its survivor, and an acknowledged group only the two lost ones had
	// applied may be gone: the checker counts it apart (Report.LostUnsafe,
	// lostunsafe.go). --kill-count.
	KillCount int
	// KillSelect is which peers Kill stops: KillLast (the zero value) the
	// last KillCount; KillVoters every voter of the first partition that
	// has a learner, from Kill on (looked for every 10 ms, once every peer
	// runs): with UnsafeRecover the learner is that partition's only
	// survivor and recovers it, and partitions no replica survived are a
	// total loss (Report.LostTotal). Learners exist while the ring's
	// repair adds replicas: with StartJoin in the first seconds, with
	// StartTogether only after a peer's death (rarely: the run may end
	// with no kill, Report.Killed empty). Churn takes no peer out for good
	// with it. Not with KillCount. --kill-select.
	KillSelect KillSelect
	// UnsafeRecover, with Kill, declares the killed peer's disk lost for
	// good that long after the kill: the operator runs needle forget
	// --unsafe-recover on the first running peer (the others learn it
	// from its heartbeats), and the partitions the killed peer left
	// without a majority are recovered by their last voter (or, every
	// voter lost, a learner). A 2-peer mesh that loses a peer finishes its
	// work only so. --unsafe-recover.
	UnsafeRecover time.Duration

	// Start is how the mesh starts: StartTogether names every peer in
	// each one's initial membership (node.NodeConfig.Initial, needled
	// --initial-peers), StartJoin (the zero value) has n0 found the mesh
	// and every other peer join through it (needled --join). DefaultConfig
	// (and so `needle simulate`) takes together. --start.
	Start Start

	// Log, when set, receives every node's log records, each with its
	// virtual time ("vt"): replica changes, ring rebuilds, dead peers
	// (--log). It cannot change the run.
	Log *slog.Logger

	// Progress, when set, is called once per virtual second with the
	// run's progress (for a long run's display; it cannot change the run).
	Progress func(Progress)

	// quietCrash, for tests, makes the workload two groups of 30-second
	// tasks and crashes the owner of the first (losing what it did not
	// sync) at 20 s for 15 s, while its partitions are quiesced: the
	// replicas learn of its death from the membership alone
	// (TestQuiescedLeaderCrash).
	quietCrash bool
	// bugNoSync makes the driver skip WAL syncs: a seeded bug for tests,
	// which a crash must turn into a lost acknowledged group.
	bugNoSync bool
	// bugDigest makes n1's digest of every partition differ from the
	// state it holds: a seeded bug for tests, which invariant 5 must
	// report as replicas that disagree.
	bugDigest bool
	// bugWorkerFence makes the simulated hubs match a worker's report by
	// its task instead of its lease: a seeded bug for tests, which a
	// stalled worker's late report must turn into a violation of
	// invariant 6.
	bugWorkerFence bool
	// bugNoIsolation makes the simulated hubs hand a suspect (a task
	// workers kept dying with) to any worker, and anything to a worker
	// running one: a seeded bug for tests, which invariant 6 must catch.
	bugNoIsolation bool
	// bugNoBurial makes the simulated hubs take a restarted worker's new
	// instance without burying the leases of its old one: a seeded bug
	// for tests, which invariant 6 must catch.
	bugNoBurial bool
	// driverTrace, when set, gives each node's driver its Trace (by node
	// id): tests see through it that the simulator drives Ready through
	// node.Driver, early sends first.
	driverTrace func(id string) func(node.Duty, *node.Ready)
}

func (cfg *Config) trace(id string) func(node.Duty, *node.Ready) {
	if cfg.driverTrace == nil {
		return nil
	}
	return cfg.driverTrace(id)
}

// Progress is how far a run got.
type Progress struct {
	SimSeconds float64
	Tasks      int // tasks registered so far
	Terminal   int // tasks observed terminal so far
	Messages   uint64
}

// DefaultConfig returns the default scenario: 3 peers, 200 mixed tasks,
// every fault kind, 16 partitions, 2 slots.
func DefaultConfig() Config {
	return Config{
		Seed: 1, Peers: 3, Tasks: 200, Workload: "mixed", Faults: slices.Clone(FaultKinds),
		Partitions: 16, Slots: 2, MaxSimTime: 10 * time.Minute, Liveness: time.Minute,
		Placement: ring.PlacementSpread, Start: StartTogether,
	}
}

// Start is how a simulated mesh starts (Config.Start).
type Start uint8

const (
	// StartJoin: n0 founds the mesh, every other peer joins through it.
	StartJoin Start = iota
	// StartTogether: every peer starts with the others named in its
	// initial membership and bootstraps its own partitions.
	StartTogether
)

func (s Start) String() string {
	if s == StartTogether {
		return "together"
	}
	return "join"
}

// ParseStart parses a --start value.
func ParseStart(v string) (Start, error) {
	switch v {
	case "together":
		return StartTogether, nil
	case "join":
		return StartJoin, nil
	}
	return 0, fmt.Errorf("simulate: --start = %q; want together or join", v)
}

// KillSelect is which peers Config.Kill stops.
type KillSelect uint8

const (
	// KillLast: the last Config.KillCount peers.
	KillLast KillSelect = iota
	// KillVoters: every voter of a partition that has a learner on a
	// running peer, which survives.
	KillVoters
)

func (k KillSelect) String() string {
	if k == KillVoters {
		return "voters"
	}
	return "last"
}

// ParseKillSelect parses a --kill-select value.
func ParseKillSelect(v string) (KillSelect, error) {
	switch v {
	case "last":
		return KillLast, nil
	case "voters":
		return KillVoters, nil
	}
	return 0, fmt.Errorf("simulate: --kill-select = %q; want last or voters", v)
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Peers == 0 {
		c.Peers = d.Peers
	}
	if c.Workload == "" {
		c.Workload = d.Workload
	}
	if c.Tasks == 0 {
		c.Tasks = d.Tasks
		if c.Workload == "w3" {
			c.Tasks = 300
		}
	}
	if c.Partitions == 0 {
		c.Partitions = d.Partitions
	}
	if c.Workers == 0 && c.Workload == "workers" {
		c.Workers = 2
	}
	if c.Slots == 0 {
		c.Slots = d.Slots
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.MaxSimTime == 0 {
		c.MaxSimTime = d.MaxSimTime
		if c.Workload == "batch" {
			// The arrivals take about 10 s per task per slot (7.5 s of
			// slot time, retries and timeouts included, at 75% busy),
			// then the last groups' chains finish.
			c.MaxSimTime = max(d.MaxSimTime, time.Duration(c.Tasks)*time.Duration(12*time.Second)/time.Duration(max(c.Peers*c.Slots, 1))+time.Hour)
		}
	}
	if c.Liveness == 0 {
		c.Liveness = d.Liveness
		if c.Workload == "batch" {
			c.Liveness = 30 * time.Minute // a group's chain of minute-long retries
		}
	}
	return c
}

// Validate reports the first invalid field, naming its command-line flag.
// Zero values mean "default" and are valid.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Peers < 1 || c.Peers > ring.MaxMembers:
		return fmt.Errorf("simulate: --peers = %d; want 1..%d", c.Peers, ring.MaxMembers)
	case c.Tasks < 1 || c.Tasks > 1_000_000:
		return fmt.Errorf("simulate: --tasks = %d; want 1..1000000", c.Tasks)
	case !slices.Contains(Workloads, c.Workload):
		return fmt.Errorf("simulate: --workload = %q; want one of %s", c.Workload, strings.Join(Workloads, ", "))
	case c.Partitions < 1 || c.Partitions > 65536:
		return fmt.Errorf("simulate: --partitions = %d; want 1..65536", c.Partitions)
	case c.Peers > c.Partitions:
		return fmt.Errorf("simulate: --peers = %d is more than --partitions = %d", c.Peers, c.Partitions)
	case c.Slots < 1 || c.Slots > 1024:
		return fmt.Errorf("simulate: --slots = %d; want 1..1024", c.Slots)
	case c.Replicas < 1 || c.Replicas > 15:
		return fmt.Errorf("simulate: --replicas = %d; want 1..15", c.Replicas)
	case c.Placement > ring.PlacementSpread:
		return fmt.Errorf("simulate: --placement: %w", ring.ErrPlacement)
	case c.MaxSimTime < time.Second:
		return fmt.Errorf("simulate: --max-sim-time = %v; want >= 1s", c.MaxSimTime)
	case c.Kill < 0 || c.Kill > 0 && c.Peers < 2:
		return fmt.Errorf("simulate: --kill = %v with %d peers; want >= 0, and 2 peers or more with it", c.Kill, c.Peers)
	case c.KillCount < 0 || c.KillCount > 2 || c.KillCount > 1 && (c.Kill == 0 || c.Peers < c.KillCount+1):
		return fmt.Errorf("simulate: --kill-count = %d with --kill %v and %d peers; want 0..2, and --kill and more peers than it kills with it", c.KillCount, c.Kill, c.Peers)
	case c.KillSelect > KillVoters || c.KillSelect == KillVoters && (c.Kill == 0 || c.KillCount != 0):
		return fmt.Errorf("simulate: --kill-select = %v with --kill %v and --kill-count %d; want last or voters, and voters with --kill and without --kill-count (the partition's voters are the count)", c.KillSelect, c.Kill, c.KillCount)
	case c.UnsafeRecover < 0 || c.UnsafeRecover > 0 && c.Kill == 0:
		return fmt.Errorf("simulate: --unsafe-recover = %v with --kill %v; want >= 0, and --kill with it", c.UnsafeRecover, c.Kill)
	case c.Warmup < 0:
		return fmt.Errorf("simulate: --warmup = %v; want >= 0", c.Warmup)
	case c.Warmup >= c.MaxSimTime:
		return fmt.Errorf("simulate: --warmup = %v leaves no time for the workload; want less than --max-sim-time = %v", c.Warmup, c.MaxSimTime)
	case c.Liveness < time.Second:
		return fmt.Errorf("simulate: --liveness = %v; want >= 1s", c.Liveness)
	case c.Start > StartTogether:
		return fmt.Errorf("simulate: --start = %d; want together or join", c.Start)
	case c.Workers < 0 || c.Workers > 64:
		return fmt.Errorf("simulate: --workers = %d; want 0..64", c.Workers)
	}
	for _, f := range c.Faults {
		if !slices.Contains(allFaults, f) {
			return fmt.Errorf("simulate: --faults: unknown fault %q; want some of %s", f, strings.Join(allFaults, ","))
		}
	}
	if c.Workload == "w4" && c.Peers < 2 {
		return errors.New("simulate: --workload w4 kills a peer mid-run: want --peers >= 2")
	}
	return nil
}

// has reports whether fault kind f is enabled.
func (c Config) has(f string) bool { return slices.Contains(c.Faults, f) }

// String prints the options in a stable order, as the first line of every
// run's output.
func (c Config) String() string {
	c = c.withDefaults()
	s := fmt.Sprintf("seed=%d peers=%d tasks=%d workload=%s faults=%s partitions=%d slots=%d replicas=%d placement=%v max-sim-time=%v liveness=%v",
		c.Seed, c.Peers, c.Tasks, c.Workload, strings.Join(c.Faults, ","), c.Partitions, c.Slots, c.Replicas, c.Placement, c.MaxSimTime, c.Liveness)
	if c.Warmup > 0 {
		s += fmt.Sprintf(" warmup=%v", c.Warmup)
	}
	if c.Kill > 0 {
		s += fmt.Sprintf(" kill=%v", c.Kill)
	}
	if c.KillCount > 1 {
		s += fmt.Sprintf(" kill-count=%d", c.KillCount)
	}
	if c.KillSelect != KillLast {
		s += " kill-select=" + c.KillSelect.String()
	}
	if c.UnsafeRecover > 0 {
		s += fmt.Sprintf(" unsafe-recover=%v", c.UnsafeRecover)
	}
	if c.Workers > 0 {
		s += fmt.Sprintf(" workers=%d", c.Workers)
	}
	s += " start=" + c.Start.String()
	return s
}

// ReplayCommand returns the command line that replays this run exactly.
func (c Config) ReplayCommand() string {
	c = c.withDefaults()
	faults := strings.Join(c.Faults, ",")
	if faults == "" {
		faults = `""`
	}
	cmd := fmt.Sprintf("needle simulate --seed %d --peers %d --tasks %d --workload %s --faults %s --partitions %d --slots %d --replicas %d --placement %v --max-sim-time %v --liveness %v",
		c.Seed, c.Peers, c.Tasks, c.Workload, faults, c.Partitions, c.Slots, c.Replicas, c.Placement, c.MaxSimTime, c.Liveness)
	if c.Warmup > 0 {
		cmd += fmt.Sprintf(" --warmup %v", c.Warmup)
	}
	if c.Kill > 0 {
		cmd += fmt.Sprintf(" --kill %v", c.Kill)
	}
	if c.KillCount > 1 {
		cmd += fmt.Sprintf(" --kill-count %d", c.KillCount)
	}
	if c.KillSelect != KillLast {
		cmd += " --kill-select " + c.KillSelect.String()
	}
	if c.UnsafeRecover > 0 {
		cmd += fmt.Sprintf(" --unsafe-recover %v", c.UnsafeRecover)
	}
	if c.Workers > 0 {
		cmd += fmt.Sprintf(" --workers %d", c.Workers)
	}
	return cmd + " --start " + c.Start.String()
}
