package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// fakeBackend is an api.Backend whose methods are function fields; nil
// fields answer shard.ErrNotFound. Submit records the spec and assigns
// ids g1, g2, ...
type fakeBackend struct {
	TaskFn        func(id shard.TaskID, wait time.Duration) (shard.TaskView, error)
	GroupFn       func(id shard.GroupID, wait time.Duration) (shard.GroupView, error)
	TaskEventsFn  func(id shard.TaskID) ([]shard.TaskEvent, error)
	CancelTaskFn  func(id shard.TaskID, by string) (shard.TaskView, error)
	CancelGroupFn func(id shard.GroupID, by string) (shard.GroupView, error)

	mu    sync.Mutex
	specs []*shard.GroupSpec
}

var _ api.Backend = (*fakeBackend)(nil)

func (f *fakeBackend) Submit(_ context.Context, spec *shard.GroupSpec) (api.SubmitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, spec)
	g := shard.GroupID("g" + string(rune('0'+len(f.specs))))
	res := api.SubmitResult{Group: g, Created: true}
	for i := range spec.Tasks {
		res.Tasks = append(res.Tasks, shard.TaskIDOf(g, i))
	}
	return res, nil
}

func (f *fakeBackend) submitted() []*shard.GroupSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs
}

func (f *fakeBackend) Task(_ context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
	if f.TaskFn == nil {
		return shard.TaskView{}, shard.ErrNotFound
	}
	return f.TaskFn(id, wait)
}

func (f *fakeBackend) Group(_ context.Context, id shard.GroupID, wait time.Duration, _ bool) (shard.GroupView, error) {
	if f.GroupFn == nil {
		return shard.GroupView{}, shard.ErrNotFound
	}
	return f.GroupFn(id, wait)
}

func (f *fakeBackend) TaskEvents(_ context.Context, id shard.TaskID) ([]shard.TaskEvent, error) {
	if f.TaskEventsFn == nil {
		return nil, shard.ErrNotFound
	}
	return f.TaskEventsFn(id)
}

func (f *fakeBackend) CancelTask(_ context.Context, id shard.TaskID, by string) (shard.TaskView, error) {
	if f.CancelTaskFn == nil {
		return shard.TaskView{}, shard.ErrNotFound
	}
	return f.CancelTaskFn(id, by)
}

func (f *fakeBackend) CancelGroup(_ context.Context, id shard.GroupID, by string) (shard.GroupView, error) {
	if f.CancelGroupFn == nil {
		return shard.GroupView{}, shard.ErrNotFound
	}
	return f.CancelGroupFn(id, by)
}

// result is the outcome of one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

