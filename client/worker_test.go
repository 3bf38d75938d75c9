package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/internal/syncbuf"
	"github.com/needle-mesh/needle/peer/api"
)

// runWorker runs w until the test's bubble cancels it; wait returns Run's
// error.
func runWorker(t *testing.T, w *Worker) (cancel func(), wait func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return cancel, func() error { return <-errc }
}

func TestWorkerRunsTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		f := newFakePeer(n)
		var running, most atomic.Int32
		echo := func(ctx context.Context, task Task) (json.RawMessage, error) {
			if r := running.Add(1); r > most.Load() {
				most.Store(r)
			}
			defer running.Add(-1)
			time.Sleep(time.Millisecond) // virtual: lets the others start
			return task.Payload, nil
		}
		w := &Worker{Client: f.client(), Concurrency: 4, Handlers: map[string]HandlerFunc{
			"echo":  echo,
			"boom":  func(context.Context, Task) (json.RawMessage, error) { return nil, errors.New("boom") },
			"perm":  func(context.Context, Task) (json.RawMessage, error) { return nil, Permanent(errors.New("bad input")) },
			"panic": func(context.Context, Task) (json.RawMessage, error) { panic("oops") },
			"text":  func(context.Context, Task) (json.RawMessage, error) { return json.RawMessage("not json"), nil },
			"nil":   func(context.Context, Task) (json.RawMessage, error) { return nil, nil },
		}}
		cancel, wait := runWorker(t, w)
		f.add("boom", "1")
		f.add("perm", "2")
		f.add("panic", "3")
		f.add("text", "4")
		f.add("nil", "5")
		f.add("other", "6")
		for i := 6; i < n; i++ {
			f.add("echo", fmt.Sprintf(`{"i":%d}`, i))
		}
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		wants := []any{
			api.FailRequest{Error: "boom"},
			api.FailRequest{Error: "bad input", Permanent: true},
			api.FailRequest{Error: "handler panicked: oops", Permanent: true},
			api.FailRequest{Error: "the handler's result is not JSON", Permanent: true},
			api.CompleteRequest{Result: json.RawMessage("null")},
			api.FailRequest{Error: `client: worker ` + w.ID + ` has no handler "other"`},
		}
		for i, want := range wants {
			if got := f.outcome(i); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outcome of task %d = %+v; want %+v", i, got, want)
			}
		}
		for i := len(wants); i < n; i++ {
			if got, want := f.outcome(i), (api.CompleteRequest{Result: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outcome of task %d = %+v; want %+v", i, got, want)
			}
		}
		if m := most.Load(); m > 4 || m < 2 {
			t.Errorf("at most %d handlers ran at once; want 2..4 (Concurrency 4)", m)
		}
		for _, p := range f.polls {
			if p.Max < 1 || p.Max > 4 || p.Worker != w.ID || strings.Join(p.Handlers, ",") != "boom,echo,nil,panic,perm,text" {
				t.Errorf("poll %+v; want max 1..4, worker %s, the handlers sorted", p, w.ID)
			}
		}
		for lease, n := range f.reports {
			if n != 1 {
				t.Errorf("lease %s reported %d times; want once", lease, n)
			}
		}
	})
}

// A long task is heartbeated (with its log lines) until a heartbeat says it
// was canceled: its handler's context ends, and no outcome is sent.
func TestWorkerHeartbeatsAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(1)
		f.cancelAfter = 3
		ended := make(chan error, 1)
		w := &Worker{Client: f.client(), Heartbeat: time.Second, Handlers: map[string]HandlerFunc{
			"long": func(ctx context.Context, task Task) (json.RawMessage, error) {
				if d, ok := ctx.Deadline(); !ok || !d.Equal(task.Deadline) {
					t.Errorf("handler deadline %v, %v; want the lease's %v", d, ok, task.Deadline)
				}
				task.Log("working\non it")
				<-ctx.Done()
				ended <- ctx.Err()
				return nil, ctx.Err()
			}}}
		cancel, wait := runWorker(t, w)
		f.add("long", "1")
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("handler ended with %v; want canceled", err)
		}
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		lease := fmt.Sprintf("%032x", 1)
		if f.beats[lease] != 3 || f.reports[lease] != 0 || strings.Join(f.logs[lease], "|") != "working|on it" {
			t.Errorf("heartbeats %d, reports %d, logs %q; want 3, 0 and the two lines", f.beats[lease], f.reports[lease], f.logs[lease])
		}
	})
}

