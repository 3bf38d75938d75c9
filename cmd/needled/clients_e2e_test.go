package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/client"
)

// TestPythonClient runs the Python client's tests (clients/python/tests:
// unit tests against an in-memory peer, and integration tests with a
// worker serving handlers of a real needled, with an API token). It skips
// only when python3 is missing; .ci/run installs it.
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	bin := buildNeedled(t)
	const token = "python-client-test-token"
	_, addr := runDaemon(t, bin, []string{"NEEDLE_API_TOKEN=" + token}, "--data", t.TempDir(), "--http", anyPort,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2")
	dir, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), py, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NEEDLE_TEST_URL=http://"+addr, "NEEDLE_URL=http://"+addr,
		"NEEDLE_API_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
}

// TestGoClientWorker serves handlers with client.Worker in this process
// against a real needled with an API token: a dag whose tasks get their
// inputs, a retried failure (the second attempt knows it is one), a
// permanent failure, a long task whose log lines arrive over heartbeats,
// and a cancel that reaches the handler.
func TestGoClientWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildNeedled(t)
	const token = "go-client-test-token"
	_, addr := runDaemon(t, bin, []string{"NEEDLE_API_TOKEN=" + token}, "--data", t.TempDir(), "--http", anyPort,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2")
	c := &client.Client{BaseURL: "http://" + addr, Token: token}
	blocked, unblocked := make(chan struct{}), make(chan struct{})
	w := &client.Worker{Client: c, Concurrency: 4, Heartbeat: 200 * time.Millisecond, PollWait: 5 * time.Second,
		Handlers: map[string]client.HandlerFunc{
			"go.upper": func(_ context.Context, task client.Task) (json.RawMessage, error) {
				var p struct{ S string }
				if err := json.Unmarshal(task.Payload, &p); err != nil {
					return nil, client.Permanent(err)
				}
				s := strings.ToUpper(p.S)
				for _, name := range slices.Sorted(maps.Keys(task.Inputs)) {
					var in struct{ S string }
					_ = json.Unmarshal(task.Inputs[name], &in)
					s += "+" + in.S
				}
				return json.Marshal(map[string]string{"s": s})
			},
			"go.flaky": func(_ context.Context, task client.Task) (json.RawMessage, error) {
				if task.Attempt == 0 {
					return nil, errors.New("first attempt fails")
				}
				return json.Marshal(task.Attempt + 1)
			},
			"go.bad": func(context.Context, client.Task) (json.RawMessage, error) {
				return nil, client.Permanent(errors.New("no such image"))
			},
			"go.chatty": func(ctx context.Context, task client.Task) (json.RawMessage, error) {
				for i := range 3 {
					task.Log(fmt.Sprint("step ", i))
					select { // spans heartbeats
					case <-time.After(400 * time.Millisecond):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return json.RawMessage(`"said it"`), nil
			},
			"go.block": func(ctx context.Context, _ client.Task) (json.RawMessage, error) {
				close(blocked)
				<-ctx.Done()
				close(unblocked)
				return nil, ctx.Err()
			},
		}}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Worker.Run = %v", err)
		}
	}()

	res, err := c.SubmitGroup(ctx, &client.SubmitGroupRequest{Mode: "dag", Tasks: []client.GroupTask{
		{Name: "a", TaskFields: client.TaskFields{Handler: "go.upper", Payload: json.RawMessage(`{"s":"hi"}`)}},
		{Name: "b", TaskFields: client.TaskFields{Handler: "go.upper", Payload: json.RawMessage(`{"s":"there"}`)}, Deps: []string{"a"}},
		{Name: "c", TaskFields: client.TaskFields{Handler: "go.flaky", Retry: &client.RetryPolicy{MaxAttempts: 2, Backoff: "100ms"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.WaitGroup(ctx, res.Group)
	if err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("group = %+v, %v; want SUCCEEDED", g, err)
	}
	results := map[string]string{}
	for _, tk := range g.Tasks {
		results[tk.Name] = string(tk.Result)
	}
	if want := map[string]string{"a": `{"s":"HI"}`, "b": `{"s":"THERE+HI"}`, "c": "2"}; !maps.Equal(results, want) {
		t.Errorf("results %v; want %v", results, want)
	}

	bad, err := c.SubmitTask(ctx, &client.SubmitTaskRequest{TaskFields: client.TaskFields{Handler: "go.bad", Retry: &client.RetryPolicy{MaxAttempts: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := c.WaitTask(ctx, bad.ID); err != nil || tk.State != "FAILED" || tk.Attempt != 1 || !strings.Contains(*tk.Error, "no such image") {
		t.Errorf("permanent failure = %+v, %v; want FAILED after 1 attempt", tk, err)
	}

	chatty, err := c.SubmitTask(ctx, &client.SubmitTaskRequest{TaskFields: client.TaskFields{Handler: "go.chatty"}})
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := c.WaitTask(ctx, chatty.ID); err != nil || tk.State != "SUCCEEDED" {
		t.Fatalf("chatty = %+v, %v", tk, err)
	}
	logs, err := c.TaskLogs(ctx, chatty.ID, 0)
	var lines []string
	for _, l := range logs.Lines {
		lines = append(lines, l.Text)
	}
	if err != nil || !slices.Equal(lines, []string{"step 0", "step 1", "step 2"}) {
		t.Errorf("chatty's log = %q, %v; want its three lines", lines, err)
	}

	blk, err := c.SubmitTask(ctx, &client.SubmitTaskRequest{TaskFields: client.TaskFields{Handler: "go.block"}})
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	if _, err := c.CancelTask(ctx, blk.ID); err != nil {
		t.Fatal(err)
	}
	<-unblocked // the heartbeat learned of the cancel
}
