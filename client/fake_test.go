package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// fakePeer serves the worker protocol from memory, as docs/api.md
// describes it, and records what the worker sent. Its knobs make requests
// fail.
type fakePeer struct {
	mu       sync.Mutex
	queue    []api.WorkerTask
	more     chan struct{} // closed and replaced when the queue grows
	leases   map[string]api.WorkerTask
	outcomes map[string]any // by lease: api.CompleteRequest, api.FailRequest or api.ReleaseRequest, the first taken
	reports  map[string]int // by lease: outcome requests received
	beats    map[string]int // by lease: heartbeats received
	logs     map[string][]string
	polls    []pollBody
	done     chan struct{} // closed once outcomes reaches want
	want     int

	failNext    map[string]int          // by path kind (poll, complete, fail, heartbeat): answer 503 this many times
	dropNext    int                     // requests that fail in transport (no answer)
	lost        map[string]bool         // leases answering 409 lease_lost
	cancelAfter int                     // heartbeats after which a lease is canceled (0: never)
	refusePoll  int                     // a status every poll gets (0: none)
	noBatch     bool                    // an older peer: no batch route, no "done" in polls
	batches     []int                   // sizes of the batches received on the batch route
	single      int                     // outcomes received on the per-lease routes
	gate        chan struct{}           // batch reports wait for it when set
	pollDone    [][]doneEntry           // the outcomes each poll carried, as it arrived
	noRelease   bool                    // an older peer: no release route, no "release" in batches
	noSlots     bool                    // an older peer: a poll with "slots" is a 400 naming it
	noLineTimes bool                    // an older peer: log lines with times are a 400 naming lines
	logTimes    map[string][]*time.Time // lease -> the times its lines came with (nil: none)
	maxBody     int                     // bodies over it are 413 (0: no limit)
}

func newFakePeer(want int) *fakePeer {
	return &fakePeer{more: make(chan struct{}), leases: map[string]api.WorkerTask{}, outcomes: map[string]any{},
		reports: map[string]int{}, beats: map[string]int{}, logs: map[string][]string{}, logTimes: map[string][]*time.Time{}, done: make(chan struct{}),
		want: want, failNext: map[string]int{}, lost: map[string]bool{}}
}

// add queues tasks of handler h with the given payloads.
func (f *fakePeer) add(h string, payloads ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range payloads {
		n := len(f.leases) + len(f.queue)
		t := api.WorkerTask{Task: api.Task{ID: fmt.Sprintf("g.%d", n), Group: "g", Handler: h, State: "RUNNING", Round: 1},
			Payload: json.RawMessage(p), Lease: fmt.Sprintf("%032x", n+1), Deadline: time.Now().Add(time.Hour), Timeout: "1h"}
		f.queue = append(f.queue, t)
	}
	close(f.more)
	f.more = make(chan struct{})
}

// client returns a client whose requests f serves in memory.
func (f *fakePeer) client() *Client {
	return &Client{BaseURL: "http://peer", HTTP: &http.Client{Transport: f}}
}

// RoundTrip serves one request, or fails it in transport.
func (f *fakePeer) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	if f.dropNext > 0 {
		f.dropNext--
		f.mu.Unlock()
		return nil, errors.New("connection refused")
	}
	f.mu.Unlock()
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, req)
	return rec.Result(), nil
}

func (f *fakePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a JSON POST", http.StatusBadRequest)
		return
	}
	if f.maxBody > 0 {
		body, _ := io.ReadAll(r.Body)
		if len(body) > f.maxBody {
			writeErr(w, http.StatusRequestEntityTooLarge, "payload_too_large")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	kind := "poll"
	lease := ""
	if r.URL.Path == "/v1/leases/report" {
		if f.noBatch {
			http.NotFound(w, r)
			return
		}
		kind = "report"
	} else if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/leases/"); ok {
		lease, kind, _ = strings.Cut(rest, "/")
	} else if r.URL.Path != "/v1/workers/poll" {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	if f.failNext[kind] > 0 {
		f.failNext[kind]--
		f.mu.Unlock()
		writeErr(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	f.mu.Unlock()
	switch kind {
	case "poll":
		f.poll(w, r)
		return
	case "report":
		f.report(w, r)
		return
	}
	f.lease(w, r, kind, lease)
}

func writeErr(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: code, Message: code}})
}