// Polls and reports are sent again after a 503 or a connection error; a
// lost lease is not reported again.
func TestWorkerRetriesTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(2)
		f.failNext["poll"] = 3
		f.failNext["report"] = 2
		f.dropNext = 2
		f.lost[fmt.Sprintf("%032x", 2)] = true
		w := &Worker{Client: f.client(), Handlers: map[string]HandlerFunc{
			"echo": func(_ context.Context, task Task) (json.RawMessage, error) { return task.Payload, nil }}}
		cancel, wait := runWorker(t, w)
		f.add("echo", "1", "2", "3")
		<-f.done // tasks 1 and 3: 2's lease is lost
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if got := f.outcome(0); fmt.Sprint(got) != fmt.Sprint(api.CompleteRequest{Result: json.RawMessage("1")}) {
			t.Errorf("outcome 0 = %v", got)
		}
		if got := f.outcome(2); fmt.Sprint(got) != fmt.Sprint(api.CompleteRequest{Result: json.RawMessage("3")}) {
			t.Errorf("outcome 2 = %v", got)
		}
		if f.failNext["poll"] != 0 || f.failNext["report"] != 0 || f.dropNext != 0 {
			t.Errorf("failures left unconsumed: %v, drop %d", f.failNext, f.dropNext)
		}
	})
}

// When Run's context ends, a handler that finishes within StopGrace
// reports its result; one that does not is canceled and its task released
// (it runs again, no attempt spent, as when a worker is killed).
func TestWorkerGracefulStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(2)
		started := make(chan struct{}, 2)
		finish := make(chan struct{})
		w := &Worker{Client: f.client(), Concurrency: 2, StopGrace: 10 * time.Second, Handlers: map[string]HandlerFunc{
			"quick": func(ctx context.Context, task Task) (json.RawMessage, error) {
				started <- struct{}{}
				<-finish
				return json.RawMessage(`"done"`), nil
			},
			"stuck": func(ctx context.Context, task Task) (json.RawMessage, error) {
				started <- struct{}{}
				<-ctx.Done()
				return nil, Permanent(ctx.Err())
			}}}
		cancel, wait := runWorker(t, w)
		f.add("quick", "1")
		f.add("stuck", "2")
		<-started
		<-started
		cancel()
		synctest.Wait()
		close(finish)
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if got := f.outcome(0); fmt.Sprint(got) != fmt.Sprint(api.CompleteRequest{Result: json.RawMessage(`"done"`)}) {
			t.Errorf("quick = %v; want its result", got)
		}
		got, ok := f.outcome(1).(api.ReleaseRequest)
		if !ok || !strings.Contains(got.Reason, "stopped") {
			t.Errorf("stuck = %+v; want released (no attempt spent), saying the worker stopped", f.outcome(1))
		}
	})
}

func TestWorkerPollRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(0)
		f.refusePoll = 401
		_, wait := runWorker(t, &Worker{Client: f.client(), Handlers: map[string]HandlerFunc{
			"x": func(context.Context, Task) (json.RawMessage, error) { return nil, nil }}})
		if err := wait(); err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("Run = %v; want the 401", err)
		}
	})
}