// mustServer starts the API over f and returns its address.
func mustServer(tb testing.TB, f *fakeBackend, opts api.HandlerOptions) string {
	tb.Helper()
	srv := httptest.NewServer(api.NewHandler(f, opts))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// runCLI runs the CLI with args against addr (via NEEDLE_ADDR semantics).
func runCLI(tb testing.TB, addr, stdin string, args ...string) result {
	tb.Helper()
	var out, errOut bytes.Buffer
	g := &Globals{Addr: addr, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut}
	code := run(tb.(interface{ Context() context.Context }).Context(), g, args)
	return result{code, out.String(), errOut.String()}
}

func (r result) check(tb testing.TB, code int, stdout, stderr string) {
	tb.Helper()
	if r.code != code || !strings.Contains(r.stdout, stdout) || !strings.Contains(r.stderr, stderr) {
		tb.Errorf("exit %d\nstdout: %s\nstderr: %s\nwant exit %d, stdout containing %q, stderr containing %q", r.code, r.stdout, r.stderr, code, stdout, stderr)
	}
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func taskIn(id shard.TaskID, st shard.State) shard.TaskView {
	v := shard.TaskView{ID: id, Group: id.Group(), Name: "a", Handler: "echo", State: st, CreatedAt: t0}
	switch st {
	case shard.Succeeded:
		v.Attempt, v.Round, v.Holder, v.Result, v.FinishedAt = 1, 1, "peerA", []byte(`{"a":1}`), t0.Add(time.Second)
	case shard.Failed:
		v.Attempt, v.Round, v.Holder, v.Error = 3, 3, "peerB", "boom\nat line 2"
	}
	return v
}

// waitingIn is a READY task no live peer may run.
func waitingIn(id shard.TaskID) shard.TaskView {
	v := taskIn(id, shard.Ready)
	v.Require, v.Waiting = []string{"gpu=a100"}, "no live peer has labels gpu=a100"
	return v
}

func TestSubmitTask(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	r := runCLI(t, addr, "", "submit", "--handler", "echo", "--payload", `{"a":1}`, "--priority", "5",
		"--timeout", "30s", "--retries", "2", "--backoff", "2s", "--delay", "1m", "--key", "k")
	r.check(t, 0, "g1.0\n", "")
	spec := f.submitted()[0]
	ts := spec.Tasks[0]
	if spec.Key != "k" || ts.Priority != 5 || ts.Timeout != 30*time.Second || ts.Delay != time.Minute ||
		ts.Retry != (shard.Retry{MaxAttempts: 3, Backoff: 2 * time.Second, MaxBackoff: 2 * time.Minute}) || string(ts.Payload) != `{"a":1}` {
		t.Errorf("submitted %+v / %+v", spec, ts)
	}
	r = runCLI(t, addr, "", "submit", "--json", "--handler", "echo")
	var resp api.SubmitTaskResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.ID != "g2.0" || r.code != 0 {
		t.Errorf("submit --json = %d %q", r.code, r.stdout)
	}
}

func TestSubmitGroupFromFileAndStdin(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	file := filepath.Join(t.TempDir(), "group.json")
	body := `{"mode": "parallel", "tasks": [{"handler": "echo"}, {"handler": "echo"}]}`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, addr, "", "submit", "-f", file).check(t, 0, "g1\n", "")
	runCLI(t, addr, body, "submit", "-f", "-", "--json").check(t, 0, `"t1": "g2.1"`, "")
	if n := len(f.submitted()); n != 2 {
		t.Errorf("%d groups submitted; want 2", n)
	}
}

func TestSubmitRejected(t *testing.T) {
	addr := mustServer(t, &fakeBackend{}, api.HandlerOptions{})
	body := `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo"}, {"name": "d", "handler": "echo"}, {"name": "e", "handler": "echo", "deps": ["c"]}]}`
	r := runCLI(t, addr, body, "submit", "-f", "-")
	if want := "needle: submit: 400 invalid_argument: tasks[3].deps: unknown task \"c\"\n"; r.code != 1 || r.stderr != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", r.code, r.stderr, want)
	}
}

func TestUsageErrors(t *testing.T) {
	addr := mustServer(t, &fakeBackend{}, api.HandlerOptions{})
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"--bogus", "submit"},
		{"submit"},
		{"submit", "--handler", "echo", "--payload", "not json"},
		{"submit", "--handler", "echo", "--priority", "x"},
		{"submit", "-f", "g.json", "--handler", "echo"},
		{"submit", "--handler", "echo", "extra"},
		{"get"},
		{"get", "a", "b"},
		{"wait"},
		{"wait", "g1", "--timeout", "-1s"},
		{"cancel"},
		{"events", "g1"},
		{"simulate", "--bogus"},
		{"simulate", "--peers", "-1"},
		{"simulate", "--log", "loud"},
		{"simulate", "--log", "debug", "--seeds", "2"},
		{"simulate", "--tasks", "0"},
		{"simulate", "--warmup", "10m"},
		{"schedule"},
		{"schedule", "--json", "list"},
		{"schedule", "nope"},
	} {
		if r := runCLI(t, addr, "", args...); r.code != 2 || r.stderr == "" {
			t.Errorf("needle %v = exit %d, stderr %q; want exit 2 with a message", args, r.code, r.stderr)
		}
	}
	runCLI(t, addr, "", "help", "submit").check(t, 0, "-max-backoff", "")
	runCLI(t, addr, "", "wait", "-h").check(t, 0, "usage: needle wait", "")
	for name := range commands {
		// Every command's --help is its usage, exit 0.
		runCLI(t, addr, "", name, "--help").check(t, 0, "usage: needle "+name, "")
	}
	runCLI(t, addr, "", "schedule", "--json", "list").check(t, 2, "", "want a subcommand before the flags")
}

