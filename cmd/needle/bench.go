package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/needle-mesh/needle/bench"
	"github.com/needle-mesh/needle/internal/flagnear"
)

// BenchCommand runs the real-process benchmarks W1-W4 against N needled
// peers on loopback (package bench).
type BenchCommand struct{}

// Usage returns the help text of `needle bench`.
func (BenchCommand) Usage() string {
	return strings.TrimSpace(`
usage: needle bench [flags]

Starts --peers needled processes on loopback (fresh data directories and free
ports for every repetition), runs the workloads through their HTTP API, checks
every result, and prints the median and [min - max] over --reps repetitions.
Exits non-zero when a result is wrong or a task is lost.

  w1  throughput: --w1-tasks echo tasks in parallel groups of --w1-batch
  w2  latency: --w2-tasks single tasks, submit then wait; p50/p99
  w3  skew: one parallel group of 300 sleep tasks; makespan / lower bound
  w4  failover: --w4-tasks 50 ms sleep tasks, kill -9 peer 1 a third through;
      lost (must be 0), duplicates, time to finish (needs --peers >= 3);
      with --w4-kill K, peers 1..K one at a time, each forgotten by the
      others (needle forget) and the mesh settled before the next
  ws  schedule firing accuracy: an every-1s schedule for 20 s
  wp  streaming pipeline: --wp-items items through 3 stages of 1 ms sleep
      tasks (one group, one owner); makespan / lower bound
  wl  lists on a loaded mesh (not run by default): --wl-tasks finished tasks,
      --wl-failed of them FAILED outside the last peer's partitions; asked of
      that peer, the first and the next page of 100 FAILED tasks (p50, p99),
      and W1 alone vs W1 while a client pages the failures every second
  wg  logs followed (not run by default): 20 exec tasks print their clock;
      the last peer follows each log as needle logs -f does; line p50/p99
  w1go, w1py  W1 through external workers (not run by default): one Go
      (package client) or Python (clients/python) worker process per peer,
      --worker-slots tasks at a time each; tasks/s
  w2go  W2 through one Go worker process per peer (not run by default):
      p50/p99, to compare with w2 in the same run
  w4go  W4 with a worker killed, not a peer (not run by default): W4's
      tasks through one Go worker process per peer, kill -9 of peer 1's
      worker a third through; lost (must be 0), rerun delay p99 (the
      peers' --worker-ttl, 10 s, plus detection; needs --peers >= 2)
  wi  idle mesh (not run by default): nothing submitted; each peer's CPU
      over --idle-for, % of one core (median and max over the peers)

flags:
  --needled PATH     needled binary (default: next to needle, else in PATH)
  --peers N          peers (default 3)
  --slots N          --slots of each peer (default 2)
  --workloads LIST   comma-separated subset of w1,w2,w3,w4,ws,wp,wl,wg,
                     w1go,w1py,w2go,w4go,wi (default w1,w2,w3,w4,ws,wp)
  --reps N           repetitions of each workload (default 3)
  --w1-tasks N       W1 tasks (default 100000)
  --w1-batch N       W1 tasks per group (default 1000)
  --w1-for D         run W1 for D at full load instead: --w1-tasks in flight,
                     a new group as each finishes; the peers keep finished
                     groups 30 s (--retention), so memory holds what is in
                     flight. Peer deaths and abdications over D are false
                     failovers
  --w2-tasks N       W2 tasks (default 500)
  --w4-tasks N       W4 tasks (default 300)
  --w4-kill K        peers W4 kills, one at a time (default 1; leaves >= 2)
  --idle-for D       how long wi measures (default 30s)
  --ready-timeout D  how long to wait for the mesh to form and settle before
                     measuring (default 30s; a large mesh needs more)
  --wp-items N       WP items (default 10000)
  --wp-concurrency N WP in-flight items per stage (default 256)
  --wl-tasks N       WL finished tasks (default 1000000)
  --wl-failed N      WL FAILED tasks among them (default 10000)
  --worker-slots N   tasks each w1go/w1py/w2go/w4go worker runs at once (default 2)
  --worker-prefetch N  tasks each worker holds beyond them, leased ahead
                     (default 256; -1 for none)
  --python PATH      python3 of the w1py workers (default python3)
  --python-client DIR  the Python client package (default: clients/python
                     beside the binary's directory or the current one, else
                     the installed needle_client)
  --steal            work stealing on the peers (default true; --steal=false)
  --peer-procs N     GOMAXPROCS of each peer (default: the Go runtime's, every
                     core); peers sharing a machine can get their share
  --data-dir DIR     parent of the peers' data directories (default: the
                     system temp dir; on a tmpfs, fsync is free)
  --json FILE        also write the JSON report to FILE ("-" for stdout)
  -v                 log progress to stderr
`) + "\n"
}

