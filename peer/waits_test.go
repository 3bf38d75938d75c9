package peer

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// TestWaitsPerClient: with --max-conns-per-client 8, one client address
// holds at most 4 long polls at once. One more, on every route that waits
// (a task's, a group's and a submission's ?wait=, a worker's poll, a log
// follow), is a 429 rate_limited naming the parameter, and does nothing;
// a request that does not wait, and another client, are served; a wait
// that ends gives its place back. Only --max-conns bounded them, and over
// HTTP/2 not even that (audit finding 5).
func TestWaitsPerClient(t *testing.T) {
	p, c := startPeerWith(t, Config{MaxConnsPerClient: 8, capLoopback: true})
	ctx := t.Context()
	res, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "nobody"}}) // an external handler no worker serves
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + p.Addr()
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		// Idle connections are kept, not closed and redialled: a
		// connection closed by the client counts against its 8 until the
		// server sees it close, and one dialled over 8 is closed at once.
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
	}
	client := from("127.0.0.1")
	do := func(ctx context.Context, hc *http.Client, method, path, body string) (*http.Response, api.ErrorBody) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var eb api.ErrorBody
		if resp.StatusCode >= 400 {
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &eb); err != nil || eb.Error == nil {
				t.Fatalf("%s %s: %d with body %q", method, path, resp.StatusCode, b)
			}
		}
		return resp, eb
	}
	hold, stop := context.WithCancel(ctx)
	held := make(chan struct{}, 4)
	for range 4 {
		go func() {
			defer func() { held <- struct{}{} }()
			for hold.Err() == nil { // until it holds its place: a probe may hold one a moment
				req, _ := http.NewRequestWithContext(hold, "GET", base+"/v1/tasks/"+res.ID+"?wait=1m", nil)
				resp, err := client.Do(req)
				if err != nil { // canceled, or a connection refused over the bound: ask again
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	// Polling until the 4 waits hold their places: a probe while one is
	// free is answered after its 1 ms.
	probe := func() int { // a probe's status, 0 when its connection was refused
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/tasks/"+res.ID+"?wait=1ms", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if probe() == http.StatusTooManyRequests {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a client's fifth long poll was never refused")
		}
	}
	for _, tt := range []struct {
		method, path, body, field string
	}{
		{"GET", "/v1/tasks/" + res.ID + "?wait=1s", "", "wait"},
		{"GET", "/v1/groups/" + res.Group + "?wait=1s", "", "wait"},
		{"POST", "/v1/tasks?wait=1s", `{"handler":"nobody","key":"refused"}`, "wait"},
		{"POST", "/v1/workers/poll", `{"worker":"w1","handlers":["nobody"],"wait":"1s"}`, "wait"},
		{"GET", "/v1/tasks/" + res.ID + "/logs?follow=true", "", "follow"},
	} {
		resp, eb := do(ctx, client, tt.method, tt.path, tt.body)
		if resp.StatusCode != http.StatusTooManyRequests || eb.Error.Code != api.CodeRateLimited || eb.Error.Field != tt.field {
			t.Errorf("%s %s: %d %+v; want 429 rate_limited naming %s", tt.method, tt.path, resp.StatusCode, eb.Error, tt.field)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 429 without Retry-After", tt.method, tt.path)
		}
	}
	// The refused submission created nothing: its key is new.
	if resp, _ := do(ctx, client, "POST", "/v1/tasks", `{"handler":"nobody","key":"refused"}`); resp.StatusCode != http.StatusCreated {
		t.Errorf("the refused submission's key answered %d; want 201 (created now)", resp.StatusCode)
	}
	// The refused poll took no task.
	if v, err := c.GetTask(ctx, res.ID, 0); err != nil || v.State != "READY" {
		t.Errorf("task after the refused poll: %+v, %v; want READY", v, err)
	}
	if resp, _ := do(ctx, client, "GET", "/v1/tasks/"+res.ID, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("a request without wait got %d; want 200", resp.StatusCode)
	}
	if resp, _ := do(ctx, from("127.0.0.2"), "GET", "/v1/tasks/"+res.ID+"?wait=1ms", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("another client's long poll got %d; want 200", resp.StatusCode)
	}

	stop()
	for range 4 {
		<-held
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code := probe()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("long polls still refused (%d) after the held ones ended", code)
		}
	}
}
