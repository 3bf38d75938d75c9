package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/needle-mesh/needle/client"
)

// Workloads through external workers (docs/clients.md): W1's or W2's
// tasks, for a handler no peer registers, served by one worker process per
// peer that runs WorkerSlots tasks at a time.
const (
	W1Go = "w1go" // W1 through Go worker processes (package client)
	W1Py = "w1py" // W1 through Python worker processes (clients/python)
	W2Go = "w2go" // W2 through Go worker processes
)

// WorkerHandler is the handler the worker processes serve: it returns the
// payload, as echo does.
const WorkerHandler = "bench.echo"

// Environment of a worker process: WorkerEnv is the URL of the peer it
// polls, WorkerSlotsEnv how many tasks it runs at once, WorkerPrefetchEnv
// how many more it may hold (client.Worker.Prefetch). A Go program
// started with WorkerEnv set calls ServeWorker (the needle CLI does, and
// so `needle bench` runs its own binary as the Go workers).
const (
	WorkerEnv         = "NEEDLE_BENCH_WORKER"
	WorkerSlotsEnv    = "NEEDLE_BENCH_WORKER_SLOTS"
	WorkerPrefetchEnv = "NEEDLE_BENCH_WORKER_PREFETCH"
)

// Defaults of each worker process: its concurrency, and the tasks it may
// hold beyond it, leased ahead so that a short task's slot is not idle
// while the next lease commits.
const (
	DefaultWorkerSlots    = 2
	DefaultWorkerPrefetch = 256
)

// workerPollWait is a worker's poll wait: short, so a stopped worker's
// process exits soon.
const workerPollWait = 5 * time.Second

// pythonWorker is the Python worker process's program.
const pythonWorker = `import os
from needle_client import Worker
Worker({"bench.echo": lambda t: t.payload}, url=os.environ["NEEDLE_BENCH_WORKER"],
       concurrency=int(os.environ["NEEDLE_BENCH_WORKER_SLOTS"]),
       prefetch=int(os.environ["NEEDLE_BENCH_WORKER_PREFETCH"]), poll_wait=5.0).run()
`

// ServeWorker serves WorkerHandler and WorkerSleepHandler on the peer at url with slots tasks at
// a time (holding up to prefetch more) until ctx ends, then stops
// gracefully.
func ServeWorker(ctx context.Context, url string, slots, prefetch int) error {
	w := &client.Worker{Client: client.New(url), Concurrency: slots, Prefetch: prefetch, PollWait: workerPollWait,
		Handlers: map[string]client.HandlerFunc{
			WorkerHandler:      func(_ context.Context, t client.Task) (json.RawMessage, error) { return t.Payload, nil },
			WorkerSleepHandler: workerSleep,
		}}
	return w.Run(ctx)
}

// ServeWorkerFromEnv serves as a worker process when WorkerEnv is set and
// reports whether it did (then the program should exit with the error).
func ServeWorkerFromEnv(ctx context.Context) (bool, error) {
	url := os.Getenv(WorkerEnv)
	if url == "" {
		return false, nil
	}
	slots, err := strconv.Atoi(os.Getenv(WorkerSlotsEnv))
	if err != nil || slots < 1 {
		slots = DefaultWorkerSlots
	}
	prefetch, err := strconv.Atoi(os.Getenv(WorkerPrefetchEnv))
	if err != nil || prefetch < 0 {
		prefetch = 0
	}
	return true, ServeWorker(ctx, url, slots, prefetch)
}

// workerArgv returns the command line of a worker process of workload
// name.
func (r *runner) workerArgv(name string) ([]string, []string, error) {
	if name == W1Go || name == W2Go || name == W4Go {
		if len(r.cfg.GoWorker) == 0 {
			return nil, nil, fmt.Errorf("bench: %s: no Go worker command (Config.GoWorker)", name)
		}
		return r.cfg.GoWorker, nil, nil
	}
	py := r.cfg.Python
	if py == "" {
		py = "python3"
	}
	var env []string
	if r.cfg.PythonClient != "" {
		dir, err := filepath.Abs(r.cfg.PythonClient)
		if err != nil {
			return nil, nil, err
		}
		env = append(env, "PYTHONPATH="+dir)
	}
	return []string{py, "-c", pythonWorker}, env, nil
}

// startWorkers starts one worker process per peer of cl.
func (r *runner) startWorkers(ctx context.Context, name string, cl *Cluster) ([]*execProcess, error) {
	argv, env, err := r.workerArgv(name)
	if err != nil {
		return nil, err
	}
	var ps []*execProcess
	for i := range cl.Len() {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Env = append(cmd.Env, WorkerEnv+"="+cl.Client(i).base, WorkerSlotsEnv+"="+strconv.Itoa(r.cfg.WorkerSlots),
			WorkerPrefetchEnv+"="+strconv.Itoa(r.cfg.WorkerPrefetch))
		p := &execProcess{cmd: cmd, out: &tail{}, done: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = p.out, p.out
		cmd.SysProcAttr = newProcessGroup()
		if err := cmd.Start(); err != nil {
			stopWorkers(ps)
			return nil, fmt.Errorf("bench: %s: start worker %d: %w", name, i, err)
		}
		go func() {
			p.err = cmd.Wait()
			close(p.done)
		}()
		ps = append(ps, p)
	}
	if err := r.waitWorkers(ctx, name, cl, ps); err != nil {
		stopWorkers(ps)
		return nil, err
	}
	return ps, nil
}

// waitWorkers waits until the mesh lists every worker process, bounded by
// ReadyTimeout; a worker that exits is an error with its output.
func (r *runner) waitWorkers(ctx context.Context, name string, cl *Cluster, ps []*execProcess) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, p := range ps {
			select {
			case <-p.done:
				return fmt.Errorf("bench: %s: worker %d exited: %v\n%s", name, i, p.err, p.out.String())
			default:
			}
		}
		var l struct {
			Workers []struct {
				Handlers []string `json:"handlers"`
			} `json:"workers"`
		}
		if err := cl.Client(0).do(ctx, http.MethodGet, "/v1/workers", 0, nil, &l); err == nil && len(l.Workers) >= len(ps) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: %s: the workers did not all poll within %v", name, r.cfg.ReadyTimeout)
		case <-tick.C:
		}
	}
}

// stopWorkers stops the worker processes (SIGTERM, then SIGKILL).
func stopWorkers(ps []*execProcess) {
	for _, p := range ps {
		_ = p.Stop(10 * time.Second)
	}
}

// w1External runs W1 through worker processes of workload name.
func (r *runner) w1External(name string) workloadFunc {
	return func(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
		ps, err := r.startWorkers(ctx, name, cl)
		if err != nil {
			return RepResult{}, err
		}
		defer stopWorkers(ps)
		return r.throughput(ctx, cl, rep, name, WorkerHandler)
	}
}

// w2External runs W2 through worker processes of workload name.
func (r *runner) w2External(name string) workloadFunc {
	return func(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
		ps, err := r.startWorkers(ctx, name, cl)
		if err != nil {
			return RepResult{}, err
		}
		defer stopWorkers(ps)
		return r.latency(ctx, cl, rep, name, WorkerHandler)
	}
}
