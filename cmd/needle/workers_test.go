package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// workersBackend serves GET /v1/workers from a fixed list.
type workersBackend struct {
	*fakeBackend
	list api.WorkerList
}

var errNoLeases = errors.New("no leases here")

func (w *workersBackend) Poll(context.Context, api.PollRequest) (api.PollResult, error) {
	return api.PollResult{}, nil
}
func (w *workersBackend) Complete(context.Context, string, json.RawMessage) error { return errNoLeases }
func (w *workersBackend) Fail(context.Context, string, string, bool) error        { return errNoLeases }
func (w *workersBackend) Release(context.Context, string, string) error           { return errNoLeases }

var _ api.Workers = (*workersBackend)(nil) // a method short, and the routes are not served
func (w *workersBackend) Heartbeat(context.Context, string) (api.HeartbeatResult, error) {
	return api.HeartbeatResult{}, errNoLeases
}
func (w *workersBackend) Logs(context.Context, string, []api.WorkerLogLine) error { return errNoLeases }
func (w *workersBackend) Report(_ context.Context, done []api.LeaseOutcome) []error {
	errs := make([]error, len(done))
	for i := range errs {
		errs[i] = errNoLeases
	}
	return errs
}
func (w *workersBackend) ListWorkers(context.Context) (api.WorkerList, error) {
	return w.list, nil
}

func TestWorkersCommand(t *testing.T) {
	b := &workersBackend{fakeBackend: &fakeBackend{}, list: api.WorkerList{
		Workers: []api.WorkerInfo{{ID: "resizer-1", Peer: "12D3KooWAbcdefghijkl", Handlers: []string{"resize", "email"},
			Labels: []string{"zone=a"}, Running: 3, Slots: new(8), Asked: 5, LastSeen: time.Now(), Polling: true},
			{ID: "old-worker", Peer: "12D3KooWAbcdefghijkl", Handlers: []string{"resize"}, Running: 1, Asked: 1, LastSeen: time.Now()}},
		Unreachable: []string{"12D3KooWGone"}}}
	srv := httptest.NewServer(api.NewHandler(b, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	r := runCLI(t, srv.URL, "", "workers")
	r.check(t, 0, "resizer-1", "not answering")
	for _, want := range []string{"resize,email", "zone=a", "…efghijkl", "yes"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("needle workers printed %q; want it to contain %q", r.stdout, want)
		}
	}
	// SLOTS is the worker's capacity, not what its last poll asked for;
	// a worker that does not say shows "-".
	for _, row := range []struct{ id, running, slots string }{{"resizer-1", "3", "8"}, {"old-worker", "1", "-"}} {
		if f := fieldsOf(r.stdout, row.id); len(f) < 6 || f[4] != row.running || f[5] != row.slots {
			t.Errorf("needle workers row %q = %q; want RUNNING %s, SLOTS %s", row.id, f, row.running, row.slots)
		}
	}
	runCLI(t, srv.URL, "", "workers", "--json").check(t, 0, `"handlers"`, "")
	runCLI(t, srv.URL, "", "workers", "extra").check(t, 2, "", "no arguments")
}

// fieldsOf returns the fields of the line of out that starts with first.
func fieldsOf(out, first string) []string {
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}
