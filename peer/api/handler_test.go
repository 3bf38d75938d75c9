package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

type response struct {
	status int
	header http.Header
	body   string
}

// call sends one request to h.
func call(tb testing.TB, h http.Handler, method, target, body string, hdr ...string) response {
	tb.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{rec.Code, rec.Header(), rec.Body.String()}
}

// errorOf decodes an error body.
func errorOf(tb testing.TB, r response) *Error {
	tb.Helper()
	var eb ErrorBody
	if err := json.Unmarshal([]byte(r.body), &eb); err != nil || eb.Error == nil {
		tb.Fatalf("body %q is not an error body: %v", r.body, err)
	}
	return eb.Error
}

func newTestHandler(f *fakeBackend, opts HandlerOptions) http.Handler {
	if opts.Limits.HasHandler == nil {
		opts.Limits = testLimits()
	}
	return NewHandler(f, opts)
}

func TestSubmitTaskCreatedThenRepeat(t *testing.T) {
	f := &fakeBackend{}
	h := newTestHandler(f, HandlerOptions{})
	body := `{"handler": "echo", "payload": {"any": "json"}, "key": "k"}`
	r := call(t, h, "POST", "/v1/tasks", body)
	if r.status != http.StatusCreated || r.body != `{"id":"g1.0","group":"g1"}`+"\n" {
		t.Fatalf("first submit = %d %s; want 201 with ids", r.status, r.body)
	}
	if got := r.header.Get("Location"); got != "/v1/tasks/g1.0" {
		t.Errorf("Location = %q", got)
	}
	r = call(t, h, "POST", "/v1/tasks", body)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"id":"g1.0"`) {
		t.Fatalf("repeat submit = %d %s; want 200 with the same ids", r.status, r.body)
	}
	if got := string(f.specs[0].Tasks[0].Payload); got != `{"any":"json"}` {
		t.Errorf("payload reaching the backend = %s", got)
	}
}

func TestSubmitGroup(t *testing.T) {
	f := &fakeBackend{}
	h := newTestHandler(f, HandlerOptions{})
	r := call(t, h, "POST", "/v1/groups", `{"mode": "dag", "tasks": [
		{"name": "fetch", "handler": "echo", "payload": 1},
		{"name": "sum", "handler": "echo", "payload": 2, "deps": ["fetch"]}]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("submit = %d %s", r.status, r.body)
	}
	var got SubmitGroupResponse
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Group != "g1" || got.Tasks["fetch"] != "g1.0" || got.Tasks["sum"] != "g1.1" {
		t.Errorf("response = %+v", got)
	}
	if f.specs[0].ID != "" {
		t.Errorf("the edge set the group id %q; the backend assigns it", f.specs[0].ID)
	}
}

func TestRejectedSubmitNeverReachesBackend(t *testing.T) {
	f := &fakeBackend{}
	h := newTestHandler(f, HandlerOptions{})
	for _, tt := range badGroups {
		r := call(t, h, "POST", "/v1/groups", tt.body)
		want := http.StatusBadRequest
		if tt.tooLarge {
			want = http.StatusRequestEntityTooLarge
		}
		if e := errorOf(t, r); r.status != want || e.Field != tt.field || !strings.Contains(e.Message, tt.msg) {
			t.Errorf("%s: status %d field %q; want %d field %q", tt.name, r.status, e.Field, want, tt.field)
		}
	}
	for _, body := range []string{`{"handler": "nope"}`, `{"handler": "echo", "name": "x"}`, `{"handler": "echo", "payload": "` + strings.Repeat("x", 5000) + `"}`} {
		if r := call(t, h, "POST", "/v1/tasks", body); r.status/100 != 4 {
			t.Errorf("POST /v1/tasks %.40s = %d; want 4xx", body, r.status)
		}
	}
	if n := f.submits.Load(); n != 0 {
		t.Errorf("Backend.Submit called %d times for rejected requests; want 0", n)
	}
}

