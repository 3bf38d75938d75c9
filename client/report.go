package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/needle-mesh/needle/peer/api"
)

// doneEntry is one outcome of a batch on the wire (docs/api.md, "POST
// /v1/leases/report"): a complete (Result), a fail (Error, Permanent) or a
// release (Release, Reason).
type doneEntry struct {
	Lease     string          `json:"lease"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Permanent bool            `json:"permanent,omitempty"`
	Release   bool            `json:"release,omitempty"`
	Reason    string          `json:"reason,omitempty"`
}

// size is about what the entry takes in a request.
func (e *doneEntry) size() int {
	return len(e.Lease) + len(e.Result) + len(e.Error) + len(e.Reason) + 96
}

// Bounds of what a worker sends.
const (
	// maxResult is the largest result a mesh stores (needled's
	// --max-result is at most this): a larger one fails its task here,
	// for good, rather than in a request the peer refuses whole.
	maxResult = 8 << 20
	// maxBatchBytes bounds one batch of outcomes, well under the peer's
	// --max-body (32 MiB by default); a peer with a smaller one answers
	// 413, and the batch is sent again in halves.
	maxBatchBytes = 16 << 20
	// maxReason bounds a release's reason (api.MaxReleaseReason).
	maxReason = api.MaxReleaseReason
)

// outcome is a finished run waiting to be reported, with its task's ids
// for the log (not the Task: outcomes are queued and copied by value).
type outcome struct {
	entry     doneEntry
	id, group string
	round     uint64
}

// newOutcome turns a handler's result or error into the outcome to report.
// stopping marks a run the worker cut short: its failure is retryable.
//
// A run cut short (stopping) is released: its task runs again, no attempt
// spent, as when a worker is killed (a clean stop must not cost more).
func newOutcome(t Task, res json.RawMessage, err error, stopping bool) outcome {
	e := doneEntry{Lease: t.Lease, Result: res}
	switch {
	case stopping:
		why := "the worker stopped"
		if err != nil {
			why = err.Error()
		}
		e = doneEntry{Lease: t.Lease, Release: true, Reason: cut(why, maxReason)}
	case err != nil:
		e = doneEntry{Lease: t.Lease, Error: err.Error(), Permanent: IsPermanent(err)}
	case len(res) == 0:
		e.Result = json.RawMessage("null")
	case len(res) > maxResult:
		e = doneEntry{Lease: t.Lease, Error: fmt.Sprintf("the handler's result of %d bytes is over the largest a mesh stores (%d)", len(res), maxResult), Permanent: true}
	case !json.Valid(res):
		e = doneEntry{Lease: t.Lease, Error: "the handler's result is not JSON", Permanent: true}
	}
	return outcome{entry: e, id: t.ID, group: t.Group, round: t.Round}
}

// cut returns s, or its first bytes up to n on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// asFail turns a release into the retryable fail a peer without releases
// takes instead.
func asFail(e doneEntry) doneEntry {
	if !e.Release {
		return e
	}
	return doneEntry{Lease: e.Lease, Error: e.Reason}
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
	// noRelease: the peer takes no releases (an older version): a
	// release goes as a retryable fail.
	noRelease bool
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

// take removes and returns up to api.MaxReport waiting outcomes, of
// about maxBatchBytes at most (one at least).
func (rp *reporter) take() []outcome {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	n, size := 0, 0
	for n < min(len(rp.pending), api.MaxReport) {
		if size += rp.pending[n].entry.size(); n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	out := rp.pending[:n:n]
	rp.pending = rp.pending[n:]
	if len(rp.pending) == 0 {
		rp.pending = nil
	}
	return out
}

// entries returns the wire form of outcomes; releases as fails when the
// peer has none.
func (rp *reporter) entries(os []outcome) []doneEntry {
	out := make([]doneEntry, len(os))
	for i := range os {
		out[i] = os[i].entry
		if rp.noRelease {
			out[i] = asFail(out[i])
		}
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
		}{rp.entries(batch)}, &ans)
		var e *api.Error
		switch {
		case !errors.As(err, &e) || errors.Is(err, errLeaseLost):
		case e.Status == http.StatusRequestEntityTooLarge && len(batch) > 1:
			// The peer's --max-body is smaller than a batch: in halves.
			rp.send(batch[:len(batch)/2])
			rp.send(batch[len(batch)/2:])
			return
		case e.Status == http.StatusRequestEntityTooLarge:
			// One outcome alone is over it: its task fails for good
			// rather than waiting out its timeout.
			o := batch[0]
			o.entry = doneEntry{Lease: o.entry.Lease, Permanent: true,
				Error: fmt.Sprintf("the outcome of %d bytes is over what the peer takes in one request (its --max-body)", o.entry.size())}
			rp.send([]outcome{o})
			return
		case e.Status == http.StatusBadRequest && !rp.noRelease && (strings.HasSuffix(e.Field, ".release") || strings.HasSuffix(e.Field, ".reason")):
			// An older peer, which knows no release.
			rp.noRelease = true
			rp.send(batch)
			return
		case e.Status == http.StatusNotFound:
			rp.legacy = true
		}
		if !rp.legacy {
			rp.answered(ctx, batch, ans.Done, err)
			return
		}
	}
	for _, o := range batch {
		path, body := "/v1/leases/"+o.entry.Lease+"/complete", any(api.CompleteRequest{Result: o.entry.Result})
		switch e := o.entry; {
		case e.Release && !rp.noRelease:
			path, body = "/v1/leases/"+e.Lease+"/release", api.ReleaseRequest{Reason: e.Reason}
		case e.Release || e.Error != "":
			e = asFail(e)
			path, body = "/v1/leases/"+e.Lease+"/fail", api.FailRequest{Error: e.Error, Permanent: e.Permanent}
		}
		err := rp.c.retry(ctx, bo, path, body, nil)
		var ae *api.Error
		if o.entry.Release && !rp.noRelease && errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed) && !errors.Is(err, errLeaseLost) {
			// A peer older still: no release route. Sent again as a fail.
			rp.noRelease = true
			f := asFail(o.entry)
			err = rp.c.retry(ctx, bo, "/v1/leases/"+f.Lease+"/fail", api.FailRequest{Error: f.Error}, nil)
		}
		rp.answered(ctx, []outcome{o}, []api.LeaseVerdict{{Status: http.StatusOK}}, err)
	}
}
