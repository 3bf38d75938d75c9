package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/needle-mesh/needle/shard"
)

// Backend is what the HTTP edge asks of a peer. Implementations return
// shard.ErrNotFound, ErrUnavailable, ErrConflict or a *shard.FieldError for
// the client's faults; any other error is an internal error.
type Backend interface {
	// Submit creates the group (or finds the one created earlier with the
	// same key) and returns its ids. It assigns the group id.
	Submit(ctx context.Context, spec *shard.GroupSpec) (SubmitResult, error)
	// Task returns a task; with wait > 0 it first waits until the task is
	// terminal or wait has passed.
	Task(ctx context.Context, id shard.TaskID, wait time.Duration) (shard.TaskView, error)
	// Group returns a group; with wait > 0 it first waits until the group
	// is terminal or wait has passed.
	// withTasks=false may leave the task list out (a summary).
	Group(ctx context.Context, id shard.GroupID, wait time.Duration, withTasks bool) (shard.GroupView, error)
	// TaskEvents returns a task's history, oldest first.
	TaskEvents(ctx context.Context, id shard.TaskID) ([]shard.TaskEvent, error)
	// CancelTask cancels a non-terminal task (and its dependents); by names
	// who asked, for the audit trail.
	CancelTask(ctx context.Context, id shard.TaskID, by string) (shard.TaskView, error)
	// CancelGroup cancels every non-terminal task of a group.
	CancelGroup(ctx context.Context, id shard.GroupID, by string) (shard.GroupView, error)
}

// SubmitWaiter is a Backend that submits and waits in one call: a peer
// forwards such a submission to the group's owner once, instead of once to
// submit and once to wait (POST /v1/tasks?wait=).
type SubmitWaiter interface {
	// SubmitWait is Submit(ctx, spec) followed, for a submission created
	// or found, by the first task as Task(waitCtx, id, wait) shows it; the
	// view is nil when that read failed (the submission stands). waitCtx
	// is ctx or one derived from it that may end first (a token revoked
	// while it waits): its end cuts the wait, never the submission, whose
	// answer still says what was created.
	SubmitWait(ctx, waitCtx context.Context, spec *shard.GroupSpec, wait time.Duration) (SubmitResult, *shard.TaskView, error)
}

// SubmitResult is the outcome of Backend.Submit.
type SubmitResult struct {
	Group   shard.GroupID  // the group's id
	Tasks   []shard.TaskID // one per spec.Tasks, same order
	Created bool           // false: an idempotent repeat of an earlier submit
}

// HandlerOptions configures NewHandler. The zero value is usable.
type HandlerOptions struct {
	// Limits bounds submissions; zero fields take DefaultLimits.
	Limits Limits
	// MaxWait caps ?wait= of long polls; default 5m.
	MaxWait time.Duration
	// MaxWaitsPerClient bounds the long polls one client address may
	// hold at once (?wait= of a task, a group or a submission, a worker's
	// poll with a wait, a log follow): one more is a 429 rate_limited
	// naming the parameter. 0: no bound.
	MaxWaitsPerClient int
	// WaitsExempt, when set, names the client addresses (IPs) whose long
	// polls are not bounded (loopback: a proxy on the host).
	WaitsExempt func(ip string) bool
	// Token, when non-empty, is required as "Authorization: Bearer <token>"
	// (the scheme in any case) on every route except /healthz.
	Token string
	// Tokens, when non-nil, is the set of tokens accepted instead of
	// Token (any one of them; it may change while the handler serves).
	// Each route needs a scope of the token (Handler.Scopes): 403
	// forbidden without. Token alone is a set of one admin token.
	Tokens *Tokens
	// Metrics, when non-nil, serves GET /metrics (behind the token).
	Metrics http.Handler
	// Ready, when non-nil, is asked by /healthz; an error answers 503.
	Ready func() error
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// InPeers, when non-nil, reports whether a handler runs in the peers
	// (built in or registered): a worker's poll naming one is a 400, as
	// such a handler's tasks never go to workers.
	InPeers func(handler string) bool
}

// DefaultMaxWait is the default cap of ?wait=.
const DefaultMaxWait = 5 * time.Minute

// server serves the routes of one handler.
type server struct {
	b     Backend
	opts  HandlerOptions
	log   *slog.Logger
	waits *clientWaits // nil: no bound
}

