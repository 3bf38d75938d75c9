package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// Defaults of Worker.
const (
	DefaultPollWait   = 30 * time.Second
	DefaultHeartbeat  = 2 * time.Second
	DefaultStopGrace  = 30 * time.Second
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
	// maxConcurrency bounds Concurrency: a poll takes at most 1,000 tasks.
	maxConcurrency = 1000
	// reportTimeout bounds the retries of one report (outcome or heartbeat).
	reportTimeout = time.Minute
)

// Worker serves handlers over the worker protocol: it polls a peer for the
// tasks of its handlers and runs them, at most Concurrency at once. The
// zero values of the optional fields are their defaults. A Worker runs
// once; see the package documentation for what Run guarantees.
type Worker struct {
	// Client is the peer to poll (BaseURL, Token, HTTP). Required.
	Client *Client
	// Handlers by name; the worker polls for these. Required.
	Handlers map[string]HandlerFunc
	// ID names the worker to the peer (GET /v1/workers); default
	// "<host>-<pid>-<random>". A worker that stops polling, heartbeating
	// and reporting for the peer's --worker-ttl is dead: its tasks run
	// again elsewhere.
	ID string
	// Concurrency is how many handlers run at once; default 1.
	Concurrency int
	// Prefetch is how many tasks the worker may hold beyond Concurrency,
	// leased and waiting for a free handler; default 0. It hides the time
	// a lease takes to commit when tasks are short (a few per
	// Concurrency); a waiting task's timeout runs, and other workers
	// cannot take it.
	Prefetch int
	// Labels ("key=value") are matched against the tasks' require.
	Labels []string
	// PollWait is how long one poll waits for a task; default 30s.
	PollWait time.Duration
	// Heartbeat is the period of a running task's heartbeat, which keeps
	// the worker alive, sends the task's log lines and learns of a
	// cancellation; the first is sent one period after the task started,
	// so short tasks send none. Default 2s (under the peer's default
	// worker TTL of 10s).
	Heartbeat time.Duration
	// StopGrace is how long running handlers may finish once Run's ctx
	// ended; then their context is canceled and their tasks fail
	// (retryable). Default 30s.
	StopGrace time.Duration
	// BackoffMin and BackoffMax bound the delay before a poll or report is
	// sent again after a 503 or a connection error; defaults 100ms, 10s.
	BackoffMin, BackoffMax time.Duration
	// Logger receives what the worker cannot report (a lost lease, a
	// refused report, a peer that does not answer its polls); default
	// slog.Default(), as a Python worker's warnings go to stderr.
	Logger *slog.Logger
}

// Validate fills defaults and reports the first invalid field. A client
// without a token while NEEDLE_API_TOKEN_FILE is set is invalid when the
// file cannot be read (TokenFromEnv's error): New left the token empty,
// and the worker would poll into 401s.
func (w *Worker) Validate() error {
	switch {
	case w.Client == nil || w.Client.BaseURL == "":
		return errors.New("client: Worker.Client: required, with its BaseURL")
	case !httpURL(w.Client.BaseURL):
		// host:port (NEEDLE_ADDR's form, which FromEnv completes) would
		// fail every poll with a parse error, retried for ever.
		return fmt.Errorf("client: Worker.Client.BaseURL: want http(s)://host:port, got %q", w.Client.BaseURL)
	case w.Client.Token == "" && os.Getenv("NEEDLE_API_TOKEN_FILE") != "":
		// New leaves the token empty when the file cannot be read: every
		// poll would be a 401 that says nothing of why.
		if _, err := TokenFromEnv(); err != nil {
			return fmt.Errorf("client: Worker.Client has no token: %w", err)
		}
	case len(w.Handlers) == 0:
		return errors.New("client: Worker.Handlers: name at least one handler")
	case w.Concurrency < 0 || w.Concurrency > maxConcurrency:
		return fmt.Errorf("client: Worker.Concurrency: want 0..%d, got %d", maxConcurrency, w.Concurrency)
	case w.Prefetch < 0 || w.Prefetch+max(w.Concurrency, 1) > maxConcurrency:
		return fmt.Errorf("client: Worker.Prefetch: want 0..%d, got %d", maxConcurrency-max(w.Concurrency, 1), w.Prefetch)
	case w.PollWait < 0 || w.Heartbeat < 0 || w.StopGrace < 0 || w.BackoffMin < 0 || w.BackoffMax < 0:
		return errors.New("client: Worker: durations must not be negative")
	}
	for name, h := range w.Handlers {
		if h == nil {
			return fmt.Errorf("client: Worker.Handlers[%q]: nil", name)
		}
	}
	if w.ID == "" {
		host, _ := os.Hostname()
		w.ID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.N(1<<16))
	}
	w.Concurrency = cmp(w.Concurrency, 1)
	w.PollWait = cmp(w.PollWait, DefaultPollWait)
	w.Heartbeat = cmp(w.Heartbeat, DefaultHeartbeat)
	w.StopGrace = cmp(w.StopGrace, DefaultStopGrace)
	w.BackoffMin = cmp(w.BackoffMin, DefaultBackoffMin)
	w.BackoffMax = max(cmp(w.BackoffMax, DefaultBackoffMax), w.BackoffMin)
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	return nil
}

