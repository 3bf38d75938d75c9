package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/client"
	"github.com/needle-mesh/needle/internal/syncbuf"
	"github.com/needle-mesh/needle/peer/api"
)

// TestScopedTokensE2E runs needled with a token file of scoped tokens: a
// Go worker serves tasks with a worker token alone, CI submits and
// cancels with a submit token (the audit trail names it), a dashboard's
// read token reads but may not cancel, and neither CI nor the worker may
// drain the peer. A SIGHUP with a bad line keeps every token.
func TestScopedTokensE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildNeedled(t)
	file := filepath.Join(t.TempDir(), "api.tokens")
	const tokens = "# needle API tokens\n" +
		"e2e-admin-token-0123456789\n" +
		"e2e-ci-token-0123456789 name=ci scope=submit\n" +
		"e2e-dash-token-0123456789 name=dash scope=read\n" +
		"e2e-worker-token-0123456789 name=resizer scope=worker\n"
	if err := os.WriteFile(file, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	d := spawnDaemonLog(t, bin, &logs, nil, "--data", t.TempDir(), "--http", anyPort, "--api-token-file", file,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2")
	addr, err := d.serve(t)
	if err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, addr)
	ctx := t.Context()
	as := func(token string) *api.Client { return &api.Client{BaseURL: "http://" + addr, Token: token} }
	ci, dash, worker := as("e2e-ci-token-0123456789"), as("e2e-dash-token-0123456789"), as("e2e-worker-token-0123456789")
	forbidden := func(what string, err error, want string) {
		t.Helper()
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 403 || e.Code != api.CodeForbidden || !strings.Contains(e.Message, want) {
			t.Errorf("%s = %v; want 403 forbidden holding %q", what, err, want)
		}
	}

	w := &client.Worker{Client: &client.Client{BaseURL: "http://" + addr, Token: "e2e-worker-token-0123456789"}, PollWait: 2 * time.Second,
		Handlers: map[string]client.HandlerFunc{
			"e2e.upper": func(_ context.Context, task client.Task) (json.RawMessage, error) {
				return json.RawMessage(strings.ToUpper(string(task.Payload))), nil
			},
		}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Worker.Run with a worker token = %v", err)
		}
	}()

	res, err := ci.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "e2e.upper", Payload: json.RawMessage(`"hi"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := dash.GetTask(ctx, res.ID, 20*time.Second); err != nil || tk.State != "SUCCEEDED" || string(tk.Result) != `"HI"` {
		t.Fatalf("task run by the worker token = %+v, %v; want SUCCEEDED with \"HI\"", tk, err)
	}
	_, err = worker.GetTask(ctx, res.ID, 0)
	forbidden("a read with the worker token", err, `token "resizer" (scope worker) may not GET /v1/tasks/`+res.ID)

	later, err := ci.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "e2e.upper", Delay: "1h"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dash.CancelTask(ctx, later.ID)
	forbidden("a cancel with the read token", err, "it needs scope submit")
	if _, err := ci.CancelTask(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	entries, err := dash.Audit(ctx, 5)
	if err != nil || len(entries) == 0 || entries[0].Subject != later.ID || entries[0].By != "token:ci" {
		t.Errorf("audit = %+v, %v; want the cancel of %s by token:ci", entries, err, later.ID)
	}
	forbidden("a drain with the submit token", ci.Drain(ctx), "POST /v1/drain: it needs scope admin")
	forbidden("a drain with the worker token", worker.Drain(ctx), "it needs scope admin")

	// A bad line on SIGHUP: refused, every token stays as it was.
	if err := os.WriteFile(file, []byte("e2e-ci-token-0123456789 name=ci scope=read\nnew-token-0123456789 scope=everything\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// A refused reload changes nothing to wait for but its log line.
	waitUntil(t, "the refused reload logged", func() bool { return strings.Contains(logs.String(), "API tokens not reloaded") })
	if _, err := ci.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "e2e.upper", Delay: "1h"}}); err != nil {
		t.Errorf("submit with the ci token after a refused reload = %v; want it still scoped submit", err)
	}
	if _, err := dash.GetTask(ctx, res.ID, 0); err != nil {
		t.Errorf("read with the dash token after a refused reload = %v", err)
	}
}