func TestGlobalFlagsBeforeAndAfter(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{Token: "tok"})
	runCLI(t, "http://127.0.0.1:1", "", "--addr", addr, "--token", "tok", "submit", "--handler", "echo").check(t, 0, "g1.0", "")
	runCLI(t, "http://127.0.0.1:1", "", "submit", "--handler", "echo", "--addr", addr, "--token=tok").check(t, 0, "g2.0", "")
	runCLI(t, addr, "", "submit", "--handler", "echo").check(t, 1, "", "401 unauthenticated")
	runCLI(t, "http://127.0.0.1:1", "", "get", "g1.0").check(t, 1, "", "needle: get: ")
}

// A token without the scope a command needs: the CLI prints the server's
// 403, which names the token and the scope, and exits 1.
func TestForbiddenScope(t *testing.T) {
	list, err := api.ParseTokens("t-read-0123456789abcdef name=dash scope=read\nt-ci-0123456789abcdef name=ci scope=submit\n")
	if err != nil {
		t.Fatal(err)
	}
	var by string
	f := &fakeBackend{CancelTaskFn: func(id shard.TaskID, b string) (shard.TaskView, error) {
		by = b
		return taskIn(id, shard.Canceled), nil
	}}
	addr := mustServer(t, f, api.HandlerOptions{Tokens: api.NewTokenSet(list)})
	runCLI(t, addr, "", "--token", "t-read-0123456789abcdef", "cancel", "g1.0").check(t, 1, "",
		`needle: cancel: 403 forbidden: token "dash" (scope read) may not POST /v1/tasks/g1.0/cancel: it needs scope submit`)
	if by != "" {
		t.Errorf("the refused cancel reached the backend (by %q)", by)
	}
	runCLI(t, addr, "", "--token", "t-ci-0123456789abcdef", "cancel", "g1.0").check(t, 0, "g1.0 CANCELED\n", "")
	if by != "token:ci" {
		t.Errorf("cancel by %q; want token:ci", by)
	}
}

func TestGet(t *testing.T) {
	f := &fakeBackend{
		TaskFn: func(id shard.TaskID, _ time.Duration) (shard.TaskView, error) {
			switch id {
			case "g9.0":
				return shard.TaskView{}, shard.ErrNotFound
			case "g8.0":
				// READY and placed nowhere: get says why, and what holds it.
				v := taskIn(id, shard.Ready)
				v.Require, v.Pin, v.Retries, v.Deaths = []string{"gpu=a100", "zone=eu"}, "peerZ", 2, shard.Deaths{Shared: 1, Alone: 2}
				v.Waiting = "pinned to peer peerZ, which is not alive"
				return v, nil
			}
			return taskIn(id, shard.Succeeded), nil
		},
		GroupFn: func(id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
			return shard.GroupView{ID: id, Mode: shard.ModeDAG, State: shard.GroupFailed,
				Counts: map[shard.State]int{shard.Succeeded: 1, shard.Failed: 1},
				Tasks:  []shard.TaskView{taskIn(shard.TaskIDOf(id, 0), shard.Succeeded), taskIn(shard.TaskIDOf(id, 1), shard.Failed), waitingIn(shard.TaskIDOf(id, 2))}}, nil
		},
	}
	addr := mustServer(t, f, api.HandlerOptions{})
	runCLI(t, addr, "", "get", "g1.0").check(t, 0, "state     SUCCEEDED\n", "")
	runCLI(t, addr, "", "get", "g1.0").check(t, 0, "result    {\"a\":1}\n", "")
	runCLI(t, addr, "", "get", "--json", "g1.0").check(t, 0, `"finished_at": "2025-01-02T03:04:06Z"`, "")
	runCLI(t, addr, "", "get", "g1", "--json").check(t, 0, `"mode": "dag"`, "")
	r := runCLI(t, addr, "", "get", "g1")
	r.check(t, 0, "counts    FAILED=1 SUCCEEDED=1\n", "")
	r.check(t, 0, "boom at line 2", "")
	r.check(t, 0, "waiting: no live peer has labels gpu=a100", "")
	runCLI(t, addr, "", "get", "g9.0").check(t, 1, "", "needle: get: 404 not_found")
	r = runCLI(t, addr, "", "get", "g8.0")
	for _, want := range []string{"requires       gpu=a100,zone=eu\n", "pinned to      peerZ\n", "retries        2\n",
		"worker deaths  2 alone, 1 beside other tasks\n", "waiting        pinned to peer peerZ, which is not alive\n", "result         -\n"} {
		r.check(t, 0, want, "")
	}
	if r := runCLI(t, addr, "", "get", "g1.0"); strings.Contains(r.stdout, "waiting") || strings.Contains(r.stdout, "requires") {
		t.Errorf("get of a plain task shows fields it does not have:\n%s", r.stdout)
	}
}