// route is one route of the API: every route names the scope a token
// needs for it (ScopePublic: none), and NewHandler refuses one without.
type route struct {
	method, pattern string
	scope           Scope
	h               http.HandlerFunc
}

// Handler serves the v1 API (docs/api.md, docs/openapi.yaml).
type Handler struct {
	http.Handler
	patterns []string
	scopes   map[string]Scope
}

// Patterns returns the routes the handler serves, as "METHOD /path/{param}"
// patterns of http.ServeMux, in the order they were registered.
func (h *Handler) Patterns() []string { return slices.Clone(h.patterns) }

// Scopes returns the scope each route of Patterns needs.
func (h *Handler) Scopes() map[string]Scope { return maps.Clone(h.scopes) }

// NewHandler returns the v1 API (tasks, groups, schedules, /healthz and,
// when opts.Metrics is set, /metrics) served from b.
func NewHandler(b Backend, opts HandlerOptions) *Handler {
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.Tokens == nil && opts.Token != "" {
		opts.Tokens = NewTokens(opts.Token)
	}
	s := &server{b: b, opts: opts, log: opts.Logger}
	if opts.MaxWaitsPerClient > 0 {
		s.waits = &clientWaits{max: opts.MaxWaitsPerClient, exempt: opts.WaitsExempt, held: map[string]int{}}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	routes := []route{
		{"GET", "/healthz", ScopePublic, s.health},
		{"POST", "/v1/tasks", ScopeSubmit, s.submitTask},
		{"GET", "/v1/tasks/{id}", ScopeRead, s.getTask},
		{"GET", "/v1/tasks/{id}/events", ScopeRead, s.taskEvents},
		{"POST", "/v1/tasks/{id}/cancel", ScopeSubmit, NoBody(http.HandlerFunc(s.cancelTask))},
		{"POST", "/v1/groups", ScopeSubmit, s.submitGroup},
		{"GET", "/v1/groups/{id}", ScopeRead, s.getGroup},
		{"POST", "/v1/groups/{id}/cancel", ScopeSubmit, NoBody(http.HandlerFunc(s.cancelGroup))},
	}
	routes = append(routes, s.scheduleRoutes()...)
	if l, ok := b.(Lister); ok {
		routes = append(routes, s.listRoutes(l)...)
	}
	if rt, ok := b.(Retrier); ok {
		routes = append(routes, s.retryRoutes(rt)...)
	}
	if l, ok := b.(LogReader); ok {
		routes = append(routes, s.logRoutes(l)...)
	}
	if wk, ok := b.(Workers); ok {
		routes = append(routes, s.workerRoutes(wk)...)
	}
	if opts.Metrics != nil {
		routes = append(routes, route{"GET", "/metrics", ScopeRead, opts.Metrics.ServeHTTP})
	}
	mux := http.NewServeMux()
	allow := map[string][]string{}
	h := &Handler{scopes: map[string]Scope{}}
	for _, rt := range routes {
		pattern := rt.method + " " + rt.pattern
		if rt.scope == 0 {
			panic("api: route " + pattern + " has no scope")
		}
		var served http.Handler = rt.h // /metrics: Prometheus's, its own parameters
		if rt.pattern != "/metrics" {
			served = OnlyParams(pattern, rt.h, routeParams[pattern]...)
		}
		served = s.authorized(rt.scope, served)
		if rt.method != http.MethodGet {
			served = drainFirst(served.ServeHTTP)
		}
		mux.Handle(pattern, served)
		allow[rt.pattern] = append(allow[rt.pattern], rt.method)
		h.patterns = append(h.patterns, pattern)
		h.scopes[pattern] = rt.scope
	}
	for pattern, methods := range allow {
		mux.HandleFunc(pattern, MethodNotAllowed(methods))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	})
	h.Handler = s.auth(mux)
	return h
}

// MethodNotAllowed answers 405 method_not_allowed with an Allow header
// naming methods: a known path asked with another method.
func MethodNotAllowed(methods []string) http.HandlerFunc {
	methods = slices.Sorted(slices.Values(methods))
	allow := strings.Join(methods, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeErr(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllow,
			Message: fmt.Sprintf("method %s not allowed; allowed: %s", r.Method, allow)})
	}
}