func TestErrorBodyShape(t *testing.T) {
	h := newTestHandler(&fakeBackend{}, HandlerOptions{})
	r := call(t, h, "POST", "/v1/groups", `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo"}, {"name": "x", "handler": "echo"}, {"name": "d", "handler": "echo", "deps": ["c"]}]}`)
	want := `{"error":{"code":"invalid_argument","message":"tasks[3].deps: unknown task \"c\"","field":"tasks[3].deps"}}` + "\n"
	if r.status != 400 || r.body != want || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("got %d %s; want 400 %s", r.status, r.body, want)
	}
}

func TestGetTask(t *testing.T) {
	var gotWait time.Duration
	f := &fakeBackend{TaskFn: func(_ context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
		gotWait = wait
		return doneTask(id), nil
	}}
	h := newTestHandler(f, HandlerOptions{MaxWait: time.Minute})
	r := call(t, h, "GET", "/v1/tasks/g1.0?wait=10s", "")
	want := `{"id":"g1.0","group":"g1","name":"a","handler":"echo","state":"SUCCEEDED","priority":0,"attempt":1,"round":1,"peer":"peerA",` +
		`"result":{"any":"json"},"error":null,"created_at":"2025-01-02T03:04:05.123456789Z","started_at":"2025-01-02T03:04:05.124456789Z","finished_at":"2025-01-02T03:04:05.125456789Z"}` + "\n"
	if r.status != 200 || r.body != want {
		t.Errorf("GET task = %d\n%s\nwant\n%s", r.status, r.body, want)
	}
	if gotWait != 10*time.Second {
		t.Errorf("wait = %v; want 10s", gotWait)
	}
	call(t, h, "GET", "/v1/tasks/g1.0?wait=1h", "")
	if gotWait != time.Minute {
		t.Errorf("wait=1h reached the backend as %v; want the cap 1m", gotWait)
	}
}

func TestGroupRoutes(t *testing.T) {
	var by string
	f := &fakeBackend{
		GroupFn: func(_ context.Context, id shard.GroupID, _ time.Duration) (shard.GroupView, error) {
			return runningGroup(id), nil
		},
		CancelGroupFn: func(_ context.Context, id shard.GroupID, who string) (shard.GroupView, error) {
			by = who
			g := runningGroup(id)
			g.State = shard.GroupCanceled
			return g, nil
		},
	}
	h := newTestHandler(f, HandlerOptions{})
	r := call(t, h, "GET", "/v1/groups/g7?wait=1s", "")
	var g Group
	if err := json.Unmarshal([]byte(r.body), &g); err != nil || r.status != 200 {
		t.Fatalf("GET group = %d %s", r.status, r.body)
	}
	if g.ID != "g7" || g.Mode != "dag" || g.State != "RUNNING" || g.Total != 2 || len(g.Tasks) != 2 ||
		g.Counts["SUCCEEDED"] != 1 || g.Counts["RUNNING"] != 1 || len(g.Counts) != 2 || g.Tasks[1].Deps[0] != "g7.0" {
		t.Errorf("group = %+v", g)
	}
	r = call(t, h, "GET", "/v1/groups/g7?tasks=false", "")
	if !strings.Contains(r.body, `"tasks":[]`) || !strings.Contains(r.body, `"total":2`) {
		t.Errorf("GET group?tasks=false = %s", r.body)
	}
	r = call(t, h, "POST", "/v1/groups/g7/cancel", "")
	if r.status != 200 || !strings.Contains(r.body, `"state":"CANCELED"`) || by == "" {
		t.Errorf("cancel group = %d %s (by %q)", r.status, r.body, by)
	}
}

