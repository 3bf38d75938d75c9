package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// External workers: processes in any language that poll a peer for the
// tasks of the handlers they serve (POST /v1/workers/poll), then report
// each outcome on the lease the poll handed out (POST /v1/leases/{lease}/
// complete, fail, heartbeat, logs). See docs/api.md, "Workers".

// Bounds of a poll.
const (
	MaxPollTasks   = 1000            // "max" of one poll
	MaxPollWait    = 5 * time.Minute // "wait" of one poll
	maxPollLabels  = 64
	maxHandlers    = 256 // handlers of one poll
	maxLogLines    = 10_000
	maxWorkerIDLen = 256
	maxLeaseLen    = 128
)

// ErrLeaseLost is returned by a Workers backend for an outcome, heartbeat
// or log on a lease that is no longer current: it expired, its worker was
// declared dead, its task was canceled or runs in a newer round. Nothing
// changed. HTTP 409 lease_lost.
var ErrLeaseLost = errors.New("api: lease lost")

// CodeLeaseLost is the error code of ErrLeaseLost.
const CodeLeaseLost = "lease_lost"

// PollRequest is the body of POST /v1/workers/poll.
type PollRequest struct {
	Worker string // the worker's id, chosen by the worker
	// Instance names the worker's process (optional, new at each start):
	// a poll under the same id from another instance says the previous
	// one is gone, and its leases are handed back at once.
	Instance string
	Handlers []string // the handlers it serves
	Max      int      // tasks it takes at most, 1..1000
	// Slots is the worker's capacity: how many tasks it runs at once, as
	// configured (a Go worker's Concurrency, a Python worker's
	// concurrency), 1..1000; 0 when the worker does not say (an older
	// one). GET /v1/workers shows it; Max is what one poll asks for.
	Slots  int
	Wait   time.Duration // how long to wait for one, 0..5m
	Labels []string      // its labels, "key=value"
	// Done holds outcomes of the worker's leases, applied before the poll
	// looks for tasks (as POST /v1/leases/report does).
	Done []LeaseOutcome
	// Authorized, when set, re-checks the poll's token (Tokens.Recheck):
	// the backend calls it before it hands the poll a task, and ends the
	// poll with its error, handing it nothing, once it fails (the token
	// was revoked while the poll waited). Not on the wire.
	Authorized func() error
}

// pollBody is PollRequest on the wire.
type pollBody struct {
	Worker   string          `json:"worker"`
	Instance string          `json:"instance"`
	Handlers []string        `json:"handlers"`
	Max      *int            `json:"max"`
	Slots    *int            `json:"slots"`
	Wait     *string         `json:"wait"`
	Labels   []string        `json:"labels"`
	Done     json.RawMessage `json:"done"`
}