func TestWorkerValidate(t *testing.T) {
	h := map[string]HandlerFunc{"x": func(context.Context, Task) (json.RawMessage, error) { return nil, nil }}
	for _, w := range []Worker{
		{Handlers: h},
		{Client: &Client{BaseURL: "http://x"}},
		{Client: &Client{BaseURL: "http://x"}, Handlers: map[string]HandlerFunc{"x": nil}},
		{Client: &Client{BaseURL: "http://x"}, Handlers: h, Concurrency: -1},
		{Client: &Client{BaseURL: "http://x"}, Handlers: h, Heartbeat: -1},
	} {
		if err := w.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil; want an error", w)
		}
	}
	// A peer URL without its scheme (NEEDLE_ADDR's host:port given to New)
	// failed every poll with a parse error, retried as transient for ever.
	for _, u := range []string{"127.0.0.1:7070", "localhost:7070", "ftp://x", "http://", "http//x:7070"} {
		err := (&Worker{Client: &Client{BaseURL: u}, Handlers: h}).Validate()
		if err == nil || !strings.Contains(err.Error(), "BaseURL") || !strings.Contains(err.Error(), u) {
			t.Errorf("Validate with BaseURL %q = %v; want an error naming BaseURL and the URL", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:7070", "https://needle.example.com", "http://lb/needle/"} {
		if err := (&Worker{Client: &Client{BaseURL: u}, Handlers: h}).Validate(); err != nil {
			t.Errorf("Validate with BaseURL %q = %v; want nil", u, err)
		}
	}
}

// stopWhileOneRuns runs a worker of Concurrency 1 and Prefetch 2 over
// three tasks of f, stops it while the first runs (check, when set, looks
// at the worker then: started holds the handlers started since the
// first), lets that one finish, and returns its id.
func stopWhileOneRuns(t *testing.T, f *fakePeer, check func(started chan string)) string {
	t.Helper()
	started := make(chan string, 3)
	release := make(chan struct{})
	w := &Worker{Client: f.client(), Concurrency: 1, Prefetch: 2, Handlers: map[string]HandlerFunc{
		"block": func(_ context.Context, task Task) (json.RawMessage, error) {
			started <- task.ID
			<-release
			return json.RawMessage(`"ran"`), nil
		}}}
	f.add("block", "1", "2", "3")
	cancel, wait := runWorker(t, w)
	first := <-started
	synctest.Wait()
	if check != nil {
		check(started)
	}
	cancel()
	synctest.Wait()
	close(release)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	return first
}

// With Prefetch, a poll asks for Concurrency+Prefetch tasks; only
// Concurrency handlers run at once, and the tasks still waiting when the
// worker stops are released (handed back, no attempt spent), not run.
func TestWorkerPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(3)
		first := stopWhileOneRuns(t, f, func(started chan string) {
			if len(started) != 0 {
				t.Fatalf("%d more handlers started; want Concurrency 1", len(started))
			}
			if len(f.polls) == 0 || f.polls[0].Max != 3 {
				t.Fatalf("polls %+v; want the first for max 3", f.polls)
			}
		})
		for i := range 3 {
			id := fmt.Sprintf("g.%d", i)
			got := f.outcome(i)
			if id == first {
				if fmt.Sprint(got) != fmt.Sprint(api.CompleteRequest{Result: json.RawMessage(`"ran"`)}) {
					t.Errorf("%s (running at the stop) = %+v; want its result", id, got)
				}
				continue
			}
			if rb, ok := got.(api.ReleaseRequest); !ok || !strings.Contains(rb.Reason, "before the task started") {
				t.Errorf("%s (waiting at the stop) = %+v; want released (handed back, no attempt spent)", id, got)
			}
		}
	})
}

// A handler that panics fails its task for good, and the panic's value and
// stack go to the task's log (GET /v1/tasks/{id}/logs), as a Python
// handler's traceback does: the error alone does not say where it was.
func TestWorkerPanicStackInTaskLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(1)
		w := &Worker{Client: f.client(), Handlers: map[string]HandlerFunc{
			"panic": func(context.Context, Task) (json.RawMessage, error) { panicInHandler(); return nil, nil }}}
		cancel, wait := runWorker(t, w)
		f.add("panic", "1")
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if got, want := f.outcome(0), (api.FailRequest{Error: "handler panicked: oops", Permanent: true}); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("outcome = %+v; want %+v", got, want)
		}
		log := strings.Join(f.logs[fmt.Sprintf("%032x", 1)], "\n")
		if !strings.HasPrefix(log, "panic: oops") || !strings.Contains(log, "client.panicInHandler") || !strings.Contains(log, "worker_test.go") {
			t.Errorf("task log %q; want the panic and its stack (panicInHandler, worker_test.go)", log)
		}
	})
}

