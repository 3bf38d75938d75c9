package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// Workload names, in the order Run runs them.
const (
	W1 = "w1" // throughput: no-op echo tasks in parallel groups
	W2 = "w2" // latency: sequential single tasks, submit then wait
	W3 = "w3" // skew: one parallel group of sleep tasks on one owner
	W4 = "w4" // failover: kill -9 one of three peers mid-run
)

// AllWorkloads lists every workload Run knows.
var AllWorkloads = []string{W1, W2, W3, W4, WS, WP, WL, WG, W1Go, W1Py, W2Go, W4Go, WI}

// DefaultWorkloads are the workloads run when none are named: all but WL,
// which loads a million tasks first, WG, and W1Go, W1Py, W2Go and W4Go, which
// start worker processes (W1Py needs python3).
var DefaultWorkloads = []string{W1, W2, W3, W4, WS, WP}

// Config says what to run. Every zero numeric field takes the default of
// DefaultConfig; Validate reports the rest with the CLI flag's name.
type Config struct {
	// Needled is the path of the needled binary. Required unless Start is set.
	Needled string
	// Peers is the number of needled processes (default 3). W4 needs >= 3.
	Peers int
	// Slots is each peer's --slots (default 2).
	Slots int
	// Workloads to run, a subset of AllWorkloads (default
	// DefaultWorkloads), run in the order of AllWorkloads.
	Workloads []string
	// Reps is the number of repetitions of each workload (default 3); each
	// repetition gets a fresh cluster.
	Reps int
	// W1Tasks is the number of echo tasks of W1 (default 100000: long enough that ramp-up and tail do not dominate).
	W1Tasks int
	// W1Batch is the number of tasks per W1 group (default 1000).
	W1Batch int
	// W1For, when set, runs W1 for that long at full load instead of
	// W1Tasks tasks once: W1Tasks is then the tasks kept in flight (a new
	// group goes as each one finishes), and the peers keep finished groups
	// for W1Retention only, so that their memory holds what is in flight,
	// not everything the run ever submitted.
	W1For time.Duration
	// W2Tasks is the number of sequential tasks of W2 (default 500).
	W2Tasks int
	// W3File is a file of W3 durations in ms, one per line; empty means
	// the W3 list of docs/design.md, embedded.
	W3File string
	// W4Tasks is the number of 50 ms sleep tasks of W4 (default 300).
	W4Tasks int
	// W4Kill is how many peers W4 kills (default 1): peers 1..W4Kill, one
	// at a time, each forgotten and the mesh settled before the next.
	W4Kill int
	// IdleFor is how long WI measures the idle mesh (default 30 s).
	IdleFor time.Duration
	// WPItems is the number of items of the WP pipeline (default 10000),
	// and WPConcurrency each stage's in-flight bound (default 256).
	WPItems, WPConcurrency int
	// WLTasks is the number of finished tasks WL loads the mesh with
	// (default 1,000,000), WLFailed how many of them FAILED (default
	// 10,000; at most WLTasks).
	WLTasks, WLFailed int
	// GoWorker is the command line of a W1Go, W2Go or W4Go worker process, a Go program
	// that calls ServeWorkerFromEnv (the CLI: its own binary).
	GoWorker []string
	// Python is the python3 binary of W1Py's workers (default "python3"),
	// PythonClient the directory of the Python client package
	// (clients/python; empty: the installed one).
	Python, PythonClient string
	// WorkerSlots is how many tasks each worker process runs at once
	// (default 2), WorkerPrefetch how many more it may hold, leased ahead
	// (default 256; -1 for none).
	WorkerSlots, WorkerPrefetch int
	// Steal is each peer's --steal; false passes --steal=false.
	// DefaultConfig sets it to true.
	Steal bool
	// PeerProcs, when set, is each peer's GOMAXPROCS (0: the Go
	// runtime's default, every core). Peers that share a machine can be
	// given their share of its cores this way; docs/performance.md has
	// what 3 peers at GOMAXPROCS 1 on 2 cores gain and lose.
	PeerProcs int
	// DataDir is where each cluster creates its peers' data directories
	// (removed on Close); empty means os.TempDir(). Put it on the disk you
	// mean to measure: on a tmpfs an fsync costs nothing.
	DataDir string
	// ExtraArgs are appended to every needled command line.
	ExtraArgs []string
	// ReadyTimeout bounds the wait for a peer's /healthz and for the mesh
	// to form (default 30 s).
	ReadyTimeout time.Duration
	// WaitTimeout bounds the wait for one workload repetition's tasks to
	// finish (default 5 min).
	WaitTimeout time.Duration
	// JSON receives the JSON report when not nil.
	JSON io.Writer
	// Out receives the table when not nil.
	Out io.Writer
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
	// Start launches one peer; nil runs Needled as a child process
	// (ExecStart). Tests set it to start in-process fakes.
	Start StartFunc
}

