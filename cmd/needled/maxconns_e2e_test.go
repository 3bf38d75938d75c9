package main

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// TestMaxConns: with --max-conns 2, two held connections leave a third
// request waiting (it would be answered at once without the bound), and
// it is answered as soon as one of them closes. Meanwhile the health
// listener (NEEDLE_HEALTH_LISTEN) answers /healthz.
func TestMaxConns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon")
	}
	bin := buildNeedled(t)
	d := spawnDaemon(t, bin, []string{"NEEDLE_HEALTH_LISTEN=" + anyPort}, "--data", t.TempDir(), "--http", anyPort,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--max-conns", "2")
	addr, err := d.serve(t)
	if err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, addr)
	healthAddr := d.healthAddr                // logged before "serving"
	http.DefaultClient.CloseIdleConnections() // the health check's connection
	held := make([]net.Conn, 2)
	for i := range held {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held[i] = c
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	answered := make(chan error, 1)
	go func() {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	// A bounded wait is the only way to see that something does not
	// happen: an unbounded server answers a health check in microseconds.
	select {
	case err := <-answered:
		t.Fatalf("a third connection was served past --max-conns 2 (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	resp, err := client.Get("http://" + healthAddr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz on the health listener with the API full: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz on the health listener with the API full = %d; want 200", resp.StatusCode)
	}
	held[0].Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the waiting request failed once a slot was free: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting request was not served after a connection closed")
	}
}