func (f *fakePeer) poll(w http.ResponseWriter, r *http.Request) {
	var b pollBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid_argument")
		return
	}
	f.mu.Lock()
	if f.noSlots && b.Slots != 0 {
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: "invalid_argument", Message: "unknown field", Field: "slots"}})
		return
	}
	done := f.takeAll(b.Done) // at once, as a peer does
	f.pollDone = append(f.pollDone, b.Done)
	f.mu.Unlock()
	wait, err := time.ParseDuration(b.Wait)
	if err != nil || b.Max < 1 {
		writeErr(w, http.StatusBadRequest, "invalid_argument")
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f.mu.Lock()
		if f.refusePoll != 0 {
			f.mu.Unlock()
			writeErr(w, f.refusePoll, "unauthenticated")
			return
		}
		if len(f.queue) > 0 {
			break
		}
		more := f.more
		f.mu.Unlock()
		select {
		case <-more:
			continue
		case <-timer.C:
		case <-r.Context().Done():
		}
		f.mu.Lock()
		break
	}
	defer f.mu.Unlock()
	f.polls = append(f.polls, b)
	n := min(b.Max, len(f.queue))
	got := f.queue[:n]
	f.queue = f.queue[n:]
	for _, t := range got {
		f.leases[t.Lease] = t
	}
	writeJSON(w, api.PollResult{Tasks: append([]api.WorkerTask{}, got...), Done: done})
}

// report serves POST /v1/leases/report; it waits for gate when set.
func (f *fakePeer) report(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	var b struct {
		Done []doneEntry `json:"done"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.Done == nil {
		writeErr(w, http.StatusBadRequest, "invalid_argument")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range b.Done {
		if f.noRelease && d.Release {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: "invalid_argument", Message: "unknown field",
				Field: fmt.Sprintf("done[%d].release", i)}})
			return
		}
	}
	f.batches = append(f.batches, len(b.Done))
	writeJSON(w, api.ReportResult{Done: f.takeAll(b.Done)})
}

// takeAll takes a batch of outcomes and returns the verdicts. f.mu is held.
func (f *fakePeer) takeAll(done []doneEntry) []api.LeaseVerdict {
	var vs []api.LeaseVerdict
	for _, d := range done {
		if _, ok := f.leases[d.Lease]; !ok || f.lost[d.Lease] {
			vs = append(vs, api.LeaseVerdict{Lease: d.Lease, Status: http.StatusConflict, Error: &api.Error{Code: api.CodeLeaseLost, Message: "lost"}})
			continue
		}
		var out any = api.CompleteRequest{Result: d.Result}
		switch {
		case d.Release:
			out = api.ReleaseRequest{Reason: d.Reason}
		case d.Error != "":
			out = api.FailRequest{Error: d.Error, Permanent: d.Permanent}
		}
		f.take(d.Lease, out)
		vs = append(vs, api.LeaseVerdict{Lease: d.Lease, Status: http.StatusOK})
	}
	return vs
}

// take records an outcome of lease (the first is kept). f.mu is held.
func (f *fakePeer) take(lease string, out any) {
	f.reports[lease]++
	if _, ok := f.outcomes[lease]; !ok {
		f.outcomes[lease] = out
		if len(f.outcomes) == f.want {
			close(f.done)
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fakePeer) lease(w http.ResponseWriter, r *http.Request, kind, lease string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.leases[lease]; !ok || f.lost[lease] {
		writeErr(w, http.StatusConflict, api.CodeLeaseLost)
		return
	}
	switch kind {
	case "heartbeat":
		f.beats[lease]++
		writeJSON(w, api.HeartbeatResult{Canceled: f.cancelAfter > 0 && f.beats[lease] >= f.cancelAfter})
	case "logs":
		var b api.LogsRequest
		data, _ := io.ReadAll(r.Body)
		if err := api.DecodeLogs(data, &b); err != nil || f.noLineTimes && strings.Contains(string(data), `"at"`) {
			// An older peer takes strings only: a 400 naming lines.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: "invalid_argument", Message: "want string", Field: "lines"}})
			return
		}
		for _, l := range b.Lines {
			f.logs[lease] = append(f.logs[lease], l.Text)
			f.logTimes[lease] = append(f.logTimes[lease], l.At)
		}
		writeJSON(w, map[string]bool{"ok": true})
	case "complete", "fail", "release":
		if kind == "release" && f.noRelease {
			http.NotFound(w, r)
			return
		}
		if f.noBatch {
			f.single++
		}
		var out any
		switch kind {
		case "complete":
			var b api.CompleteRequest
			json.NewDecoder(r.Body).Decode(&b)
			out = b
		case "fail":
			var b api.FailRequest
			json.NewDecoder(r.Body).Decode(&b)
			out = b
		default:
			var b api.ReleaseRequest
			json.NewDecoder(r.Body).Decode(&b)
			out = b
		}
		f.take(lease, out)
		writeJSON(w, map[string]bool{"ok": true})
	default:
		http.NotFound(w, r)
	}
}

// outcome returns the outcome taken for the task with payload index i.
func (f *fakePeer) outcome(i int) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outcomes[fmt.Sprintf("%032x", i+1)]
}