// cmp returns v, or def when v is zero.
func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Run polls and runs tasks until ctx ends, then stops as the package
// documentation says (5) and returns nil. It returns an error only for an
// invalid Worker or when the peer refuses the poll itself (400, 401, 403).
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Validate(); err != nil {
		return err
	}
	c := newConn(w.Client)
	r := &run{w: w, c: c, handlers: slices.Sorted(maps.Keys(w.Handlers)), instance: fmt.Sprintf("%016x", rand.Uint64()),
		slots: make(chan struct{}, w.Concurrency+w.Prefetch), queue: make(chan api.WorkerTask, w.Concurrency+w.Prefetch),
		rep: newReporter(w, c, 2*(w.Concurrency+w.Prefetch))}
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		r.rep.run()
	}()
	// hard ends the handlers: StopGrace after ctx.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(w.StopGrace, cancelHard)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	defer stop()
	for range w.Concurrency {
		r.wg.Go(func() { r.runner(ctx, hard) })
	}
	err := r.poll(ctx, hard)
	// The tasks not started yet are handed back now, not when a handler
	// is free.
	close(r.queue)
	for wt := range r.queue {
		r.giveBack(hard, wt)
	}
	r.wg.Wait()
	close(r.rep.stop) // every outcome was added: the reporter sends the last
	<-reported
	return err
}

// run is one Run of a Worker.
type run struct {
	w        *Worker
	c        *conn
	handlers []string      // sorted
	instance string        // this Run's: a restart under the same ID is another
	slots    chan struct{} // one token per task held (running or waiting to)
	// noSlots says the peer refused the polls' "slots" (an older
	// release): they go without it. Only poll uses it.
	noSlots bool
	// noLineTimes says the peer refused log lines with times (an older
	// release): they go as strings. Set by any task's sendLogs.
	noLineTimes atomic.Bool
	// queue holds the tasks polled and not started yet, for the
	// Concurrency runners.
	queue chan api.WorkerTask
	rep   *reporter
	wg    sync.WaitGroup
}

