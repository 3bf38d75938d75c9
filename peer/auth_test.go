package peer

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// TestTokenScheme: the peer's own routes (/v1/peers, /v1/audit, ...) take
// the token as the API handler's do: the scheme "Bearer" in any case (RFC
// 7235), and a refusal says WWW-Authenticate: Bearer.
func TestTokenScheme(t *testing.T) {
	_, c := startPeerWith(t, Config{Token: "secret"})
	for _, tt := range []struct {
		auth   string
		status int
	}{
		{"", 401},
		{"Bearer wrong", 401},
		{"Basic secret", 401},
		{"Bearer secret", 200},
		{"bearer secret", 200},
		{"BEARER secret", 200},
	} {
		for _, path := range []string{"/v1/peers", "/v1/audit", "/v1/stats"} {
			req, err := http.NewRequestWithContext(t.Context(), "GET", c.BaseURL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("GET %s with %q = %d; want %d", path, tt.auth, resp.StatusCode, tt.status)
			}
			if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %q: 401 without WWW-Authenticate", path, tt.auth)
			}
		}
	}
}

// TestTokensRotate: a peer given a set of tokens accepts any of them on
// every route, its own (/v1/peers) and the API handler's (/v1/stats), and
// a change of the set while it serves takes effect at the next request.
func TestTokensRotate(t *testing.T) {
	tokens := api.NewTokens("old", "new")
	_, c := startPeerWith(t, Config{Tokens: tokens})
	status := func(path, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", c.BaseURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		for _, path := range []string{"/v1/peers", "/v1/stats"} {
			for tok, w := range want {
				if got := status(path, tok); got != w {
					t.Errorf("%s: GET %s with %q = %d; want %d", when, path, tok, got, w)
				}
			}
		}
	}
	check("old and new", map[string]int{"old": 200, "new": 200, "other": 401})
	tokens.Set([]string{"new"})
	check("new only", map[string]int{"old": 401, "new": 200})
}

// TestConfigTokens: Token is a set of one; Token and Tokens together, or a
// set with no token, are refused rather than one silently winning or the
// API left open.
func TestConfigTokens(t *testing.T) {
	c := Config{InMemory: true, Token: "t"}
	if err := c.Validate(); err != nil || c.Tokens == nil || !c.Tokens.BearerOK("Bearer t") {
		t.Errorf("Token alone: %v, Tokens %v; want a set of t", err, c.Tokens)
	}
	// A caller's Validate, then New's: the same Config passes twice.
	if err := c.Validate(); err != nil || !c.Tokens.BearerOK("Bearer t") {
		t.Errorf("Token alone, validated again: %v", err)
	}
	for name, c := range map[string]Config{
		"both":  {InMemory: true, Token: "t", Tokens: api.NewTokens("u")},
		"empty": {InMemory: true, Tokens: api.NewTokens()},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted Token %q, %d Tokens", name, c.Token, c.Tokens.Len())
		}
	}
}

// routeScopes is the scope each route needs, as docs/api.md's table of
// scopes says. A route served that is not here fails TestRouteScopes:
// give it its scope in its route table (api) or its mux.Handle (peer),
// here, and in docs/api.md.
var routeScopes = map[string]api.Scope{
	"GET /healthz": api.ScopePublic,
	"GET /{$}":     api.ScopePublic,
	"GET /dash/":   api.ScopePublic,

	"GET /v1/tasks":              api.ScopeRead,
	"GET /v1/tasks/{id}":         api.ScopeRead,
	"GET /v1/tasks/{id}/events":  api.ScopeRead,
	"GET /v1/tasks/{id}/logs":    api.ScopeRead,
	"GET /v1/groups":             api.ScopeRead,
	"GET /v1/groups/{id}":        api.ScopeRead,
	"GET /v1/stats":              api.ScopeRead,
	"GET /v1/schedules":          api.ScopeRead,
	"GET /v1/schedules/{id}":     api.ScopeRead,
	"GET /v1/workers":            api.ScopeRead,
	"GET /v1/peers":              api.ScopeRead,
	"GET /v1/audit":              api.ScopeRead,
	"GET /metrics":               api.ScopeRead,
	"POST /v1/tasks":             api.ScopeSubmit,
	"POST /v1/tasks/{id}/cancel": api.ScopeSubmit,
	"POST /v1/tasks/{id}/retry":  api.ScopeSubmit,

	"POST /v1/groups":                 api.ScopeSubmit,
	"POST /v1/groups/{id}/cancel":     api.ScopeSubmit,
	"POST /v1/groups/{id}/retry":      api.ScopeSubmit,
	"POST /v1/schedules":              api.ScopeSubmit,
	"DELETE /v1/schedules/{id}":       api.ScopeSubmit,
	"PATCH /v1/schedules/{id}":        api.ScopeSubmit,
	"POST /v1/schedules/{id}/pause":   api.ScopeSubmit,
	"POST /v1/schedules/{id}/resume":  api.ScopeSubmit,
	"POST /v1/schedules/{id}/trigger": api.ScopeSubmit,

	"POST /v1/workers/poll":             api.ScopeWorker,
	"POST /v1/leases/{lease}/complete":  api.ScopeWorker,
	"POST /v1/leases/{lease}/fail":      api.ScopeWorker,
	"POST /v1/leases/{lease}/release":   api.ScopeWorker,
	"POST /v1/leases/{lease}/heartbeat": api.ScopeWorker,
	"POST /v1/leases/{lease}/logs":      api.ScopeWorker,
	"POST /v1/leases/report":            api.ScopeWorker,

	"POST /v1/drain":             api.ScopeAdmin,
	"POST /v1/peers/{id}/forget": api.ScopeAdmin,
	"/debug/pprof/":              api.ScopeAdmin,
}