// WorkerTask is a task handed to a worker: the task as GET /v1/tasks/{id}
// shows it (RUNNING, its round), with what the handler needs and the
// lease to report on, and its priority, error (the last failed attempt's,
// while it runs again), stage and item; but Retries and Deps are left out
// (only the owner holds them), and StartedAt is when the worker got it.
// A peer of an older release leaves out the priority, error, stage, item
// and max_attempts too.
type WorkerTask struct {
	Task
	Payload json.RawMessage            `json:"payload"`
	Inputs  map[string]json.RawMessage `json:"inputs,omitempty"` // results of its dependencies, by name
	Timeout string                     `json:"timeout"`          // the attempt's timeout
	// Trace is the trace of the task's group: a W3C traceparent when the
	// submission had one (the worker's spans are its children), else an id.
	Trace string `json:"trace,omitempty"`
	// Lease is the opaque token to report the outcome on; Deadline is when
	// the lease runs out (the attempt's timeout): an outcome after it is
	// refused (409 lease_lost) and the attempt counts as timed out.
	Lease    string    `json:"lease"`
	Deadline time.Time `json:"deadline"`
	// Shard and Shards are set on the copies of a broadcast: this copy's
	// index (0-based) and the number of copies.
	Shard  *int `json:"shard,omitempty"`
	Shards *int `json:"shards,omitempty"`
	// MaxAttempts is the attempts in all its retry policy allows: the
	// attempt with Attempt+1 == MaxAttempts is the last (0 from a peer of
	// an older release).
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// PollResult is the body of a poll's answer.
type PollResult struct {
	Tasks []WorkerTask `json:"tasks"`
	// Done answers the poll's "done" entries, in their order.
	Done []LeaseVerdict `json:"done,omitempty"`
}

// CompleteRequest is the body of POST /v1/leases/{lease}/complete.
type CompleteRequest struct {
	Result json.RawMessage `json:"result"`
}

// FailRequest is the body of POST /v1/leases/{lease}/fail.
type FailRequest struct {
	Error     string `json:"error"`
	Permanent bool   `json:"permanent"`
}

// ReleaseRequest is the body of POST /v1/leases/{lease}/release (optional).
type ReleaseRequest struct {
	Reason string `json:"reason"`
}

// MaxReleaseReason bounds a release's reason, in bytes.
const MaxReleaseReason = 1024

// LogsRequest is the body of POST /v1/leases/{lease}/logs.
type LogsRequest struct {
	Lines []WorkerLogLine `json:"lines"`
}

// WorkerLogLine is one line of a LogsRequest: its text, and when the
// handler wrote it (nil: not said; the peer takes its arrival time). On
// the wire a line without a time is a JSON string, as every release
// takes it, and one with a time {"text": "...", "at": "<RFC 3339>"}.
type WorkerLogLine struct {
	Text string
	At   *time.Time
}

// MarshalJSON writes the line as a string when it has no time.
func (l WorkerLogLine) MarshalJSON() ([]byte, error) {
	if l.At == nil {
		return json.Marshal(l.Text)
	}
	return json.Marshal(struct {
		Text string    `json:"text"`
		At   time.Time `json:"at"`
	}{l.Text, *l.At})
}

// HeartbeatResult is the answer to a lease heartbeat.
type HeartbeatResult struct {
	// Canceled says the task (or its group) was canceled: the worker may
	// stop; any outcome it reports is refused.
	Canceled bool      `json:"canceled"`
	Deadline time.Time `json:"deadline"`
}

// WorkerInfo is one external worker as GET /v1/workers lists it.
type WorkerInfo struct {
	ID       string   `json:"id"`
	Peer     string   `json:"peer"` // the peer it polls
	Handlers []string `json:"handlers"`
	Labels   []string `json:"labels,omitempty"`
	Running  int      `json:"running"` // leases it holds
	// Slots is the worker's capacity, the tasks it runs at once, as its
	// polls say (PollRequest.Slots); nil for a worker that does not say
	// (an older one). Running can exceed it by the tasks a worker
	// prefetches.
	Slots *int `json:"slots,omitempty"`
	// Asked is the "max" of its last poll: the tasks it asked for then
	// (its free slots and prefetch), which changes with every poll.
	Asked    int       `json:"asked"`
	LastSeen time.Time `json:"last_seen"`
	Polling  bool      `json:"polling"` // a poll of it is waiting now
}

// WorkerList is the body of GET /v1/workers.
type WorkerList struct {
	Workers []WorkerInfo `json:"workers"`
	// Unreachable names the live peers that did not answer: their workers
	// are missing from the list.
	Unreachable []string `json:"unreachable,omitempty"`
}

// Workers is what a Backend implements to serve external workers.
type Workers interface {
	Poll(ctx context.Context, req PollRequest) (PollResult, error)
	// Complete and Fail report a lease's outcome: ErrLeaseLost when it is
	// not current, nil for a repeat of the outcome already accepted.
	Complete(ctx context.Context, lease string, result json.RawMessage) error
	Fail(ctx context.Context, lease string, msg string, permanent bool) error
	// Release hands a lease's task back unrun, without spending an
	// attempt (the worker stops, or will not run it): ErrLeaseLost when
	// the lease is not current, nil for a repeat.
	Release(ctx context.Context, lease string, reason string) error
	Heartbeat(ctx context.Context, lease string) (HeartbeatResult, error)
	// Logs adds lines to the lease's attempt log, each at its time (its
	// arrival when it has none, or one out of the lease's span).
	Logs(ctx context.Context, lease string, lines []WorkerLogLine) error
	ListWorkers(ctx context.Context) (WorkerList, error)
	Reporter
}

func (s *server) workerRoutes(wk Workers) []route {
	return []route{
		{"POST", "/v1/workers/poll", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.poll(w, r, wk) }},
		{"GET", "/v1/workers", ScopeRead, func(w http.ResponseWriter, r *http.Request) {
			l, err := wk.ListWorkers(r.Context())
			if err != nil {
				s.fail(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, l)
		}},
		{"POST", "/v1/leases/{lease}/complete", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.leaseCall(w, r, wk, "complete") }},
		{"POST", "/v1/leases/{lease}/fail", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.leaseCall(w, r, wk, "fail") }},
		{"POST", "/v1/leases/{lease}/release", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.leaseCall(w, r, wk, "release") }},
		{"POST", "/v1/leases/{lease}/heartbeat", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.leaseCall(w, r, wk, "heartbeat") }},
		{"POST", "/v1/leases/{lease}/logs", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.leaseCall(w, r, wk, "logs") }},
		{"POST", "/v1/leases/report", ScopeWorker, func(w http.ResponseWriter, r *http.Request) { s.report(w, r, wk) }},
	}
}