func panicInHandler() { panic("oops") }

// A peer that does not answer its polls (down, or a wrong URL) is logged
// once when the polls start failing and once when it answers again, not on
// every poll; it was silent, and its tasks waited for "no live worker".
func TestWorkerLogsAnUnreachablePeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(1)
		f.dropNext = 4
		var log syncbuf.Buffer
		w := &Worker{Client: f.client(), Logger: slog.New(slog.NewTextHandler(&log, nil)), Handlers: map[string]HandlerFunc{
			"echo": func(_ context.Context, task Task) (json.RawMessage, error) { return task.Payload, nil }}}
		cancel, wait := runWorker(t, w)
		f.add("echo", "1")
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		s := log.String()
		if strings.Count(s, "polls failing") != 1 || !strings.Contains(s, "connection refused") ||
			strings.Count(s, "peer answers polls again") != 1 || !strings.Contains(s, "failed_polls=4") {
			t.Errorf("worker log:\n%s\nwant one \"polls failing\" with the error, then one \"peer answers polls again\" after 4", s)
		}
	})
}

// A worker's polls state its capacity (Concurrency) as "slots", which GET
// /v1/workers shows, beside "max", the free slots one poll asks for; a
// peer of an older release refuses "slots" (a 400 naming it), and the
// worker then polls without it instead of stopping.
func TestWorkerStatesSlots(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprint("older=", older), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakePeer(4)
				f.noSlots = older
				echo := func(_ context.Context, task Task) (json.RawMessage, error) { return task.Payload, nil }
				w := &Worker{Client: f.client(), Concurrency: 3, Prefetch: 2, Handlers: map[string]HandlerFunc{"echo": echo}}
				cancel, wait := runWorker(t, w)
				f.add("echo", "1", "2", "3", "4")
				<-f.done
				cancel()
				if err := wait(); err != nil {
					t.Fatalf("Run = %v", err)
				}
				want := 3
				if older {
					want = 0
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				if len(f.polls) == 0 {
					t.Fatal("no poll answered")
				}
				for _, p := range f.polls {
					if p.Slots != want || p.Max < 1 || p.Max > 5 {
						t.Errorf("poll %+v; want slots %d, max 1..5", p, want)
					}
				}
			})
		})
	}
}

// A task's log lines go with the time the handler logged each (the peer
// showed when they arrived: a short task's lines all carried its end); a
// peer of an older release refuses lines with times (a 400 naming lines),
// and the worker then sends them as strings.
func TestWorkerLogLinesCarryTimes(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprint("older=", older), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakePeer(1)
				f.noLineTimes = older
				start := time.Now()
				work := func(_ context.Context, task Task) (json.RawMessage, error) {
					task.Log("first")
					time.Sleep(time.Second)
					task.Log("second")
					return nil, nil
				}
				w := &Worker{Client: f.client(), Handlers: map[string]HandlerFunc{"work": work}}
				cancel, wait := runWorker(t, w)
				f.add("work", "1")
				<-f.done
				cancel()
				if err := wait(); err != nil {
					t.Fatalf("Run = %v", err)
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				lease := fmt.Sprintf("%032x", 1) // the first task's (fakePeer.add)
				texts, times := f.logs[lease], f.logTimes[lease]
				if strings.Join(texts, ",") != "first,second" || len(times) != 2 {
					t.Fatalf("logs %q (times %v); want first, second", texts, times)
				}
				if older {
					if times[0] != nil || times[1] != nil {
						t.Errorf("times %v to an older peer; want none", times)
					}
					return
				}
				if times[0] == nil || times[1] == nil || !times[0].Equal(start) || !times[1].Equal(start.Add(time.Second)) {
					t.Errorf("times %v; want %v and a second later", times, start)
				}
			})
		})
	}
}