// Defaults used by DefaultConfig and for zero fields.
const (
	DefaultPeers        = 3
	DefaultSlots        = 2
	DefaultReps         = 3
	DefaultW1Tasks      = 100000
	DefaultW1Batch      = 1000
	DefaultW2Tasks      = 500
	DefaultW4Tasks      = 300
	DefaultReadyTimeout = 30 * time.Second
	DefaultWaitTimeout  = 5 * time.Minute
	// W1Retention is the peers' --retention under W1For.
	W1Retention = 30 * time.Second
)

// DefaultConfig returns a Config with every default set; the caller still
// sets Needled (or Start).
func DefaultConfig() Config {
	return Config{
		Peers: DefaultPeers, Slots: DefaultSlots, Reps: DefaultReps,
		Workloads: slices.Clone(DefaultWorkloads),
		W1Tasks:   DefaultW1Tasks, W1Batch: DefaultW1Batch,
		W2Tasks: DefaultW2Tasks, W4Tasks: DefaultW4Tasks, Steal: true,
		ReadyTimeout: DefaultReadyTimeout, WaitTimeout: DefaultWaitTimeout,
	}
}

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	def := DefaultConfig()
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&cfg.Peers, def.Peers)
	setInt(&cfg.Slots, def.Slots)
	setInt(&cfg.Reps, def.Reps)
	setInt(&cfg.W1Tasks, def.W1Tasks)
	setInt(&cfg.W1Batch, def.W1Batch)
	setInt(&cfg.W2Tasks, def.W2Tasks)
	setInt(&cfg.W4Tasks, def.W4Tasks)
	setInt(&cfg.W4Kill, 1)
	if cfg.IdleFor == 0 {
		cfg.IdleFor = DefaultIdleFor
	}
	setInt(&cfg.WPItems, DefaultWPItems)
	setInt(&cfg.WPConcurrency, DefaultWPConcurrency)
	setInt(&cfg.WLTasks, DefaultWLTasks)
	setInt(&cfg.WorkerSlots, DefaultWorkerSlots)
	setInt(&cfg.WorkerPrefetch, DefaultWorkerPrefetch)
	cfg.WorkerPrefetch = max(cfg.WorkerPrefetch, 0)
	setInt(&cfg.WLFailed, min(DefaultWLFailed, cfg.WLTasks))
	if len(cfg.Workloads) == 0 {
		cfg.Workloads = def.Workloads
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = def.ReadyTimeout
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = def.WaitTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Validate reports every invalid field, naming the CLI flag that sets it.
// Zero numeric fields are valid: they take their defaults.
func (cfg Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("bench: "+format, args...))
	}
	if cfg.Needled == "" && cfg.Start == nil {
		bad("--needled: path of the needled binary is required")
	}
	for _, f := range []struct {
		flag string
		v    int
	}{
		{"--peers", cfg.Peers}, {"--slots", cfg.Slots}, {"--reps", cfg.Reps}, {"--peer-procs", cfg.PeerProcs},
		{"--w1-tasks", cfg.W1Tasks}, {"--w1-batch", cfg.W1Batch},
		{"--w2-tasks", cfg.W2Tasks}, {"--w4-tasks", cfg.W4Tasks}, {"--w4-kill", cfg.W4Kill},
		{"--wp-items", cfg.WPItems}, {"--wp-concurrency", cfg.WPConcurrency},
		{"--wl-tasks", cfg.WLTasks}, {"--wl-failed", cfg.WLFailed}, {"--worker-slots", cfg.WorkerSlots},
	} {
		if f.v < 0 {
			bad("%s must be >= 1, got %d", f.flag, f.v)
		}
	}
	if cfg.WLFailed > 0 && cfg.WLTasks > 0 && cfg.WLFailed > cfg.WLTasks {
		bad("--wl-failed (%d) must be <= --wl-tasks (%d)", cfg.WLFailed, cfg.WLTasks)
	}
	peers := cfg.Peers
	if peers == 0 {
		peers = DefaultPeers
	}
	if cfg.W4Kill > 1 && cfg.W4Kill > peers-2 {
		bad("--w4-kill (%d) must leave at least 2 of --peers (%d) running", cfg.W4Kill, peers)
	}
	if cfg.IdleFor < 0 {
		bad("--idle-for must not be negative")
	}
	if cfg.W1For < 0 {
		bad("--w1-for must not be negative")
	}
	if cfg.Peers > 64 {
		bad("--peers must be <= 64 on one machine, got %d", cfg.Peers)
	}
	for _, w := range cfg.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			bad("--workloads: unknown workload %q (want a subset of w1,w2,w3,w4,ws,wp,wl,wg,w1go,w1py,w2go,w4go,wi)", w)
		}
	}
	if cfg.ReadyTimeout < 0 || cfg.WaitTimeout < 0 {
		bad("timeouts must not be negative")
	}
	return errors.Join(errs...)
}

// selected returns the chosen workloads in the order of AllWorkloads, once
// each.
func (cfg Config) selected() []string {
	var ws []string
	for _, w := range AllWorkloads {
		if slices.Contains(cfg.Workloads, w) {
			ws = append(ws, w)
		}
	}
	return ws
}
