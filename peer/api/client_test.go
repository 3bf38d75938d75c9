package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

func newTestServer(tb testing.TB, f *fakeBackend, opts HandlerOptions) *Client {
	tb.Helper()
	srv := httptest.NewServer(newTestHandler(f, opts))
	tb.Cleanup(srv.Close)
	return &Client{BaseURL: srv.URL + "/", Token: opts.Token, HTTP: srv.Client()}
}

func TestClientRoundTrip(t *testing.T) {
	f := &fakeBackend{
		TaskFn: func(_ context.Context, id shard.TaskID, _ time.Duration) (shard.TaskView, error) {
			return doneTask(id), nil
		},
		GroupFn: func(_ context.Context, id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
			return runningGroup(id), nil
		},
		TaskEventsFn: func(context.Context, shard.TaskID) ([]shard.TaskEvent, error) {
			return []shard.TaskEvent{{Seq: 1, Type: shard.EvSubmitted, At: t0}}, nil
		},
		CancelTaskFn: func(_ context.Context, id shard.TaskID, _ string) (shard.TaskView, error) {
			return shard.TaskView{ID: id, State: shard.Canceled}, nil
		},
		CancelGroupFn: func(_ context.Context, id shard.GroupID, _ string) (shard.GroupView, error) {
			return shard.GroupView{ID: id, State: shard.GroupCanceled, Mode: shard.ModeParallel}, nil
		},
	}
	c := newTestServer(t, f, HandlerOptions{Token: "tok"})
	ctx := t.Context()
	if err := c.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
	req := &SubmitTaskRequest{TaskFields: TaskFields{Handler: "echo", Payload: []byte(`{"a":1}`), Timeout: "1s", Retry: &RetryPolicy{MaxAttempts: 2}}, Key: "k"}
	st, err := c.SubmitTask(ctx, req)
	if err != nil || st.ID != "g1.0" || st.Group != "g1" || !st.Created {
		t.Fatalf("SubmitTask = %+v, %v", st, err)
	}
	if st, err = c.SubmitTask(ctx, req); err != nil || st.Created {
		t.Fatalf("repeated SubmitTask = %+v, %v; want Created=false", st, err)
	}
	gr := &SubmitGroupRequest{Mode: "pipeline", Stages: [][]GroupTask{{{TaskFields: TaskFields{Handler: "echo"}}}, {{Name: "last", TaskFields: TaskFields{Handler: "sleep"}}}}}
	sg, err := c.SubmitGroup(ctx, gr)
	if err != nil || sg.Group != "g2" || sg.Tasks["s0-0"] != "g2.0" || sg.Tasks["last"] != "g2.1" || !sg.Created {
		t.Fatalf("SubmitGroup = %+v, %v", sg, err)
	}
	task, err := c.GetTask(ctx, "g1.0", time.Second)
	if err != nil || task.State != "SUCCEEDED" || string(task.Result) != `{"any":"json"}` || !task.FinishedAt.Equal(t0.Add(2*time.Millisecond)) {
		t.Fatalf("GetTask = %+v, %v", task, err)
	}
	g, err := c.GetGroup(ctx, "g2", 0)
	if err != nil || len(g.Tasks) != 2 {
		t.Fatalf("GetGroup = %+v, %v", g, err)
	}
	if g, err = c.GroupSummary(ctx, "g2", time.Second); err != nil || len(g.Tasks) != 0 || g.Total != 2 {
		t.Fatalf("GroupSummary = %+v, %v", g, err)
	}
	evs, err := c.Events(ctx, "g1.0")
	if err != nil || len(evs) != 1 || evs[0].Type != "submitted" {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
	if ct, err := c.CancelTask(ctx, "g1.0"); err != nil || ct.State != "CANCELED" {
		t.Fatalf("CancelTask = %+v, %v", ct, err)
	}
	if cg, err := c.CancelGroup(ctx, "g2"); err != nil || cg.State != "CANCELED" {
		t.Fatalf("CancelGroup = %+v, %v", cg, err)
	}
}

func TestClientErrors(t *testing.T) {
	c := newTestServer(t, &fakeBackend{}, HandlerOptions{Token: "tok"})
	ctx := t.Context()
	_, err := c.SubmitGroupJSON(ctx, []byte(`{"mode": "parallel", "tasks": [{"handler": "echo", "deps": ["x"]}]}`))
	var e *Error
	if !errors.As(err, &e) || e.Status != 400 || e.Code != CodeInvalidArgument || e.Field != "tasks[0].deps" {
		t.Fatalf("SubmitGroupJSON = %v; want a 400 naming tasks[0].deps", err)
	}
	if got, want := err.Error(), "400 invalid_argument: tasks[0].deps: not allowed in parallel mode"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if _, err := c.GetTask(ctx, "g9.0", 0); !errors.As(err, &e) || e.Status != 404 || e.Code != CodeNotFound {
		t.Errorf("GetTask(unknown) = %v; want 404 not_found", err)
	}
	c.Token = ""
	if _, err := c.Events(ctx, "g9.0"); !errors.As(err, &e) || e.Status != 401 {
		t.Errorf("Events without token = %v; want 401", err)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer plain.Close()
	c = &Client{BaseURL: plain.URL}
	if err := c.Health(ctx); !errors.As(err, &e) || e.Status != 502 || e.Message != "bad gateway" {
		t.Errorf("Health via a non-needle server = %#v", err)
	}
}