func TestWaitTask(t *testing.T) {
	f := &fakeBackend{TaskFn: func(id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
		switch id {
		case "gaced.0":
			return taskIn(id, shard.Succeeded), nil
		case "gbad.0", "g1.0":
			return taskIn(id, shard.Failed), nil
		case "gdead.0":
			v := taskIn(id, shard.Ready)
			v.Handler, v.Waiting = "ech0", `no live worker serves handler "ech0"`
			return v, nil
		}
		time.Sleep(min(wait, 50*time.Millisecond))
		return taskIn(id, shard.Running), nil
	}}
	addr := mustServer(t, f, api.HandlerOptions{})
	runCLI(t, addr, "", "wait", "gaced.0").check(t, 0, "{\"a\":1}\n", "")
	runCLI(t, addr, "", "wait", "gbad.0").check(t, 1, "", "needle: wait: task gbad.0 FAILED: boom")
	runCLI(t, addr, "", "wait", "gcafe.0", "--timeout", "300ms").check(t, 1, "", "timed out after 300ms; task gcafe.0 is RUNNING")
	r := runCLI(t, addr, "", "wait", "gdead.0", "--timeout", "700ms")
	r.check(t, 1, "", `timed out after 700ms; task gdead.0 is READY (no live worker serves handler "ech0")`)
	if n := strings.Count(r.stderr, `needle: wait: gdead.0 is READY: no live worker serves handler "ech0"`); n != 1 {
		t.Errorf("wait said why the task waits %d times; want once:\n%s", n, r.stderr)
	}
	runCLI(t, addr, "", "submit", "--handler", "echo", "--wait").check(t, 1, "g1.0\n", "needle: submit: task g1.0 FAILED: boom")
}

// progressGroup returns a group that gains one finished task per poll.
func progressGroup(finalState shard.GroupState) func(shard.GroupID, time.Duration) (shard.GroupView, error) {
	var mu sync.Mutex
	polls := 0
	return func(id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
		mu.Lock()
		defer mu.Unlock()
		polls++
		done := min(polls, 3)
		g := shard.GroupView{ID: id, Mode: shard.ModeParallel, State: shard.GroupRunning,
			Counts: map[shard.State]int{shard.Succeeded: done, shard.Running: 3 - done}}
		if done == 3 {
			g.State = finalState
			if finalState == shard.GroupFailed {
				g.Counts = map[shard.State]int{shard.Succeeded: 2, shard.Failed: 1}
			}
		}
		return g, nil
	}
}

