package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/internal/flagnear"
	"github.com/needle-mesh/needle/internal/hugepages"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/simulate"
)

// SimulateCommand runs the deterministic simulator: many node.Nodes on a
// virtual clock and network, with faults, checking the guarantees.
type SimulateCommand struct{}

// Usage returns the command's help text.
func (SimulateCommand) Usage() string {
	return `usage: needle simulate [--seed N | --seeds K] [flags]

Runs needle's core (node.Node, the code needled ships) as a mesh of
simulated peers on a virtual clock and network, injects faults, and checks
the guarantees after every step. Prints the seed and options first, then
the report. Exits non-zero when an invariant broke, with the command that
replays the failing seed exactly.

  --seed N          run seed N (default 1)
  --seeds K         run seeds N..N+K-1 (N from --seed) and print totals
  --parallel P      runs at once with --seeds (default GOMAXPROCS)
  --peers N         simulated peers (default 3)
  --tasks N         tasks submitted (default 200; w3: 300)
  --workload W      w1 | w2 | w3 | w4 | mixed | sched | placement | batch |
                    idle | workers | gated (default mixed). batch is mixed's
                    groups with the run times of batch jobs: seconds to a
                    minute, 90 s timeouts; idle submits nothing for 5
                    minutes (what an idle mesh costs); workers is tasks for
                    external workers only; gated is mixed with half its
                    parallel, dag and staged groups bounded to 1-4 tasks
                    in flight (a group's concurrency)
  --faults a,b      partition,crash,drop,dup,reorder,pause,skew,churn,slow,
                    worker,busy; opt-in: forge (a keyed host's forged grants
                    and outcomes), poison, restart and hang (default all
                    but the opt-in ones; "" for none). A third of the partitions
                    are one-way. churn stops and restarts peers and, with
                    more peers than replicas, has one join late and (with
                    --replicas >= 3) one leave for good, then forgotten.
                    slow makes a peer's
                    handlers 2-10x slower and its messages 5-100 ms later;
                    worker (with --workers) kills an external worker,
                    stalls one past the TTL and makes one repeat reports;
                    busy (with --workers) stops one peer's workers
                    polling for 3.5-5.5 s while their tasks wait;
                    poison (with --workers) makes two tasks kill every
                    worker that runs them (isolated, then failed at the
                    crash limit); restart (with --workers) restarts three
                    workers as another instance and stops two gracefully
                    (they release their leases); hang (with --workers)
                    hangs one worker's handlers for 15-18 s, past their
                    leases' expiry
  --partitions N    ring partitions (default 16)
  --slots N         task slots per peer (default 2)
  --replicas N      replicas per partition (default 3)
  --placement P     replicas after the primary: spread (default, as a new
                    needled data dir; evens leadership at hundreds of
                    peers) or circle (a mesh an earlier release founded)
  --start S         together (default): every peer starts with all the
                    others as its initial membership (needled
                    --initial-peers) and bootstraps its own partitions;
                    join: n0 founds the mesh and the others join through
                    it (needled --join), the founder handing partitions out
  --max-sim-time D  virtual time bound (default 10m; batch: 1h plus
                    12 s x tasks / all slots)
  --liveness D      bound for finishing after faults heal (default 1m;
                    batch: 30m)
  --warmup D        run the mesh this long before the first request (default 0);
                    the report gives the time after it apart (how fast a
                    formed mesh simulates) and its messages per peer
  --kill D          stop the last peer for good at D; the report says when
                    every other peer held it dead (default 0: none)
  --kill-count N    with --kill: stop the last N peers (1 or 2; default 1)
  --kill-select S   with --kill: last (default: the last --kill-count
                    peers) or voters: from --kill on, once every peer
                    runs and a partition has a learner, stop every voter
                    of the first such partition, leaving the learner its
                    only survivor (with --unsafe-recover it recovers the
                    partition, losing what it had not received; a
                    partition no replica survived is reported lost_total)
  --unsafe-recover D  with --kill: D after the kill, the operator declares
                    the killed peers' disks lost (needle forget
                    --unsafe-recover on the first running peer), and the
                    partitions they left without a majority recover from
                    their last voter (default 0: never)
  --workers N       external workers polling each peer (default 0); every
                    other task is then of a handler they serve
  --json            print JSON (one object per seed, or the totals)
  --cpuprofile F    write a CPU profile of the run(s) to F (go tool pprof)
  --memprofile F    write a heap profile to F near the heap's peak (one seed;
                    go tool pprof -sample_index=inuse_space)
  --progress        print progress to stderr every 10 s (one seed)
  --log LEVEL       print the nodes' logs (debug, info, warn) to stderr,
                    each record with its virtual time vt (one seed)
`
}

// Run runs the command.
func (c SimulateCommand) Run(ctx context.Context, args []string) error {
	tuneSimGC() // simgc.go
	// A run's heap only grows: 2 MiB pages fault once where 4 KiB pages
	// faulted 512 times (GODEBUG=disablethp=1 turns it off).
	hugepages.Enable(0)
	return c.run(ctx, args, os.Stdout)
}

