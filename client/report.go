package client

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/needle-mesh/needle/peer/api"
)

// doneEntry is one outcome of a batch on the wire (docs/api.md, "POST
// /v1/leases/report"): a complete (Result) or a fail (Error, Permanent).
type doneEntry struct {
	Lease     string          `json:"lease"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Permanent bool            `json:"permanent,omitempty"`
}

// outcome is a finished run waiting to be reported, with its task's ids
// for the log (not the Task: outcomes are queued and copied by value).
type outcome struct {
	entry     doneEntry
	id, group string
	round     uint64
}

// newOutcome turns a handler's result or error into the outcome to report.
// stopping marks a run the worker cut short: its failure is retryable.
func newOutcome(t Task, res json.RawMessage, err error, stopping bool) outcome {
	e := doneEntry{Lease: t.Lease, Result: res}
	switch {
	case err != nil:
		e = doneEntry{Lease: t.Lease, Error: err.Error(), Permanent: IsPermanent(err) && !stopping}
	case len(res) == 0:
		e.Result = json.RawMessage("null")
	case !json.Valid(res):
		e = doneEntry{Lease: t.Lease, Error: "the handler's result is not JSON", Permanent: true}
	}
	return outcome{entry: e, id: t.ID, group: t.Group, round: t.Round}
}

// reporter sends the outcomes of a Run in batches: one request at a time
// carries every outcome that finished while the previous one was in
// flight, so short tasks cost a fraction of a round trip each. Polls
// carry none: a poll with outcomes is answered only once the peer's loop
// took them, which would hold back the tasks it brings (W1 through Go
// workers: 13-33% more tasks/s without).
type reporter struct {
	w *Worker
	c *conn
	// room holds one token per outcome not yet answered: twice the slots,
	// so that while one batch is in flight the slots of the next are free.
	room chan struct{}

	mu      sync.Mutex
	pending []outcome
	wake    chan struct{} // signalled when pending grows
	stop    chan struct{} // closed once no outcome will be added
	legacy  bool          // the peer has no batch route: one call per lease
}

func newReporter(w *Worker, c *conn, room int) *reporter {
	return &reporter{w: w, c: c, room: make(chan struct{}, room), wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// add queues an outcome; it waits while room outcomes are unanswered.
func (rp *reporter) add(o outcome) {
	rp.room <- struct{}{}
	rp.mu.Lock()
	rp.pending = append(rp.pending, o)
	rp.mu.Unlock()
	select {
	case rp.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to api.MaxReport waiting outcomes.
func (rp *reporter) take() []outcome {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	n := min(len(rp.pending), api.MaxReport)
	out := rp.pending[:n:n]
	rp.pending = rp.pending[n:]
	if len(rp.pending) == 0 {
		rp.pending = nil
	}
	return out
}

// entries returns the wire form of outcomes.
func entries(os []outcome) []doneEntry {
	out := make([]doneEntry, len(os))
	for i := range os {
		out[i] = os[i].entry
	}
	return out
}

// answered logs the verdicts the peer gave on outcomes and frees their
// room.
func (rp *reporter) answered(ctx context.Context, os []outcome, vs []api.LeaseVerdict, err error) {
	for i, o := range os {
		verr := err
		if err == nil && (i >= len(vs) || vs[i].Status != http.StatusOK) {
			verr = errors.New("client: the peer gave no verdict")
			if i < len(vs) {
				verr = answerError(vs[i].Status, mustJSON(api.ErrorBody{Error: vs[i].Error}))
			}
		}
		if verr != nil {
			rp.logRefused(ctx, o, verr)
		}
		<-rp.room
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (rp *reporter) logRefused(ctx context.Context, o outcome, err error) {
	level := slog.LevelWarn
	if errors.Is(err, errLeaseLost) {
		level = slog.LevelInfo
	}
	rp.w.Logger.Log(ctx, level, "outcome not taken", "task", o.id, "group", o.group, "round", o.round, "err", err)
}

// run sends the waiting outcomes until stop is closed and none is left.
func (rp *reporter) run() {
	for {
		if rp.sendWaiting() {
			continue
		}
		select {
		case <-rp.wake:
		case <-rp.stop:
			if rp.sendWaiting() {
				continue
			}
			return
		}
	}
}

// sendWaiting sends a batch of the waiting outcomes; false when none was.
func (rp *reporter) sendWaiting() bool {
	batch := rp.take()
	if len(batch) > 0 {
		rp.send(batch)
	}
	return len(batch) > 0
}

// send reports a batch, retrying transient errors for reportTimeout. A
// peer without the batch route (an older version: 404) is sent each
// outcome on its own lease, from then on.
func (rp *reporter) send(batch []outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	bo := backoff{min: rp.w.BackoffMin, max: rp.w.BackoffMax}
	if !rp.legacy {
		var ans api.ReportResult
		err := rp.c.retry(ctx, bo, "/v1/leases/report", struct {
			Done []doneEntry `json:"done"`
		}{entries(batch)}, &ans)
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusNotFound || errors.Is(err, errLeaseLost) {
			rp.answered(ctx, batch, ans.Done, err)
			return
		}
		rp.legacy = true
	}
	for _, o := range batch {
		path, body := "/v1/leases/"+o.entry.Lease+"/complete", any(api.CompleteRequest{Result: o.entry.Result})
		if o.entry.Error != "" {
			path, body = "/v1/leases/"+o.entry.Lease+"/fail", api.FailRequest{Error: o.entry.Error, Permanent: o.entry.Permanent}
		}
		err := rp.c.retry(ctx, bo, path, body, nil)
		rp.answered(ctx, []outcome{o}, []api.LeaseVerdict{{Status: http.StatusOK}}, err)
	}
}