func TestWaitGroup(t *testing.T) {
	addr := mustServer(t, &fakeBackend{GroupFn: progressGroup(shard.GroupSucceeded)}, api.HandlerOptions{})
	r := runCLI(t, addr, "", "wait", "g1")
	r.check(t, 0, "", "g1: 1/3 done")
	r.check(t, 0, "", "group g1 SUCCEEDED: 3 succeeded, 0 failed, 0 canceled of 3")
	addr = mustServer(t, &fakeBackend{GroupFn: progressGroup(shard.GroupFailed)}, api.HandlerOptions{})
	runCLI(t, addr, "", "wait", "g1").check(t, 1, "", "needle: wait: group g1 FAILED: 2 succeeded, 1 failed, 0 canceled of 3")
}

// A group whose READY tasks make no progress says why they wait, as a
// task's wait does: a task of a handler no worker serves held "1/2 done,
// eta ?" until the timeout, with no reason (audit s77, F14). The wait
// looks at once (stallLook 1ns), not after the 2 s default: at the
// default the look came 0.5 s before the timeout, and a loaded machine
// missed it.
func TestWaitGroupSaysWhyItWaits(t *testing.T) {
	const why = `no live worker serves handler "ech0"`
	addr := mustServer(t, &fakeBackend{GroupFn: func(id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
		done, stuck := taskIn(shard.TaskID(id)+".0", shard.Succeeded), taskIn(shard.TaskID(id)+".1", shard.Ready)
		stuck.Handler, stuck.Waiting = "ech0", why
		return shard.GroupView{ID: id, Mode: shard.ModeParallel, State: shard.GroupRunning,
			Counts: map[shard.State]int{shard.Succeeded: 1, shard.Ready: 1}, Tasks: []shard.TaskView{done, stuck}}, nil
	}}, api.HandlerOptions{})
	var out, errOut bytes.Buffer
	g := &Globals{Addr: addr, Stdout: &out, Stderr: &errOut}
	c := &WaitCommand{Globals: g, stallLook: time.Nanosecond}
	code := exitCode(g, "wait", c, c.Run(t.Context(), []string{"g1", "--timeout", "2500ms"}))
	r := result{code, out.String(), errOut.String()}
	r.check(t, 1, "", "timed out after 2.5s; group g1 is RUNNING ("+why+")")
	if n := strings.Count(r.stderr, "needle: wait: g1.1 is READY: "+why); n != 1 {
		t.Errorf("wait said why the group waits %d times; want once:\n%s", n, r.stderr)
	}
}

func TestWaitGroupProgressBar(t *testing.T) {
	addr := mustServer(t, &fakeBackend{GroupFn: progressGroup(shard.GroupSucceeded)}, api.HandlerOptions{})
	var out, errOut bytes.Buffer
	g := &Globals{Addr: addr, Stdout: &out, Stderr: &errOut, StderrTTY: true}
	if code := run(t.Context(), g, []string{"wait", "g1"}); code != 0 || !strings.Contains(errOut.String(), "3/3") {
		t.Errorf("exit %d, stderr %q; want 0 and a bar at 3/3", code, errOut.String())
	}
}