// poll asks for tasks while ctx lasts, one poll at a time for as many
// tasks as there are free slots, and starts each task it gets.
func (r *run) poll(ctx, hard context.Context) error {
	bo := backoff{min: r.w.BackoffMin, max: r.w.BackoffMax}
	failed := 0 // polls failed in a row: the first and the recovery are logged
	for {
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		free := 1
		for free < cap(r.slots) && tryAcquire(r.slots) {
			free++
		}
		// Room for the tasks asked for: the answer's are decoded in place.
		// A poll carries no outcomes ("done"): the peer would hand them to
		// its loop and wait for its verdicts before answering with tasks,
		// so the reporter sends them, beside the polls.
		ans := api.PollResult{Tasks: make([]api.WorkerTask, 0, free)}
		body := pollBody{Worker: r.w.ID, Instance: r.instance, Handlers: r.handlers, Max: free,
			Wait: r.w.PollWait.String(), Labels: r.w.Labels}
		if !r.noSlots {
			body.Slots = r.w.Concurrency
		}
		err := r.c.post(ctx, "/v1/workers/poll", body, &ans)
		if err == nil {
			bo.reset()
			if failed > 0 {
				r.w.Logger.Info("peer answers polls again", "peer", r.w.Client.BaseURL, "failed_polls", failed)
				failed = 0
			}
		}
		for i, t := range ans.Tasks {
			if i >= free {
				r.wg.Go(func() { r.release(hard, t, "the worker has no free slot") })
				continue
			}
			r.queue <- t // room: the slots bound the tasks held
		}
		for range free - min(len(ans.Tasks), free) {
			<-r.slots
		}
		var refused *api.Error
		switch {
		case ctx.Err() != nil:
			return nil
		case !r.noSlots && errors.As(err, &refused) && refused.Status == 400 && refused.Field == "slots":
			// A peer of an older release, which knows no "slots": poll
			// again at once, without it (GET /v1/workers shows "-").
			r.noSlots = true
			r.w.Logger.Info("the peer takes no slots in a poll (an older release): polling without", "peer", r.w.Client.BaseURL)
		case err != nil && !transient(err):
			var e *api.Error
			if errors.As(err, &e) && (e.Status == 400 || e.Status == 401 || e.Status == 403 || e.Status == 404) {
				return fmt.Errorf("client: poll refused: %w", err)
			}
			r.w.Logger.Warn("poll failed", "err", err)
			fallthrough
		case err != nil:
			if failed++; failed == 1 && transient(err) {
				// Else silent for as long as the peer is down (or the URL
				// wrong): its tasks wait, "no live worker serves" them.
				r.w.Logger.Warn("polls failing: polling again with backoff until the peer answers", "peer", r.w.Client.BaseURL, "err", err)
			}
			if bo.wait(ctx) != nil {
				return nil
			}
		}
	}
}

// httpURL reports whether s is an http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func tryAcquire(slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// runner runs the queued tasks one at a time until the queue is closed
// and empty: the worker runs Concurrency of them, long-lived, rather than
// a goroutine per task. A task taken once ctx ended is handed back.
func (r *run) runner(ctx, hard context.Context) {
	for wt := range r.queue {
		if ctx.Err() != nil {
			r.giveBack(hard, wt)
			continue
		}
		r.runTask(hard, wt)
	}
}

// giveBack hands back a task the worker held and did not start, and
// frees its slot.
func (r *run) giveBack(hard context.Context, wt api.WorkerTask) {
	<-r.slots
	r.release(hard, wt, fmt.Sprintf("worker %s stopped before the task started", r.w.ID))
}

// runTask runs the task's handler and reports its outcome.
func (r *run) runTask(hard context.Context, wt api.WorkerTask) {
	t := newTask(wt)
	res, err, report := r.runHandler(hard, t)
	if !report {
		<-r.slots
		return
	}
	stopping := err != nil && hard.Err() != nil // cut short: a result is kept
	if stopping {
		err = fmt.Errorf("worker %s stopped: %w", r.w.ID, err)
	}
	r.report(t, res, err, stopping)
	// The report does not hold the slot: the next poll asks for another
	// task meanwhile. Outcomes not yet answered are bounded as the slots
	// are.
	<-r.slots
}

// runHandler runs t's handler with heartbeats; report is false when the
// task was canceled or its lease lost (nobody takes an outcome).
func (r *run) runHandler(hard context.Context, t Task) (res json.RawMessage, err error, report bool) {
	h := r.w.Handlers[t.Handler]
	if h == nil {
		return nil, fmt.Errorf("client: worker %s has no handler %q", r.w.ID, t.Handler), true
	}
	parent := hard
	if t.Trace != "" {
		parent = api.WithTraceparent(hard, t.Trace)
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if t.Deadline.IsZero() {
		ctx, cancel = context.WithCancel(parent)
	} else {
		ctx, cancel = context.WithDeadline(parent, t.Deadline)
	}
	defer cancel()
	// The heartbeats start one period after the task: a short task starts
	// no goroutine for them, only a timer.
	var lost bool
	beaten := make(chan struct{})
	beat := time.AfterFunc(r.w.Heartbeat, func() {
		defer close(beaten)
		lost = r.heartbeat(ctx, t, cancel)
	})
	res, err = safeCall(ctx, h, t)
	cancel()
	if !beat.Stop() {
		<-beaten
	}
	return res, err, !lost
}

// newTask turns a polled task into a handler's Task.
func newTask(wt api.WorkerTask) Task {
	t := Task{TaskView: wt.Task, Payload: wt.Payload, Inputs: wt.Inputs, Lease: wt.Lease, Deadline: wt.Deadline,
		Shard: -1, Trace: wt.Trace, MaxAttempts: wt.MaxAttempts, logs: &taskLog{}}
	if wt.Shard != nil && wt.Shards != nil {
		t.Shard, t.Shards = *wt.Shard, *wt.Shards
	}
	if len(t.Payload) == 0 {
		t.Payload = json.RawMessage("null")
	}
	return t
}

// safeCall runs a handler, turning a panic into a permanent failure whose
// value and stack go to the task's log (as a Python handler's traceback).
func safeCall(ctx context.Context, h HandlerFunc, t Task) (res json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			t.Log(fmt.Sprintf("panic: %v\n\n%s", v, debug.Stack()))
			err = Permanent(fmt.Errorf("handler panicked: %v", v))
		}
	}()
	return h(ctx, t)
}

