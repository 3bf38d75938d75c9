package peer

import (
	"net/http"
	"testing"
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