// auth checks the bearer token on every route but /healthz, and makes
// the token that matched the request's (TokenOf): each route then checks
// its scope (authorized).
func (s *server) auth(next http.Handler) http.Handler {
	if s.opts.Tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := s.opts.Tokens.Match(r.Header.Get("Authorization"))
		if !ok {
			refuseUnauthenticated(w, r)
			return
		}
		// The token rides on a copy of r, whose Pattern the mux sets:
		// handed back, so that what wraps the handler (the HTTP metrics'
		// route label) sees the route, not the "/" the handler is
		// mounted at.
		rt := withToken(r, tok)
		next.ServeHTTP(w, rt)
		r.Pattern = rt.Pattern
	})
}

// authorized answers 403 forbidden, before h, to a token that does not
// grant scope; without tokens there is nothing to check.
func (s *server) authorized(scope Scope, h http.Handler) http.Handler {
	if s.opts.Tokens == nil || scope == ScopePublic {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if authorize(w, r, scope) {
			h.ServeHTTP(w, r)
		}
	})
}

// BearerOK reports whether an Authorization header carries token as
// "Bearer <token>". The scheme's case does not matter (RFC 7235: "bearer"
// and "BEARER" are "Bearer"); the token is compared in constant time.
func BearerOK(header, token string) bool {
	got, ok := bearer(header)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// fail writes the response for err, logging internal errors only. A
// not-found answer names the id of the route (`task "g1.7" not found`).
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e, internal := toError(err)
	if internal {
		attrs := append([]any{"method", r.Method, "path", r.URL.Path, "err", err}, routeIDs(r)...)
		s.log.Error("api request failed", attrs...)
	}
	if id := r.PathValue("id"); id != "" && errors.Is(err, shard.ErrNotFound) {
		e = &Error{Status: e.Status, Code: e.Code, Message: fmt.Sprintf("%s %q not found", kindOf(r.URL.Path), id)}
	}
	writeErr(w, e)
}

// routeIDs returns the log attributes naming what r's route is about: a
// task and its group, a group, or a schedule.
func routeIDs(r *http.Request) []any {
	id := r.PathValue("id")
	if id == "" {
		return nil
	}
	switch kind := kindOf(r.URL.Path); kind {
	case "task":
		return []any{"task", id, "group", string(shard.TaskID(id).Group())}
	case "group", "schedule":
		return []any{kind, id}
	}
	return nil
}

// kindOf names what a /v1/<kind>s/{id} route is about: "task", "group",
// "schedule".
func kindOf(path string) string {
	rest, _ := strings.CutPrefix(path, "/v1/")
	kind, _, _ := strings.Cut(rest, "/")
	return strings.TrimSuffix(kind, "s")
}

