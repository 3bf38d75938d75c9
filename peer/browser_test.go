package peer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBrowserGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	open := browserGuard(ok, false, "127.0.0.1:7070")
	withToken := browserGuard(ok, true, "0.0.0.0:7070")
	for _, tt := range []struct {
		name         string
		h            http.Handler
		method, host string
		body, ctype  string
		headers      map[string]string
		want         int
	}{
		{"json post", open, "POST", "127.0.0.1:7070", `{}`, "application/json", nil, 200},
		{"json post with charset", open, "POST", "localhost:7070", `{}`, "application/json; charset=utf-8", nil, 200},
		{"text/plain post (CSRF form)", open, "POST", "127.0.0.1:7070", `{"handler":"echo"}`, "text/plain", nil, 415},
		{"post without content type", open, "POST", "127.0.0.1:7070", `{}`, "", nil, 415},
		{"body-less cancel", open, "POST", "127.0.0.1:7070", "", "", nil, 200},
		{"cross-site origin", open, "POST", "127.0.0.1:7070", `{}`, "application/json", map[string]string{"Origin": "https://evil.example"}, 403},
		{"null origin", open, "POST", "127.0.0.1:7070", "", "", map[string]string{"Origin": "null"}, 403},
		{"same origin", open, "POST", "127.0.0.1:7070", `{}`, "application/json", map[string]string{"Origin": "http://127.0.0.1:7070"}, 200},
		{"sec-fetch-site cross-site", open, "POST", "127.0.0.1:7070", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"sec-fetch-site same-origin", open, "POST", "127.0.0.1:7070", "", "", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{"cross-site GET is a read the browser hides", open, "GET", "127.0.0.1:7070", "", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200},
		{"dns rebinding", open, "GET", "rebind.evil.example:7070", "", "", nil, 403},
		{"ipv6 loopback", open, "GET", "[::1]:7070", "", "", nil, 200},
		{"any name with a token", withToken, "GET", "needle.internal:7070", "", "", nil, 200},
		{"cross-site with a token", withToken, "POST", "needle.internal:7070", "", "", map[string]string{"Origin": "https://evil.example"}, 403},
		{"drain form", open, "POST", "127.0.0.1:7070", "x=1", "application/x-www-form-urlencoded", nil, 415},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body *strings.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			var r *http.Request
			if body != nil {
				r = httptest.NewRequest(tt.method, "/v1/tasks", body)
			} else {
				r = httptest.NewRequest(tt.method, "/v1/tasks/g.0/cancel", nil)
			}
			r.Host = tt.host
			if tt.ctype != "" {
				r.Header.Set("Content-Type", tt.ctype)
			}
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, r)
			if rec.Code != tt.want {
				t.Fatalf("%s %s (Host %s) = %d %s; want %d", tt.method, r.URL.Path, tt.host, rec.Code, rec.Body, tt.want)
			}
			if rec.Code != 200 && !strings.Contains(rec.Body.String(), `"code"`) {
				t.Errorf("refusal body %s is not an error body", rec.Body)
			}
		})
	}
}