func TestCancelAndEvents(t *testing.T) {
	f := &fakeBackend{
		CancelTaskFn: func(id shard.TaskID, _ string) (shard.TaskView, error) { return taskIn(id, shard.Canceled), nil },
		CancelGroupFn: func(id shard.GroupID, _ string) (shard.GroupView, error) {
			return shard.GroupView{ID: id, Mode: shard.ModeDAG, State: shard.GroupCanceled, Counts: map[shard.State]int{shard.Canceled: 2}}, nil
		},
		TaskEventsFn: func(shard.TaskID) ([]shard.TaskEvent, error) {
			return []shard.TaskEvent{
				{Seq: 1, Type: shard.EvSubmitted, At: t0},
				{Seq: 2, Type: shard.EvFailed, At: t0.Add(time.Second), Round: 1, Holder: "peerB", Error: "boom"},
				{Seq: 3, Type: shard.EvCanceled, At: t0.Add(2 * time.Second), Round: 1, By: "token"},
			}, nil
		},
	}
	addr := mustServer(t, f, api.HandlerOptions{})
	runCLI(t, addr, "", "cancel", "g1.0").check(t, 0, "g1.0 CANCELED\n", "")
	runCLI(t, addr, "", "cancel", "g1").check(t, 0, "g1 CANCELED CANCELED=2\n", "")
	r := runCLI(t, addr, "", "events", "g1.0")
	r.check(t, 0, "SEQ  TYPE       AT                    ROUND  PEER   ERROR\n", "")
	r.check(t, 0, "2    failed     2025-01-02T03:04:06Z  1      peerB  boom\n", "")
	r.check(t, 0, "- (by token)", "")
	runCLI(t, addr, "", "events", "--json", "g1.0").check(t, 0, `"type": "canceled"`, "")
}

// TestGetPipelineAndWebhook: get of a streaming pipeline shows each
// stage's progress and the skipped items, and a group's webhook delivery.
func TestGetPipelineAndWebhook(t *testing.T) {
	f := &fakeBackend{
		GroupFn: func(id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
			v := shard.GroupView{ID: id, Mode: shard.ModeStream, State: shard.GroupRunning, Key: "nightly-7",
				Counts: map[shard.State]int{shard.Succeeded: 4, shard.Failed: 1, shard.Canceled: 1, shard.Ready: 3}, Total: 9,
				Stages:    []shard.StageSpec{{Name: "parse", Concurrency: 4}, {Name: "load"}},
				StageDone: []int{3, 1}, Items: 4,
				Skipped: []shard.SkippedItem{{Item: 2, Stage: "parse", Task: shard.TaskIDOf(id, 4), Reason: "bad csv"}},
				Notify:  &shard.NotifyView{URL: "https://hooks.example/a", State: "pending", Attempts: 2, LastError: "503 Service\nUnavailable", Next: t0}}
			if id == "g2" {
				v.Mode, v.Stages, v.StageDone, v.Items, v.Skipped, v.Key = shard.ModeDAG, nil, nil, 0, nil, ""
				v.Notify = &shard.NotifyView{URL: "https://hooks.example/b", State: "delivered", Attempts: 1}
			}
			return v, nil
		},
	}
	addr := mustServer(t, f, api.HandlerOptions{})
	r := runCLI(t, addr, "", "get", "g1")
	for _, want := range []string{"key       nightly-7\n", "items     4\n", "skipped   1 (FAILED at a stage",
		"webhook   https://hooks.example/a: pending (2 attempts), last error: 503 Service Unavailable, next at 2025-01-02T03:04:05Z\n",
		"STAGE  CONCURRENCY  DONE\nparse  4            3/4\nload   unbounded    1/4\n"} {
		r.check(t, 0, want, "")
	}
	r = runCLI(t, addr, "", "get", "g2")
	r.check(t, 0, "webhook   https://hooks.example/b: delivered (1 attempt)\n", "")
	if strings.Contains(r.stdout, "STAGE") || strings.Contains(r.stdout, "items") || strings.Contains(r.stdout, "key ") {
		t.Errorf("get of a dag shows a pipeline's or a key's lines:\n%s", r.stdout)
	}
}