func TestTaskEventsAndCancel(t *testing.T) {
	var by string
	f := &fakeBackend{
		TaskEventsFn: func(context.Context, shard.TaskID) ([]shard.TaskEvent, error) {
			return []shard.TaskEvent{{Seq: 1, Type: shard.EvSubmitted, At: t0}, {Seq: 2, Type: shard.EvFailed, At: t0, Round: 1, Holder: "p", Error: "boom"}}, nil
		},
		CancelTaskFn: func(_ context.Context, id shard.TaskID, who string) (shard.TaskView, error) {
			by = who
			return shard.TaskView{ID: id, Group: id.Group(), Handler: "echo", State: shard.Canceled, Error: "canceled by " + who}, nil
		},
	}
	h := newTestHandler(f, HandlerOptions{})
	r := call(t, h, "GET", "/v1/tasks/g1.3/events", "")
	want := `{"events":[{"seq":1,"type":"submitted","at":"2025-01-02T03:04:05.123456789Z","round":0,"peer":""},` +
		`{"seq":2,"type":"failed","at":"2025-01-02T03:04:05.123456789Z","round":1,"peer":"p","error":"boom"}]}` + "\n"
	if r.status != 200 || r.body != want {
		t.Errorf("events = %d %s; want %s", r.status, r.body, want)
	}
	r = call(t, h, "POST", "/v1/tasks/g1.3/cancel", "")
	if r.status != 200 || !strings.Contains(r.body, `"state":"CANCELED"`) || by != "192.0.2.1:1234" {
		t.Errorf("cancel = %d %s by %q", r.status, r.body, by)
	}
}