// heartbeat heartbeats t's lease now and every Heartbeat after until ctx
// ends, sending its log lines. It cancels the handler and reports true
// when the task was canceled or the lease lost.
func (r *run) heartbeat(ctx context.Context, t Task, cancel context.CancelFunc) bool {
	tick := time.NewTicker(r.w.Heartbeat)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return false
			case <-tick.C:
			}
		}
		if ctx.Err() != nil {
			return false
		}
		r.sendLogs(ctx, t)
		var hb api.HeartbeatResult
		err := r.c.post(ctx, "/v1/leases/"+t.Lease+"/heartbeat", struct{}{}, &hb)
		switch {
		case err == nil && hb.Canceled:
			r.w.Logger.Info("task canceled", "task", t.ID, "group", t.Group, "round", t.Round)
			cancel()
			return true
		case errors.Is(err, errLeaseLost):
			r.w.Logger.Warn("lease lost", "task", t.ID, "group", t.Group, "round", t.Round, "err", err)
			cancel()
			return true
		case err == nil, ctx.Err() != nil, transient(err):
			// Alive; or the next tick tries again.
		default:
			r.w.Logger.Warn("heartbeat refused", "task", t.ID, "group", t.Group, "err", err)
		}
	}
}

// sendLogs sends t's pending log lines (best effort: they are dropped
// when the peer does not take them).
func (r *run) sendLogs(ctx context.Context, t Task) {
	lines := t.logs.take()
	if len(lines) == 0 {
		return
	}
	if r.noLineTimes.Load() {
		lines = withoutTimes(lines)
	}
	err := r.c.post(ctx, "/v1/leases/"+t.Lease+"/logs", api.LogsRequest{Lines: lines}, nil)
	var e *api.Error
	if errors.As(err, &e) && e.Status == 400 && strings.HasPrefix(e.Field, "lines") && !r.noLineTimes.Load() {
		// A peer of an older release takes lines as strings only: they
		// go without their times (the peer's arrival times) from now on.
		r.noLineTimes.Store(true)
		err = r.c.post(ctx, "/v1/leases/"+t.Lease+"/logs", api.LogsRequest{Lines: withoutTimes(lines)}, nil)
	}
	if err != nil && ctx.Err() == nil {
		r.w.Logger.Debug("logs not sent", "task", t.ID, "group", t.Group, "err", err)
	}
}

// withoutTimes returns lines without their times.
func withoutTimes(lines []api.WorkerLogLine) []api.WorkerLogLine {
	out := make([]api.WorkerLogLine, len(lines))
	for i, l := range lines {
		out[i].Text = l.Text
	}
	return out
}

// report sends t's pending log lines, then queues its outcome for the
// reporter (which retries transient errors for reportTimeout). stopping
// marks a run the worker cut short: its failure is retryable.
func (r *run) report(t Task, res json.RawMessage, err error, stopping bool) {
	if t.logs.pending() {
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		r.sendLogs(ctx, t)
		cancel()
	}
	r.rep.add(newOutcome(t, res, err, stopping))
}

// release hands back a task the worker will not run: it runs again, no
// attempt spent.
func (r *run) release(hard context.Context, wt api.WorkerTask, why string) {
	r.report(newTask(wt), nil, errors.New(why), true)
}
