package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Run runs every selected workload cfg.Reps times, each repetition on a
// fresh cluster, then writes the table to cfg.Out and the JSON report to
// cfg.JSON. It returns a *CheckError when a result was wrong or a task was
// lost, and stops early on any other error (a peer that does not start,
// an API error, ctx canceled); the table and JSON are written in every case.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	ds, err := loadDurations(cfg.W3File)
	if err != nil {
		return Report{}, err
	}
	r := &runner{cfg: cfg, durations: ds}
	rep := Report{Peers: cfg.Peers, Slots: cfg.Slots, Steal: cfg.Steal, Reps: cfg.Reps, PeerProcs: cfg.PeerProcs}
	var runErr error
	for _, name := range cfg.selected() {
		wr, err := r.run(ctx, name)
		rep.Workloads = append(rep.Workloads, wr)
		if err != nil {
			runErr = err
			break
		}
	}
	return rep, errors.Join(runErr, rep.write(cfg.Out, cfg.JSON), rep.checkError())
}

// run runs all repetitions of one workload.
func (r *runner) run(ctx context.Context, name string) (WorkloadReport, error) {
	wr := WorkloadReport{Name: name}
	if why := r.skip(name); why != "" {
		r.cfg.Logger.Warn("skipping workload", "workload", name, "reason", why)
		wr.Skipped = why
		return wr, nil
	}
	for rep := 1; rep <= r.cfg.Reps; rep++ {
		res, err := r.runRep(ctx, name, rep)
		if err != nil {
			wr.Error = err.Error()
			wr.summarize()
			return wr, fmt.Errorf("%s rep %d: %w", name, rep, err)
		}
		r.cfg.Logger.Info("repetition done", "workload", name, "rep", rep,
			"metrics", res.Metrics, "failed_checks", res.ProblemCount)
		wr.Reps = append(wr.Reps, res)
	}
	wr.summarize()
	return wr, nil
}

// runRep starts a cluster, runs one repetition on it and stops it.
func (r *runner) runRep(ctx context.Context, name string, rep int) (RepResult, error) {
	r.cfg.Logger.Info("starting cluster", "workload", name, "rep", rep, "peers", r.cfg.Peers)
	cfg := r.cfg
	if name == WG { // its tasks run a shell that prints the clock
		cfg.ExtraArgs = append(slices.Clone(cfg.ExtraArgs), "--exec-allow", wgExec)
	}
	if name == W1 && cfg.W1For > 0 { // memory for what is in flight (Config.W1For)
		cfg.ExtraArgs = append(slices.Clone(cfg.ExtraArgs), "--retention", W1Retention.String())
	}
	cl, err := StartCluster(ctx, cfg)
	if err != nil {
		return RepResult{}, err
	}
	before, serr := cl.scrape(ctx)
	res, err := r.workload(name)(ctx, cl, rep)
	if err != nil { // said now: stopping a large cluster takes a while
		r.cfg.Logger.Warn("repetition failed", "workload", name, "rep", rep, "err", err)
	} else if serr == nil && ctx.Err() == nil {
		// The cost of the work: Raft entries and CPU per task, over
		// the whole cluster (the peers refresh their counters each
		// metricsEvery).
		time.Sleep(metricsEvery)
		if after, err := cl.scrape(ctx); err == nil {
			res.Metrics = append(res.Metrics, costMetrics(before, after)...)
		}
	}
	if cerr := cl.Close(); cerr != nil {
		r.cfg.Logger.Warn("closing cluster", "workload", name, "rep", rep, "err", cerr)
	}
	if err == nil {
		err = ctx.Err() // the cluster was stopped under the workload
	}
	return res, err
}

// write prints the table and the JSON report to the writers that are set.
func (rep Report) write(out, js io.Writer) error {
	var errs []error
	if out != nil {
		errs = append(errs, rep.WriteTable(out))
	}
	if js != nil {
		errs = append(errs, rep.WriteJSON(js))
	}
	return errors.Join(errs...)
}

// checkError returns a *CheckError listing every repetition with failed
// checks, or nil.
func (rep Report) checkError() error {
	var fails []string
	for _, w := range rep.Workloads {
		for _, r := range w.Reps {
			if r.ProblemCount == 0 {
				continue
			}
			fails = append(fails, fmt.Sprintf("%s rep %d: %d failed checks, first: %s",
				w.Name, r.Rep, r.ProblemCount, r.Problems[0]))
		}
	}
	if fails == nil {
		return nil
	}
	return &CheckError{Failures: fails}
}