func writeErr(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		// Every 503 did nothing and may be retried: say when (a second;
		// an election takes about that), as a 429 does.
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, ErrorBody{Error: e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// by names the caller of a cancel for the audit trail: "token:NAME", or
// the client's address without tokens (By).
func (s *server) by(r *http.Request) string { return By(r) }

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			writeErr(w, &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
}

// body limits the request body to the configured size.
func (s *server) body(w http.ResponseWriter, r *http.Request) io.Reader {
	max := s.opts.Limits.withDefaults().MaxBody
	return sizedBody{http.MaxBytesReader(w, r.Body, max+1), r.ContentLength}
}

func (s *server) submitTask(w http.ResponseWriter, r *http.Request) {
	wait, err := s.wait(r) // checked first: a bad wait creates nothing
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wait > 0 {
		release, ok := s.holdWait(w, r, "wait") // before anything is created
		if !ok {
			return
		}
		defer release()
	}
	spec, err := DecodeTask(s.body(w, r), s.opts.Limits)
	if err == nil {
		err = mayCreate(r, spec, "", "submit only tasks of")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	setTraceparent(spec, r.Header)
	var res SubmitResult
	var v *shard.TaskView
	// An owner elsewhere submits and waits in one forward (SubmitWaiter).
	// The submission is made with the request's context; only the wait
	// is ended by a reload that revokes the token (watchToken), so that
	// the answer still says what was created.
	if sw, ok := s.b.(SubmitWaiter); ok && wait > 0 {
		ctx, check, stop := s.watchToken(r, ScopeSubmit)
		res, v, err = sw.SubmitWait(r.Context(), ctx, spec, wait)
		stop()
		if check != nil && check() != nil {
			v = nil // a revoked token reads nothing more
		}
		res, err = s.checkSubmitted(spec, res, err)
	} else {
		res, err = s.submit(r.Context(), spec)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := SubmitTaskResponse{ID: string(res.Tasks[0]), Group: string(res.Group)}
	if wait > 0 {
		// One call for submit-and-wait: the task as GET ?wait= shows it,
		// terminal unless wait passed first. The task exists whatever
		// happens next, so a failed read still answers its id, and so
		// does a wait ended by its token's revocation (no task: a
		// revoked token reads nothing more; its next request is the 401).
		if v == nil {
			ctx, check, stop := s.watchToken(r, ScopeSubmit)
			tv, err := s.b.Task(ctx, res.Tasks[0], wait)
			stop()
			if err == nil && (check == nil || check() == nil) {
				v = &tv
			}
		}
		if v != nil {
			t := NewTask(*v)
			out.Task = &t
		}
	}
	w.Header().Set("Location", "/v1/tasks/"+out.ID)
	writeJSON(w, createdStatus(res), out)
}

func (s *server) submitGroup(w http.ResponseWriter, r *http.Request) {
	spec, to, err := decodeGroupTo(s.body(w, r), s.opts.Limits)
	if err == nil {
		// Before a broadcast's expansion: its copies are of the template's
		// handler, and a refused request asks nothing of the workers.
		err = mayCreate(r, spec, "", "submit only tasks of")
	}
	if err == nil && to == ToWorkers {
		err = s.expandToWorkers(r.Context(), spec)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	setTraceparent(spec, r.Header)
	res, err := s.submit(r.Context(), spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := SubmitGroupResponse{Group: string(res.Group), Tasks: make(map[string]string, len(res.Tasks))}
	for i, id := range res.Tasks {
		out.Tasks[spec.Tasks[i].Name] = string(id)
	}
	w.Header().Set("Location", "/v1/groups/"+string(res.Group))
	writeJSON(w, createdStatus(res), out)
}

// submit asks the backend and checks its answer; a core field error is
// mapped back to the JSON path of spec.
func (s *server) submit(ctx context.Context, spec *shard.GroupSpec) (SubmitResult, error) {
	res, err := s.b.Submit(ctx, spec)
	return s.checkSubmitted(spec, res, err)
}

// checkSubmitted maps a backend's answer to a submission: a core field
// error to the request's field, and ids that do not match the spec to an
// internal error.
func (s *server) checkSubmitted(spec *shard.GroupSpec, res SubmitResult, err error) (SubmitResult, error) {
	var fe *shard.FieldError
	if errors.As(err, &fe) {
		return res, &FieldError{Field: CorePath(spec, fe), Message: fe.Message}
	}
	if err != nil {
		return res, err
	}
	if len(res.Tasks) != len(spec.Tasks) || res.Group == "" {
		return res, fmt.Errorf("api: backend returned %d task ids for %d tasks (group %q)", len(res.Tasks), len(spec.Tasks), res.Group)
	}
	return res, nil
}

func createdStatus(res SubmitResult) int {
	if res.Created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// taskID parses the {id} of a task route. An id that is not UTF-8 is
// malformed: no id is, and its forward over the mesh would carry another
// (JSON makes each bad byte U+FFFD), asking the wrong owner (a 503).
// Its group part must be a group id (validGroupID): no other task exists.
func taskID(r *http.Request) (shard.TaskID, error) {
	id := shard.TaskID(r.PathValue("id"))
	if g, _, ok := id.Split(); !ok || !utf8.ValidString(string(id)) || !validGroupID(string(g)) {
		return "", fieldErr("id", "malformed task id %.100q; want <group id>.<index> (g and 24 hex digits, as the mesh makes them, a dot and a number)", string(id))
	}
	return id, nil
}

// groupID parses the {id} of a group route: an id that can never name a
// group (validGroupID: not UTF-8, too long, a character no group id
// holds, a task's id) is a 400 naming id, as taskID's, where it was a 404.
func groupID(r *http.Request) (shard.GroupID, error) {
	id := r.PathValue("id")
	if !validGroupID(id) {
		return "", groupIDError(id)
	}
	return shard.GroupID(id), nil
}

// wait parses ?wait=, capped at MaxWait.
func (s *server) wait(r *http.Request) (time.Duration, error) {
	q := r.URL.Query().Get("wait")
	if q == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(q)
	if err != nil || d < 0 {
		return 0, fieldErr("wait", "invalid wait %q; want a non-negative Go duration like \"10s\"", q)
	}
	return min(d, s.opts.MaxWait), nil
}