// TestRouteScopes walks every route a peer serves: each has the scope
// routeScopes gives it, and a token of each scope is refused it (403
// forbidden) exactly when its scopes do not grant it, the peer's own
// routes (drain, forget, pprof) as the API handler's. A request with an
// unknown parameter shows a token let through (400 naming it, or the
// dashboard's and pprof's 200) without running the route: the walk drains
// and forgets nothing.
func TestRouteScopes(t *testing.T) {
	list, err := api.ParseTokens("t-admin-0123456789abcdef name=admin\nt-read-0123456789abcdef name=dash scope=read\nt-submit-0123456789abcdef name=ci scope=submit\n" +
		"t-worker-0123456789abcdef name=resizer scope=worker\nt-rw-0123456789abcdef name=rw scope=read,worker\n")
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]string{"admin": "t-admin-0123456789abcdef", "dash": "t-read-0123456789abcdef", "ci": "t-submit-0123456789abcdef", "resizer": "t-worker-0123456789abcdef", "rw": "t-rw-0123456789abcdef"}
	p, c := startPeerWith(t, Config{Tokens: api.NewTokenSet(list)})
	mux := p.routes()
	served := map[string]bool{}
	for _, pat := range mux.patterns {
		served[pat] = true
		want, ok := routeScopes[pat]
		if !ok {
			t.Errorf("route %q has no scope in routeScopes: classify it (here, and in docs/api.md's table of scopes)", pat)
			continue
		}
		if got := mux.scopes[pat]; got != want {
			t.Errorf("route %q needs scope %s; want %s", pat, got, want)
		}
		method, target := scopeRequest(pat)
		for _, tok := range list {
			status, body := sendAs(t, method, c.BaseURL+target, secret[tok.Name])
			switch allowed := tok.Scopes.Allows(want); {
			case allowed && (status == 401 || status == 403):
				t.Errorf("%s with %v = %d %s; want it let through", pat, tok, status, body)
			case !allowed && (status != 403 || !strings.Contains(body, `"forbidden"`) || !strings.Contains(body, tok.Name)):
				t.Errorf("%s with %v = %d %s; want 403 forbidden naming the token", pat, tok, status, body)
			}
		}
		if status, body := sendAs(t, method, c.BaseURL+target, ""); want != api.ScopePublic && status != 401 {
			t.Errorf("%s without a token = %d %s; want 401", pat, status, body)
		}
	}
	for pat := range routeScopes {
		if !served[pat] {
			t.Errorf("routeScopes names %q, which the peer does not serve", pat)
		}
	}
}

// scopeRequest returns a request of a route pattern with an unknown
// parameter, which a route let through answers 400 without running.
func scopeRequest(pattern string) (method, target string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "GET", pattern
	}
	path = strings.TrimSuffix(path, "{$}")
	path = strings.NewReplacer("{id}", "g1.0", "{lease}", "00112233445566778899aabbccddeeff").Replace(path)
	switch path {
	case "/dash/":
		path += "app.js"
	case "/debug/pprof/":
		path += "cmdline"
	}
	return method, path + "?zz=1"
}

// sendAs sends a request without a body, with the bearer token when given,
// and returns the answer's status and body.
func sendAs(t *testing.T, method, target, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The audit trail names the token that canceled: token:NAME, or the
// fingerprint of a token without a name.
func TestAuditNamesToken(t *testing.T) {
	list, err := api.ParseTokens("t-submit-0123456789abcdef name=ci scope=submit\nt-admin-0123456789abcdef\n")
	if err != nil {
		t.Fatal(err)
	}
	_, c := startPeerWith(t, Config{Tokens: api.NewTokenSet(list)})
	for _, tt := range []struct{ token, by string }{{"t-submit-0123456789abcdef", "token:ci"}, {"t-admin-0123456789abcdef", "token:" + api.Fingerprint("t-admin-0123456789abcdef")}} {
		tc := *c
		tc.Token = tt.token
		res, err := tc.SubmitTask(t.Context(), &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo", Delay: "1h"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc.CancelTask(t.Context(), res.ID); err != nil {
			t.Fatal(err)
		}
		entries, err := tc.Audit(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 || entries[0].Subject != res.ID || entries[0].By != tt.by {
			t.Errorf("audit after a cancel by %s = %+v; want the cancel of %s by %q first", tt.token, entries, res.ID, tt.by)
		}
	}
}
