package peer

import (
	"net/http"
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