func TestErrorCodes(t *testing.T) {
	fail := func(err error) *fakeBackend {
		return &fakeBackend{
			SubmitFn: func(context.Context, *shard.GroupSpec) (SubmitResult, error) { return SubmitResult{}, err },
			TaskFn: func(context.Context, shard.TaskID, time.Duration) (shard.TaskView, error) {
				return shard.TaskView{}, err
			},
		}
	}
	tests := []struct {
		name, method, target, body string
		backendErr                 error
		status                     int
		code, field                string
	}{
		{"not found", "GET", "/v1/tasks/g1.0", "", shard.ErrNotFound, 404, CodeNotFound, ""},
		{"wrapped not found", "GET", "/v1/tasks/g1.0", "", fmt.Errorf("peer: ask owner: %w", shard.ErrNotFound), 404, CodeNotFound, ""},
		{"unavailable", "GET", "/v1/tasks/g1.0", "", fmt.Errorf("peer: %w", ErrUnavailable), 503, CodeUnavailable, ""},
		{"deadline", "GET", "/v1/tasks/g1.0", "", context.DeadlineExceeded, 503, CodeUnavailable, ""},
		{"conflict", "POST", "/v1/tasks", `{"handler": "echo", "key": "k"}`, ErrConflict, 409, CodeConflict, ""},
		{"core field error", "POST", "/v1/groups", `{"mode": "pipeline", "stages": [[{"handler": "echo"}], [{"handler": "echo"}, {"handler": "echo"}]]}`,
			&shard.FieldError{Task: 2, Field: "timeout", Message: "too long"}, 400, CodeInvalidArgument, "stages[1][1].timeout"},
		{"internal", "GET", "/v1/tasks/g1.0", "", errors.New("disk on fire"), 500, CodeInternal, ""},
		{"backend breaks its contract", "POST", "/v1/tasks", `{"handler": "echo"}`, nil, 500, CodeInternal, ""},
		{"malformed task id", "GET", "/v1/tasks/nodot", "", nil, 400, CodeInvalidArgument, "id"},
		{"malformed task id events", "GET", "/v1/tasks/g1.x/events", "", nil, 400, CodeInvalidArgument, "id"},
		{"malformed task id cancel", "POST", "/v1/tasks/g1./cancel", "", nil, 400, CodeInvalidArgument, "id"},
		{"bad wait", "GET", "/v1/tasks/g1.0?wait=forever", "", nil, 400, CodeInvalidArgument, "wait"},
		{"negative wait", "GET", "/v1/groups/g1?wait=-1s", "", nil, 400, CodeInvalidArgument, "wait"},
		{"bad tasks flag", "GET", "/v1/groups/g1?tasks=maybe", "", nil, 400, CodeInvalidArgument, "tasks"},
		{"unknown route", "GET", "/v2/things", "", nil, 404, CodeNotFound, ""},
		{"wrong method", "DELETE", "/v1/tasks/g1.0", "", nil, 405, CodeMethodNotAllow, ""},
		{"body too large", "POST", "/v1/tasks", `{"handler": "echo", "key": "` + strings.Repeat("k", 5000) + `"}`, nil, 413, CodePayloadTooLarge, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged strings.Builder
			h := newTestHandler(fail(tt.backendErr), HandlerOptions{Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
			r := call(t, h, tt.method, tt.target, tt.body)
			e := errorOf(t, r)
			if r.status != tt.status || e.Code != tt.code || e.Field != tt.field {
				t.Errorf("%s %s = %d %s; want %d %s field %q", tt.method, tt.target, r.status, r.body, tt.status, tt.code, tt.field)
			}
			if gotLogged := logged.Len() > 0; gotLogged != (tt.status == 500) {
				t.Errorf("logged = %v; want logging only for 500", gotLogged)
			}
			if tt.status == 500 && strings.Contains(r.body, "fire") {
				t.Errorf("internal error leaked to the client: %s", r.body)
			}
			var rec struct{ Task, Group string }
			if tt.status == 500 && strings.HasPrefix(tt.target, "/v1/tasks/") && (json.Unmarshal([]byte(logged.String()), &rec) != nil || rec.Task != "g1.0" || rec.Group != "g1") {
				t.Errorf("the logged failure names task %q, group %q; want g1.0, g1", rec.Task, rec.Group)
			}
		})
	}
}

func TestTokenAuth(t *testing.T) {
	var by string
	f := &fakeBackend{CancelTaskFn: func(_ context.Context, id shard.TaskID, who string) (shard.TaskView, error) {
		by = who
		return shard.TaskView{ID: id, State: shard.Canceled}, nil
	}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "needle_up 1\n") })
	h := newTestHandler(f, HandlerOptions{Token: "s3cret", Metrics: metrics})
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}, {"Authorization", "Bearer s3cret2"},
		{"Authorization", "Bearers3cret"}, {"Authorization", "Basic s3cret"}, {"Authorization", "Bearer"}, {"Authorization", "Bearer "}} {
		r := call(t, h, "POST", "/v1/tasks", `{"handler": "echo"}`, hdr...)
		if e := errorOf(t, r); r.status != 401 || e.Code != CodeUnauthenticated {
			t.Errorf("submit with %v = %d %s; want 401", hdr, r.status, r.body)
		}
		if r := call(t, h, "GET", "/metrics", "", hdr...); r.status != 401 {
			t.Errorf("metrics with %v = %d; want 401", hdr, r.status)
		}
	}
	if f.submits.Load() != 0 {
		t.Errorf("unauthenticated submits reached the backend")
	}
	// The 401 names the header and says which of missing, not a bearer
	// token, or wrong (it said "missing or wrong bearer token" for all).
	for _, c := range []struct {
		hdr  []string
		want string
	}{
		{nil, `Authorization: missing: send "Authorization: Bearer <token>" (the CLI and the clients read NEEDLE_API_TOKEN`},
		{[]string{"Authorization", "Bearer "}, "Authorization: missing: "},
		{[]string{"Authorization", "Bearer"}, "Authorization: missing: "},
		{[]string{"Authorization", "Basic s3cret"}, `Authorization: not a bearer token: send "Authorization: Bearer <token>"`},
		{[]string{"Authorization", "s3cret"}, "Authorization: not a bearer token: "},
		{[]string{"Authorization", "Bearer wrong"}, "Authorization: wrong bearer token: not one of this peer's (needled --api-token-file"},
	} {
		r := call(t, h, "GET", "/v1/peers", "", c.hdr...)
		if e := errorOf(t, r); r.status != 401 || e.Field != "Authorization" || !strings.HasPrefix(e.Message, c.want) {
			t.Errorf("GET /v1/peers with %v = %d %s; want 401 naming Authorization, message %q...", c.hdr, r.status, r.body, c.want)
		}
	}
	auth := []string{"Authorization", "Bearer s3cret"}
	if r := call(t, h, "POST", "/v1/tasks", `{"handler": "echo"}`, auth...); r.status != 201 {
		t.Errorf("authenticated submit = %d %s", r.status, r.body)
	}
	// The audit trail names the token by its fingerprint, never itself.
	if r := call(t, h, "POST", "/v1/tasks/g1.0/cancel", "", auth...); r.status != 200 || by != "token:"+Fingerprint("s3cret") {
		t.Errorf("authenticated cancel = %d, by %q; want 200 by token:%s", r.status, by, Fingerprint("s3cret"))
	}
	// RFC 7235: the scheme is case-insensitive.
	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		if r := call(t, h, "GET", "/metrics", "", "Authorization", scheme+" s3cret"); r.status != 200 {
			t.Errorf("metrics with scheme %q = %d %s; want 200", scheme, r.status, r.body)
		}
	}
	if r := call(t, h, "GET", "/metrics", "", auth...); r.status != 200 || r.body != "needle_up 1\n" {
		t.Errorf("metrics = %d %q", r.status, r.body)
	}
	if r := call(t, h, "GET", "/healthz", ""); r.status != 200 || r.body != `{"status":"ok"}`+"\n" {
		t.Errorf("healthz without token = %d %s; want 200", r.status, r.body)
	}
}

