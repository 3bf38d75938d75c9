package peer

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
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
	// A listener that waited behind the full API would not answer: get's
	// 10 s timeout fails it, not a latency bound (2 s) a loaded machine
	// need not meet.
	if status, body := get(t, "GET", health+"/healthz"); status != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("GET /healthz on the health listener with the API full = %d %s; want 200 ok", status, body)
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
// naming it; one that is no host:port is an error of the configuration,
// found by New.
func TestHealthListenerBadAddress(t *testing.T) {
	_, err := New(Config{DataDir: filepath.Join(t.TempDir(), "data"), HTTPAddr: "127.0.0.1:0", Partitions: 16,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, HealthAddr: "127.0.0.1:notaport"})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `--health-listen "127.0.0.1:notaport" is not host:port`) {
		t.Errorf("New with health address 127.0.0.1:notaport = %v; want a configuration error naming it", err)
	}
	for _, addr := range []string{"256.0.0.1:0"} {
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

// One client holding its connections of the health listener (keep-alive,
// one /healthz each, 32 of them) cannot keep another client's probe out:
// a client has at most 4 there, and an idle one is closed soon (audit
// s75, F4).
func TestHealthListenerPerClient(t *testing.T) {
	p, _ := startPeerWith(t, Config{HealthAddr: "127.0.0.1:0"})
	addr := p.HealthAddr()
	hog := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	var held []net.Conn
	for range healthMaxConns {
		c, err := hog.Dial("tcp", addr)
		if err != nil {
			t.Skipf("cannot dial from 127.0.0.2 (%v): the test needs a second loopback address", err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			continue // closed: over its bound
		}
		held = append(held, c)
	}
	// Keep the hog's connections busy, as a client re-using each would.
	stop := make(chan struct{})
	var stopOnce sync.Once
	defer stopOnce.Do(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				for _, c := range held {
					_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
				}
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	// Kept out, the probe would wait as long as the hog stays busy: 20 s
	// is a bound for a loaded machine, not a latency.
	answered := make(chan error, 1)
	go func() {
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("GET /healthz from another client while one holds %d connections: %v", healthMaxConns, err)
		}
	case <-time.After(25 * time.Second):
		t.Fatalf("GET /healthz from another client while one holds %d connections: no answer", healthMaxConns)
	}

	// An idle keep-alive connection is closed within the idle timeout.
	stopOnce.Do(func() { close(stop) })
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := io.WriteString(c2, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Within 7 s: slack for a loaded machine, and less than the 10 s
	// ReadTimeout that closes an idle connection without IdleTimeout.
	_ = c2.SetReadDeadline(time.Now().Add(healthIdleTimeout + 5*time.Second))
	start := time.Now()
	if _, err := io.ReadAll(c2); err != nil {
		t.Fatalf("an idle connection of the health listener: %v after %v; want it closed by the peer", err, time.Since(start))
	}
}
