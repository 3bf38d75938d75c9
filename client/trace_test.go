package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/needle-mesh/needle/peer/api"
)

// roundTrip is an http.RoundTripper as a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWorkerTaskTrace: a polled task's trace reaches the handler (Task.Trace),
// and a submission the handler makes with its ctx carries it as the
// traceparent header: the subtask joins the task's trace.
func TestWorkerTaskTrace(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	synctest.Test(t, func(t *testing.T) {
		f := newFakePeer(1)
		f.add("fanout", "1")
		f.mu.Lock()
		f.queue[0].Trace = tp
		f.mu.Unlock()
		sent := make(chan string, 1)
		sub := &api.Client{BaseURL: "http://peer", HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
			sent <- r.Header.Get("traceparent")
			rec := httptest.NewRecorder()
			rec.WriteHeader(http.StatusCreated)
			_, _ = rec.WriteString(`{"id": "g2.0", "group": "g2"}`)
			return rec.Result(), nil
		})}}
		var seen string
		w := &Worker{Client: f.client(), Handlers: map[string]HandlerFunc{
			"fanout": func(ctx context.Context, task Task) (json.RawMessage, error) {
				seen = task.Trace
				_, err := sub.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo"}})
				return nil, err
			},
		}}
		cancel, wait := runWorker(t, w)
		<-f.done
		cancel()
		if err := wait(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if got := <-sent; seen != tp || got != tp {
			t.Fatalf("Task.Trace %q, the subtask's traceparent %q; want %q", seen, got, tp)
		}
	})
}