func TestHealthNotReady(t *testing.T) {
	h := NewHandler(&fakeBackend{}, HandlerOptions{Ready: func() error { return errors.New("joining the mesh") }})
	if r := call(t, h, "GET", "/healthz", ""); r.status != 503 || errorOf(t, r).Code != CodeUnavailable {
		t.Errorf("healthz = %d %s; want 503", r.status, r.body)
	}
	if r := call(t, h, "GET", "/metrics", ""); r.status != 404 {
		t.Errorf("metrics without a handler = %d; want 404", r.status)
	}
}

// TestNotFoundNamesTheID: a 404 for an unknown id says which id.
func TestNotFoundNamesTheID(t *testing.T) {
	h := newTestHandler(&fakeBackend{}, HandlerOptions{})
	for _, tt := range []struct{ method, target, want string }{
		{"GET", "/v1/tasks/g9.3", `task "g9.3" not found`},
		{"GET", "/v1/tasks/g9.3/events", `task "g9.3" not found`},
		{"POST", "/v1/tasks/g9.3/cancel", `task "g9.3" not found`},
		{"GET", "/v1/groups/g9", `group "g9" not found`},
		{"POST", "/v1/groups/g9/cancel", `group "g9" not found`},
	} {
		r := call(t, h, tt.method, tt.target, "")
		if e := errorOf(t, r); r.status != http.StatusNotFound || e.Code != CodeNotFound || e.Message != tt.want {
			t.Errorf("%s %s = %d %s: %s; want 404 not_found: %s", tt.method, tt.target, r.status, e.Code, e.Message, tt.want)
		}
	}
}

// POST /v1/tasks?wait= submits and answers the finished task in one call;
// a bad wait is refused before anything is created.
func TestSubmitTaskAndWait(t *testing.T) {
	var waited time.Duration
	f := &fakeBackend{TaskFn: func(_ context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error) {
		waited = wait
		return doneTask(id), nil
	}}
	h := newTestHandler(f, HandlerOptions{})
	r := call(t, h, "POST", "/v1/tasks?wait=2s", `{"handler": "echo", "payload": 1}`)
	if r.status != http.StatusCreated {
		t.Fatalf("submit ?wait=2s = %d %s", r.status, r.body)
	}
	var got SubmitTaskResponse
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "g1.0" || got.Task == nil || got.Task.ID != "g1.0" || got.Task.State != "SUCCEEDED" || waited != 2*time.Second {
		t.Fatalf("answer = %s (waited %v); want the task g1.0 SUCCEEDED after a 2s wait", r.body, waited)
	}
	for _, q := range []string{"soon", "-1s"} {
		r = call(t, h, "POST", "/v1/tasks?wait="+q, `{"handler": "echo"}`)
		if e := errorOf(t, r); r.status != http.StatusBadRequest || e.Field != "wait" {
			t.Errorf("?wait=%s: %d %s; want 400 naming wait", q, r.status, r.body)
		}
	}
	if n := f.submits.Load(); n != 1 {
		t.Errorf("backend saw %d submits; want 1 (a bad wait creates nothing)", n)
	}
	// Without wait the answer stays the ids only.
	r = call(t, h, "POST", "/v1/tasks", `{"handler": "echo"}`)
	if strings.Contains(r.body, `"task"`) {
		t.Errorf("submit without wait = %s; want no task", r.body)
	}
}