func (s *server) poll(w http.ResponseWriter, r *http.Request, wk Workers) {
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.opts.Limits.withDefaults().MaxBody), s.opts.Limits.withDefaults().MaxBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := DecodePoll(body)
	if tok, ok := TokenOf(r); ok && err == nil {
		// A token limited to some handlers (handlers=) polls for those only.
		var e *Error
		if errors.As(mayPoll(tok, req.Handlers), &e) {
			writeAuthErr(w, e)
			return
		}
	}
	if err == nil && s.opts.InPeers != nil {
		for i, h := range req.Handlers {
			if s.opts.InPeers(h) {
				err = fieldErr(fmt.Sprintf("handlers[%d]", i), "%s: a worker polling for it never gets a task", InPeersMessage(h))
				break
			}
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Wait > 0 {
		release, ok := s.holdWait(w, r, "wait") // before the outcomes: a 429 did nothing
		if !ok {
			return
		}
		defer release()
	}
	var done []LeaseVerdict
	if len(req.Done) > 0 {
		// The outcomes first: they free the worker's slots for this poll.
		done = s.verdicts(r, "done", req.Done, wk.Report(r.Context(), req.Done))
	}
	ctx := r.Context()
	if s.opts.Tokens != nil {
		// A token revoked while the poll waits (a reload of the token
		// file) ends it with the 401 or 403 a new request would get, and
		// it is handed no task: a revoked credential gets no work.
		req.Authorized = s.opts.Tokens.Recheck(r, ScopeWorker, req.Handlers...)
		if req.Wait > 0 {
			var stop context.CancelFunc
			ctx, stop = s.opts.Tokens.Watch(ctx, req.Authorized)
			defer stop()
		}
	}
	res, err := wk.Poll(ctx, req)
	if e := (*Error)(nil); errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) {
		writeAuthErr(w, e)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.Done = done
	if res.Tasks == nil {
		res.Tasks = []WorkerTask{}
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) leaseCall(w http.ResponseWriter, r *http.Request, wk Workers, op string) {
	lease := r.PathValue("lease")
	if err := ValidLease(lease); err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.opts.Limits.withDefaults().MaxBody), s.opts.Limits.withDefaults().MaxBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch op {
	case "complete":
		var req CompleteRequest
		if err = DecodeComplete(body, &req); err == nil {
			err = wk.Complete(r.Context(), lease, req.Result)
		}
	case "fail":
		var req FailRequest
		if err = DecodeFail(body, &req); err == nil {
			err = wk.Fail(r.Context(), lease, req.Error, req.Permanent)
		}
	case "release":
		var req ReleaseRequest
		if err = DecodeRelease(body, &req); err == nil {
			err = wk.Release(r.Context(), lease, req.Reason)
		}
	case "logs":
		var req LogsRequest
		if err = DecodeLogs(body, &req); err == nil {
			err = wk.Logs(r.Context(), lease, req.Lines)
		}
	case "heartbeat":
		if len(strings.TrimSpace(string(body))) > 0 {
			var v struct{}
			if err = decodeStrict(body, &v, ""); err != nil {
				break
			}
		}
		var hb HeartbeatResult
		if hb, err = wk.Heartbeat(r.Context(), lease); err == nil {
			writeJSON(w, http.StatusOK, hb)
			return
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// InPeersMessage says that handler runs in the peers, never in external
// workers (the start of a 400's message).
func InPeersMessage(handler string) string {
	return fmt.Sprintf("handler %q runs in the peers (built in or registered), never in external workers", handler)
}

// DecodePoll decodes and checks the body of a poll.
func DecodePoll(data []byte) (PollRequest, error) {
	var b pollBody
	if err := decodeStrict(data, &b, ""); err != nil {
		return PollRequest{}, err
	}
	req := PollRequest{Worker: b.Worker, Instance: b.Instance, Handlers: b.Handlers, Labels: b.Labels, Max: 1, Wait: 0}
	switch {
	case b.Worker == "":
		return req, fieldErr("worker", "required: an id the worker picks")
	case len(b.Worker) > maxWorkerIDLen || !printable(b.Worker):
		return req, fieldErr("worker", "want at most %d printable bytes", maxWorkerIDLen)
	case len(b.Instance) > maxWorkerIDLen || !printable(b.Instance):
		return req, fieldErr("instance", "want at most %d printable bytes", maxWorkerIDLen)
	case b.Handlers == nil:
		return req, fieldErr("handlers", "required: the handlers this worker serves")
	case len(b.Handlers) == 0:
		return req, fieldErr("handlers", "empty: name at least one handler")
	case len(b.Handlers) > maxHandlers:
		return req, fieldErr("handlers", "more than %d handlers", maxHandlers)
	case len(b.Labels) > maxPollLabels:
		return req, fieldErr("labels", "more than %d labels", maxPollLabels)
	}
	for i, h := range b.Handlers {
		if err := ValidHandlerName(h); err != nil {
			return req, fieldErr(fmt.Sprintf("handlers[%d]", i), "%v", err)
		}
	}
	keys := make(map[string]string, len(b.Labels)) // key -> its label
	for i, l := range b.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || len(l) > maxNameLen || !printable(k) || !printable(v) || strings.ContainsAny(k, ",=") || strings.Contains(v, ",") {
			return req, fieldErr(fmt.Sprintf("labels[%d]", i), "want key=value, got %q", l)
		}
		if old, dup := keys[k]; dup && old != l {
			return req, fieldErr(fmt.Sprintf("labels[%d]", i), "label %q given twice (%s and %s): a worker has one value per key", k, old, l)
		}
		keys[k] = l
	}
	if b.Max != nil {
		if *b.Max < 1 || *b.Max > MaxPollTasks {
			return req, fieldErr("max", "want 1..%d, got %d", MaxPollTasks, *b.Max)
		}
		req.Max = *b.Max
	}
	if b.Slots != nil {
		if *b.Slots < 1 || *b.Slots > MaxPollTasks {
			return req, fieldErr("slots", "want 1..%d (the tasks the worker runs at once), got %d", MaxPollTasks, *b.Slots)
		}
		req.Slots = *b.Slots
	}
	if b.Wait != nil {
		d, err := time.ParseDuration(*b.Wait)
		if err != nil {
			return req, fieldErr("wait", "want a duration such as \"30s\", got %q", *b.Wait)
		}
		if d < 0 || d > MaxPollWait {
			return req, fieldErr("wait", "want 0s..%v, got %v", MaxPollWait, d)
		}
		req.Wait = d
	}
	if b.Done != nil && string(b.Done) != "null" {
		done, err := DecodeDone(b.Done, "done")
		if err != nil {
			return req, err
		}
		req.Done = done
	}
	return req, nil
}

// DecodeComplete decodes the body of a complete: {"result": <json>}. An
// empty body or a missing result is a null result.
func DecodeComplete(data []byte, req *CompleteRequest) error {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if err := decodeStrict(data, req, ""); err != nil {
		return err
	}
	if !utf8.Valid(req.Result) {
		return notUTF8("result")
	}
	return nil
}

// DecodeFail decodes the body of a fail: {"error": "...", "permanent": false}.
func DecodeFail(data []byte, req *FailRequest) error {
	if err := decodeStrict(data, req, ""); err != nil {
		return err
	}
	if req.Error == "" {
		return fieldErr("error", "required: say why the attempt failed")
	}
	return nil
}

// DecodeRelease decodes the body of a release call: empty, or
// {"reason": "..."}.
func DecodeRelease(data []byte, req *ReleaseRequest) error {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if err := decodeStrict(data, req, ""); err != nil {
		return err
	}
	return checkReason(req.Reason, "reason")
}

func checkReason(reason, field string) error {
	if len(reason) > MaxReleaseReason {
		return fieldErr(field, "%d bytes, over %d", len(reason), MaxReleaseReason)
	}
	return nil
}

// DecodeLogs decodes the body of a logs call: {"lines": ["...", ...]}.
//
// A line is a string, or an object {"text", "at"} whose "at" (RFC 3339,
// optional) is when the handler wrote it: a malformed time is a
// *FieldError naming lines[i].at.
func DecodeLogs(data []byte, req *LogsRequest) error {
	var b struct {
		Lines []json.RawMessage `json:"lines"`
	}
	if err := decodeStrict(data, &b, ""); err != nil {
		return err
	}
	if len(b.Lines) > maxLogLines {
		return fieldErr("lines", "more than %d lines in one call", maxLogLines)
	}
	req.Lines = make([]WorkerLogLine, len(b.Lines))
	for i, raw := range b.Lines {
		path := fmt.Sprintf("lines[%d]", i)
		var o struct {
			Text *string `json:"text"`
			At   *string `json:"at"`
		}
		switch raw := bytes.TrimSpace(raw); {
		case len(raw) > 0 && raw[0] == '"':
			if err := decodeStrict(raw, &req.Lines[i].Text, path); err != nil {
				return err
			}
			continue
		case len(raw) == 0 || raw[0] != '{':
			return fieldErr(path, "want a string, or an object {\"text\", \"at\"}")
		default:
			if err := decodeStrict(raw, &o, path); err != nil {
				return err
			}
		}
		if o.Text == nil {
			return fieldErr(path+".text", "required: the line")
		}
		req.Lines[i].Text = *o.Text
		if o.At != nil {
			at, err := time.Parse(time.RFC3339Nano, *o.At)
			if err != nil {
				return fieldErr(path+".at", "want an RFC 3339 time (when the handler wrote the line), got %q", *o.At)
			}
			req.Lines[i].At = &at
		}
	}
	return nil
}

// ValidHandlerName checks a handler name: 1 to 256 bytes of letters,
// digits and . _ - : / @ +, starting with a letter or digit.
func ValidHandlerName(h string) error {
	if h == "" {
		return errors.New("empty handler name")
	}
	if len(h) > maxNameLen {
		return fmt.Errorf("handler name longer than %d bytes", maxNameLen)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._-:/@+", rune(c))) {
			return fmt.Errorf("malformed handler name %q: want letters, digits and . _ - : / @ +, starting with a letter or digit", h)
		}
	}
	return nil
}

// ValidLease checks the form of a lease token (the peer's tokens are 32
// lowercase hex digits); a malformed one is a 400 naming "lease".
func ValidLease(l string) error {
	if l == "" || len(l) > maxLeaseLen {
		return fieldErr("lease", "malformed lease token")
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fieldErr("lease", "malformed lease token")
		}
	}
	return nil
}

// printable reports whether s is non-control ASCII or UTF-8 text.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}