func (SimulateCommand) run(ctx context.Context, args []string, out io.Writer) error {
	cfg, seeds, parallel, asJSON, err := parseSimulate(args)
	if err == nil {
		err = cfg.Validate()
	}
	if errors.Is(err, flag.ErrHelp) {
		return err // the usage, exit 0
	}
	if err != nil {
		return &usageError{msg: strings.TrimPrefix(err.Error(), "simulate: ")} // exit 2, like every command's bad flags
	}
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if seeds == 0 {
		fmt.Fprintf(out, "simulate %s\n", cfg)
		if simProgress {
			cfg.Progress = progressPrinter(os.Stderr)
		}
		if memProfile != "" {
			cfg.Progress = heapProfiler(memProfile, cfg.Progress)
		}

		cpu0, _ := processCPU()
		r, err := simulate.Run(cfg)
		if err != nil {
			return err
		}
		printReport(out, &r, asJSON)
		if cpu1, ok := processCPU(); ok && !asJSON {
			// The run's CPU, without the process's start (tens of ms):
			// what the idle workload's speed is measured by.
			cpu := (cpu1 - cpu0).Seconds()
			fmt.Fprintf(out, "cpu %.3fs (%.0fx real time per CPU second)\n", cpu, r.SimSeconds/max(cpu, 1e-9))
		}
		return failure(cfg, &r)
	}
	fmt.Fprintf(out, "simulate seeds %d..%d %s\n", cfg.Seed, cfg.Seed+uint64(seeds)-1, cfg)
	return runSeeds(ctx, out, cfg, seeds, parallel, asJSON)
}

func parseSimulate(args []string) (cfg simulate.Config, seeds, parallel int, asJSON bool, err error) {
	cfg = simulate.DefaultConfig()
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Uint64Var(&cfg.Seed, "seed", 1, "")
	fs.IntVar(&seeds, "seeds", 0, "")
	fs.IntVar(&parallel, "parallel", runtime.GOMAXPROCS(0), "")
	fs.IntVar(&cfg.Peers, "peers", cfg.Peers, "")
	fs.IntVar(&cfg.Tasks, "tasks", 0, "")
	fs.StringVar(&cfg.Workload, "workload", cfg.Workload, "")
	faults := fs.String("faults", strings.Join(cfg.Faults, ","), "")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "")
	fs.IntVar(&cfg.Replicas, "replicas", 3, "")
	fs.Func("placement", "", func(s string) (err error) {
		cfg.Placement, err = ring.ParsePlacement(s)
		return err
	})
	fs.Func("start", "", func(s string) (err error) {
		cfg.Start, err = simulate.ParseStart(s)
		return err
	})
	fs.DurationVar(&cfg.MaxSimTime, "max-sim-time", cfg.MaxSimTime, "")
	fs.DurationVar(&cfg.Liveness, "liveness", cfg.Liveness, "")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "")
	fs.DurationVar(&cfg.Kill, "kill", 0, "")
	fs.IntVar(&cfg.KillCount, "kill-count", 0, "")
	fs.Func("kill-select", "", func(s string) (err error) {
		cfg.KillSelect, err = simulate.ParseKillSelect(s)
		return err
	})
	fs.DurationVar(&cfg.UnsafeRecover, "unsafe-recover", 0, "")
	fs.IntVar(&cfg.Workers, "workers", 0, "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "")
	fs.StringVar(&memProfile, "memprofile", "", "")
	fs.BoolVar(&simProgress, "progress", false, "")
	fs.StringVar(&simLog, "log", "", "")
	if err = fs.Parse(args); err != nil {
		return cfg, 0, 0, false, fmt.Errorf("%w\n%s", flagnear.Explain(fs, err), SimulateCommand{}.Usage())
	}
	if fs.NArg() > 0 {
		return cfg, 0, 0, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// Unset bounds take the workload's defaults (batch's are longer).
	if !flagSet(fs, "max-sim-time") {
		cfg.MaxSimTime = 0
	}
	if !flagSet(fs, "liveness") {
		cfg.Liveness = 0
	}
	if cfg.Tasks == 0 && flagSet(fs, "tasks") {
		return cfg, 0, 0, false, errors.New("--tasks = 0; want 1..1000000 (omit it for the workload's default)")
	}
	cfg.Faults = nil
	for f := range strings.SplitSeq(*faults, ",") {
		if f = strings.TrimSpace(f); f != "" && f != `""` {
			cfg.Faults = append(cfg.Faults, f)
		}
	}
	if seeds < 0 || parallel < 1 {
		return cfg, 0, 0, false, errors.New("--seeds must be >= 0 and --parallel >= 1")
	}
	if simLog != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(simLog)); err != nil {
			return cfg, 0, 0, false, fmt.Errorf("--log: %q is not debug, info, warn or error", simLog)
		}
		if seeds > 0 {
			return cfg, 0, 0, false, errors.New("--log prints one seed's run: drop --seeds")
		}
		// Records carry the virtual time (vt); the wall clock's is noise.
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level,
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
	}
	return cfg, seeds, parallel, asJSON, nil
}