// Run parses args and runs the benchmarks.
func (c BenchCommand) Run(ctx context.Context, args []string) error {
	cfg, jsonPath, verbose, err := c.parse(args)
	if err != nil {
		return err
	}
	if cfg.Needled, err = findNeedled(cfg.Needled); err != nil {
		return err
	}
	if self, err := os.Executable(); err == nil {
		cfg.GoWorker = []string{self} // it serves as a worker with bench.WorkerEnv set
		if cfg.PythonClient == "" {
			cfg.PythonClient = findPythonClient(filepath.Dir(self))
		}
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Out = os.Stdout
	if jsonPath != "" {
		w, closeJSON, err := createJSON(jsonPath)
		if err != nil {
			return err
		}
		defer closeJSON()
		cfg.JSON = w
	}
	_, err = bench.Run(ctx, cfg)
	return err
}

// parse reads the flags into a bench.Config.
func (c BenchCommand) parse(args []string) (cfg bench.Config, jsonPath string, verbose bool, err error) {
	cfg = bench.DefaultConfig()
	fs := flag.NewFlagSet("needle bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Needled, "needled", "", "")
	fs.IntVar(&cfg.Peers, "peers", cfg.Peers, "")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "")
	workloads := fs.String("workloads", strings.Join(cfg.Workloads, ","), "")
	fs.IntVar(&cfg.Reps, "reps", cfg.Reps, "")
	fs.IntVar(&cfg.W1Tasks, "w1-tasks", cfg.W1Tasks, "")
	fs.IntVar(&cfg.W1Batch, "w1-batch", cfg.W1Batch, "")
	fs.DurationVar(&cfg.W1For, "w1-for", 0, "")
	fs.IntVar(&cfg.W2Tasks, "w2-tasks", cfg.W2Tasks, "")
	fs.IntVar(&cfg.W4Tasks, "w4-tasks", cfg.W4Tasks, "")
	fs.IntVar(&cfg.W4Kill, "w4-kill", 1, "")
	fs.DurationVar(&cfg.IdleFor, "idle-for", bench.DefaultIdleFor, "")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", bench.DefaultReadyTimeout, "")
	fs.IntVar(&cfg.WPItems, "wp-items", cfg.WPItems, "")
	fs.IntVar(&cfg.WPConcurrency, "wp-concurrency", cfg.WPConcurrency, "")
	fs.IntVar(&cfg.WLTasks, "wl-tasks", cfg.WLTasks, "")
	fs.IntVar(&cfg.WLFailed, "wl-failed", cfg.WLFailed, "")
	fs.IntVar(&cfg.WorkerSlots, "worker-slots", bench.DefaultWorkerSlots, "")
	fs.IntVar(&cfg.WorkerPrefetch, "worker-prefetch", bench.DefaultWorkerPrefetch, "")
	fs.StringVar(&cfg.Python, "python", "", "")
	fs.StringVar(&cfg.PythonClient, "python-client", "", "")
	fs.BoolVar(&cfg.Steal, "steal", cfg.Steal, "")
	fs.IntVar(&cfg.PeerProcs, "peer-procs", 0, "")
	fs.StringVar(&jsonPath, "json", "", "")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "")
	fs.BoolVar(&verbose, "v", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, "", false, err // the caller prints Usage
		}
		return cfg, "", false, fmt.Errorf("%w\n\n%s", flagnear.Explain(fs, err), c.Usage())
	}
	if fs.NArg() > 0 {
		return cfg, "", false, fmt.Errorf("unexpected argument %q\n\n%s", fs.Arg(0), c.Usage())
	}
	cfg.Workloads = splitList(*workloads)
	if err := positive(fs); err != nil {
		return cfg, "", false, fmt.Errorf("%w\n\n%s", err, c.Usage())
	}
	check := cfg
	if check.Needled == "" {
		check.Needled = "needled" // found later; validate the rest now
	}
	if err := check.Validate(); err != nil {
		return cfg, "", false, fmt.Errorf("%w\n\n%s", err, c.Usage())
	}
	return cfg, jsonPath, verbose, nil
}

// positive checks that the numeric flags set on the command line are >= 1
// (bench.Config reads 0 as "default").
func positive(fs *flag.FlagSet) error {
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "peers", "slots", "peer-procs", "reps", "w1-tasks", "w1-batch", "w2-tasks", "w4-tasks", "w4-kill", "wp-items", "wp-concurrency",
			"wl-tasks", "wl-failed", "worker-slots":
			if g, ok := f.Value.(flag.Getter); ok && g.Get().(int) < 1 {
				errs = append(errs, fmt.Errorf("--%s must be >= 1, got %s", f.Name, f.Value))
			}
		}
	})
	return errors.Join(errs...)
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// findNeedled returns path, else the needled next to this binary, else the
// one in PATH.
func findNeedled(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("--needled: %w", err)
		}
		return path, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "needled")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("needled")
	if err != nil {
		return "", fmt.Errorf("no needled next to needle or in PATH (run make build, or pass --needled PATH): %w", err)
	}
	return p, nil
}

// findPythonClient returns clients/python beside the directory of the
// binary (bin/needle in a checkout) or in the current directory, else ""
// (the installed needle_client).
func findPythonClient(binDir string) string {
	for _, dir := range []string{filepath.Join(binDir, "..", "clients", "python"), filepath.Join("clients", "python")} {
		if st, err := os.Stat(filepath.Join(dir, "needle_client")); err == nil && st.IsDir() {
			return dir
		}
	}
	return ""
}

// createJSON opens the JSON report file; "-" is stdout.
func createJSON(path string) (io.Writer, func() error, error) {
	if path == "-" {
		return os.Stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--json: %w", err)
	}
	return f, f.Close, nil
}