// TestWaitGroupDoneAtOnce: a group finished at the first look prints its
// progress without an estimate of the time left.
func TestWaitGroupDoneAtOnce(t *testing.T) {
	addr := mustServer(t, &fakeBackend{GroupFn: func(id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
		return shard.GroupView{ID: id, Mode: shard.ModeParallel, State: shard.GroupSucceeded, Total: 2,
			Counts: map[shard.State]int{shard.Succeeded: 2}}, nil
	}}, api.HandlerOptions{})
	r := runCLI(t, addr, "", "wait", "g1")
	r.check(t, 0, "", "g1: 2/2 done, ")
	if strings.Contains(r.stderr, "eta") {
		t.Errorf("a finished group's progress estimates the time left:\n%s", r.stderr)
	}
	// Nor a rate: no task was seen finishing (it printed "2/2 done,
	// 1450.3 tasks/s", the done tasks over the first poll's milliseconds).
	if strings.Contains(r.stderr, "tasks/s") {
		t.Errorf("a finished group's progress has a rate:\n%s", r.stderr)
	}
	var out, errOut bytes.Buffer
	g := &Globals{Addr: addr, Stdout: &out, Stderr: &errOut, StderrTTY: true}
	if code := run(t.Context(), g, []string{"wait", "g1"}); code != 0 || strings.Contains(errOut.String(), "tasks/s") {
		t.Errorf("exit %d, bar %q; want 0 and no rate", code, errOut.String())
	}
}

// The rate counts the tasks seen finishing during the wait, not those
// done before it.
func TestWaitGroupRateCountsOnlySeen(t *testing.T) {
	var b bytes.Buffer
	t0 := time.Unix(1_700_000_000, 0)
	p := &lineProgress{id: "g1", w: &b, t0: t0, now: func() time.Time { return t0.Add(2 * time.Second) }}
	p.update(90, 100) // done before the wait
	p.update(94, 100) // 4 more over 2 s
	if !strings.Contains(b.String(), "g1: 90/100 done, elapsed 2s, eta ?\n") || !strings.Contains(b.String(), "g1: 94/100 done, 2.0 tasks/s, elapsed 2s, eta 3s\n") {
		t.Errorf("progress lines:\n%s", b.String())
	}
}

// No command's help prints the API token it would send (it was every
// flag set's -token default, from the environment).
func TestHelpHidesTheToken(t *testing.T) {
	const tok = "s3cr3t-t0ken-from-env"
	for name := range commands {
		var out, errOut bytes.Buffer
		g := &Globals{Addr: "http://127.0.0.1:1", Token: tok, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
		run(t.Context(), g, []string{"help", name})
		run(t.Context(), g, []string{name, "--help"})
		if strings.Contains(out.String()+errOut.String(), tok) {
			t.Errorf("needle help %s prints the token", name)
		}
	}
}

func TestOneLineCutsLongCells(t *testing.T) {
	if got := oneLine("boom\n  at line 2"); got != "boom at line 2" {
		t.Errorf("oneLine = %q", got)
	}
	long := strings.Repeat("é", 3*maxCell)
	if got := oneLine(long); len([]rune(got)) != maxCell || !strings.HasSuffix(got, "…") {
		t.Errorf("oneLine of %d characters = %d characters; want %d ending in …", 3*maxCell, len([]rune(got)), maxCell)
	}
}

// A peer of an older release lacks the routes a newer CLI calls: its
// router's 404 (no route) or 405 comes with the hint that the versions
// differ. A task that is not found gets no hint.
func TestOlderPeerHint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/workers":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"code":"not_found","message":"no route %s %s"}}`, r.Method, r.URL.Path)
		case "/v1/schedules/s1/trigger":
			w.Header().Set("Allow", "GET")
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprintf(w, `{"error":{"code":"method_not_allowed","message":"method %s not allowed; allowed: GET"}}`, r.Method)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"task \"g1.0\" not found"}}`)
		}
	}))
	defer srv.Close()
	const hint = "the peer may run an older needle than this one"
	r := runCLI(t, srv.URL, "", "workers")
	r.check(t, 1, "", "no route GET /v1/workers")
	r.check(t, 1, "", hint)
	r = runCLI(t, srv.URL, "", "schedule", "trigger", "s1")
	r.check(t, 1, "", "method POST not allowed")
	r.check(t, 1, "", hint)
	if r := runCLI(t, srv.URL, "", "get", "g1.0"); r.code == 0 || strings.Contains(r.stderr, hint) || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get of a missing task: exit %d, stderr %q; want the not found error without the hint", r.code, r.stderr)
	}
}