// cpuProfile is --cpuprofile: where to write a CPU profile ("" for none);
// simProgress is --progress; simLog is --log.
var (
	cpuProfile  string
	memProfile  string
	simProgress bool
	simLog      string
)

// progressPrinter prints a run's progress to w, at most every 10 s of wall
// time, with the heap in use (a long scale run's display).
func progressPrinter(w io.Writer) func(simulate.Progress) {
	start := time.Now()
	last := start
	return func(p simulate.Progress) {
		if time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(w, "progress: wall %.0fs sim %.0fs tasks %d terminal %d messages %d heap %.1f GiB\n",
			time.Since(start).Seconds(), p.SimSeconds, p.Tasks, p.Terminal, p.Messages, float64(ms.HeapInuse)/(1<<30))
	}
}

// heapProfiler returns a Progress hook that calls next (if any) and writes
// a heap profile to path whenever the heap in use is a tenth above the
// largest live heap seen so far, collected first: at the end, the profile
// of about the run's peak of live heap.
// Errors are printed once to stderr; the run goes on.
func heapProfiler(path string, next func(simulate.Progress)) func(simulate.Progress) {
	var peak uint64
	failed := false
	return func(p simulate.Progress) {
		if next != nil {
			next(p)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if failed || ms.HeapInuse < peak+peak/10 {
			return
		}
		// A heap profile is of the last collection, which may be two
		// cycles old: collect first, and keep what is live as the peak.
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse < peak {
			return
		}
		peak = ms.HeapInuse
		f, err := os.Create(path)
		if err == nil {
			err = pprof.Lookup("heap").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			failed = true
			fmt.Fprintf(os.Stderr, "--memprofile: %v\n", err)
		}
	}
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func printReport(out io.Writer, r *simulate.Report, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintf(out, "%s\n", b)
		return
	}
	fmt.Fprint(out, r.Text())
}

// failure turns a broken invariant into the command's error, with the
// command that replays it.
func failure(cfg simulate.Config, r *simulate.Report) error {
	if !r.Failed() {
		return nil
	}
	cfg.Seed = r.Seed
	return fmt.Errorf("%s\nreplay: %s", r.Violations[0], cfg.ReplayCommand())
}

// runSeeds runs seeds in parallel (each run is independent and
// deterministic) and prints the failing ones and the totals in seed order.
func runSeeds(ctx context.Context, out io.Writer, cfg simulate.Config, seeds, parallel int, asJSON bool) error {
	reports := make([]simulate.Report, seeds)
	errs := make([]error, seeds)
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(parallel, seeds) {
		wg.Go(func() {
			for i := range next {
				c := cfg
				c.Seed = cfg.Seed + uint64(i)
				reports[i], errs[i] = simulate.Run(c)
			}
		})
	}
	for i := 0; i < seeds && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	var tot simulate.Totals
	var first error
	for i := range reports {
		if errs[i] != nil {
			return errs[i]
		}
		if ctx.Err() != nil && reports[i].Hash == "" {
			continue
		}
		tot.Add(&reports[i])
		if reports[i].Failed() && !asJSON {
			fmt.Fprintf(out, "FAIL %s\n", reports[i].Violations[0])
		}
		if first == nil {
			first = failure(cfg, &reports[i])
		}
	}
	printTotals(out, &tot, asJSON)
	if first != nil {
		return fmt.Errorf("%d of %d seeds failed; first: %w", len(tot.FailingSeeds), tot.Seeds, first)
	}
	return ctx.Err()
}

func printTotals(out io.Writer, t *simulate.Totals, asJSON bool) {
	if t.FailingSeeds == nil {
		t.FailingSeeds = []uint64{}
	}
	if asJSON {
		b, _ := json.Marshal(t)
		fmt.Fprintf(out, "%s\n", b)
		return
	}
	fmt.Fprintf(out, "seeds %d failing %d %v\nlost %d double_accepted %d duplicate_executions %d steals %d messages %d tasks %d\n",
		t.Seeds, len(t.FailingSeeds), t.FailingSeeds, t.Lost, t.DoubleAccepted, t.DuplicateExecutions, t.Steals, t.Messages, t.Tasks)
	if t.LostUnsafe > 0 || t.LostUnsafeSchedules > 0 {
		fmt.Fprintf(out, "lost_unsafe %d lost_unsafe_schedules %d (acknowledged, held by the lost peers only)\n", t.LostUnsafe, t.LostUnsafeSchedules)
	}
	if t.KillsLearner > 0 || t.LostTotal > 0 || t.LostTotalPartitions > 0 {
		fmt.Fprintf(out, "kills_learner %d lost_total %d on %d partitions, schedules %d (acknowledged, every replica lost)\n", t.KillsLearner, t.LostTotal, t.LostTotalPartitions, t.LostTotalSchedules)
	}
	fmt.Fprintf(out, "worst latency p50 %.1f ms p99 %.1f ms; sim %.1fs in %.1fs of run wall time (%.0fx)\n",
		t.LatencyP50MS, t.LatencyP99MS, t.SimSeconds, t.WallSeconds, t.SimSeconds/max(t.WallSeconds, 1e-9))
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
