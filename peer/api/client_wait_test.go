package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// handlerTransport serves a client's requests with h in memory, so that a
// test runs in a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// WaitTask and WaitGroup poll again while the answer is not terminal, long
// polls that the server ends early included, and stop when it is.
func TestClientWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		taskCalls, groupCalls := 0, 0
		var waits []time.Duration
		f := &fakeBackend{
			TaskFn: func(_ context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
				taskCalls++
				waits = append(waits, wait)
				if taskCalls < 3 {
					return shard.TaskView{ID: id, Group: id.Group(), State: shard.Running}, nil
				}
				return doneTask(id), nil
			},
			GroupFn: func(_ context.Context, id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
				groupCalls++
				if groupCalls < 3 {
					return runningGroup(id), nil
				}
				g := runningGroup(id)
				g.State, g.Tasks[1].State = shard.GroupSucceeded, shard.Succeeded
				return g, nil
			},
		}
		c := &Client{BaseURL: "http://peer", HTTP: &http.Client{Transport: handlerTransport{newTestHandler(f, HandlerOptions{})}}}
		task, err := c.WaitTask(t.Context(), "g1.0")
		if err != nil || task.State != "SUCCEEDED" || taskCalls != 3 {
			t.Fatalf("WaitTask = %+v, %v after %d calls; want SUCCEEDED after 3", task, err, taskCalls)
		}
		for _, w := range waits {
			if w != DefaultMaxWait {
				t.Errorf("long poll waited %v; want %v", w, DefaultMaxWait)
			}
		}
		g, err := c.WaitGroup(t.Context(), "g2")
		if err != nil || g.State != "SUCCEEDED" || len(g.Tasks) != 2 || groupCalls != 4 {
			t.Fatalf("WaitGroup = %+v, %v after %d calls; want SUCCEEDED with its 2 tasks after 4", g, err, groupCalls)
		}
		ctx, cancel := context.WithCancel(t.Context())
		taskCalls = 0
		go func() { synctest.Wait(); cancel() }()
		if _, err := c.WaitTask(ctx, "g1.0"); err == nil {
			t.Error("WaitTask after ctx ended = nil error")
		}
	})
}
