package peer

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// get asks url with a client of its own (no keep-alive) and returns the
// status and body.
func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The health listener (Config.HealthAddr) answers /healthz while every one
// of the API's MaxConns connections is taken, serves /metrics without the
// token, and nothing else.
func TestHealthListener(t *testing.T) {
	p, _ := startPeerWith(t, Config{Token: "secret", MaxConns: 2, HealthAddr: "127.0.0.1:0"})
	health := "http://" + p.HealthAddr()
	if status, body := get(t, "GET", health+"/healthz"); status != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("GET /healthz on the health listener = %d %s; want 200 ok", status, body)
	}
	// Take every API connection: a health check there waits.
	for range 2 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	answered := make(chan struct{})
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		if resp, err := client.Get("http://" + p.Addr() + "/healthz"); err == nil {
			resp.Body.Close()
		}
		close(answered)
	}()
	select {
	case <-answered:
		t.Fatal("the API answered a third connection past MaxConns 2: the test does not fill it")
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	if status, body := get(t, "GET", health+"/healthz"); status != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("GET /healthz on the health listener with the API full = %d %s; want 200 ok", status, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the health listener took %v to answer with the API full", d)
	}
	if status, body := get(t, "GET", health+"/metrics"); status != http.StatusOK || !strings.Contains(body, "needle_build_info") {
		t.Fatalf("GET /metrics on the health listener without a token = %d; want 200 with the metrics", status)
	}
	for _, tt := range []struct{ method, path string }{{"GET", "/v1/peers"}, {"GET", "/v1/tasks/g1.0"}, {"POST", "/v1/tasks"},
		{"POST", "/v1/drain"}, {"GET", "/"}, {"GET", "/debug/pprof/"}, {"POST", "/healthz"}} {
		status, body := get(t, tt.method, health+tt.path)
		var e api.ErrorBody
		if status != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != api.CodeNotFound {
			t.Errorf("%s %s on the health listener = %d %s; want a 404 not_found JSON error", tt.method, tt.path, status, body)
		}
	}
}

// A health address that cannot be listened on stops the peer at start,
// naming it.
func TestHealthListenerBadAddress(t *testing.T) {
	for _, addr := range []string{"256.0.0.1:0", "127.0.0.1:notaport"} {
		p, err := New(Config{DataDir: filepath.Join(t.TempDir(), "data"), HTTPAddr: "127.0.0.1:0", Partitions: 16,
			Listen: []string{"/ip4/127.0.0.1/tcp/0"}, HealthAddr: addr})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		err = p.Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "health listener (--health-listen) on "+addr) {
			t.Errorf("Run with health address %q = %v; want a start error naming it", addr, err)
		}
	}
}
