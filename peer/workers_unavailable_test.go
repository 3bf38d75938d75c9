package peer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// post503Says posts body to path and checks the answer is a 503 unavailable
// with Retry-After whose message holds every one of want.
func post503Says(t *testing.T, c *api.Client, path, body string, want ...string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", c.BaseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil || eb.Error == nil {
		t.Fatalf("POST %s = %d, body not an error: %v", path, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || eb.Error.Code != api.CodeUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST %s = %d %s (Retry-After %q); want 503 unavailable with Retry-After", path, resp.StatusCode, eb.Error.Code, resp.Header.Get("Retry-After"))
	}
	for _, w := range want {
		if !strings.Contains(eb.Error.Message, w) {
			t.Errorf("POST %s: message %q lacks %q", path, eb.Error.Message, w)
		}
	}
	if strings.HasPrefix(eb.Error.Message, "api: unavailable") {
		t.Errorf("POST %s: message %q is the old form (the sentinel's text first)", path, eb.Error.Message)
	}
}

// A new worker polling a peer that serves its most workers is told why
// the poll was refused and what to do (another peer, or later), as the
// 503s of a partition not served now are; a known worker still polls.
func TestPollFullHubSaysWhy(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	p.hub.mu.Lock()
	now := time.Now()
	for i := range maxWorkers {
		p.hub.worker(fmt.Sprintf("filler-%d", i), now)
	}
	p.hub.mu.Unlock()
	post503Says(t, c, "/v1/workers/poll", `{"worker": "one-too-many", "handlers": ["resize"], "wait": "0s"}`,
		fmt.Sprintf("this peer serves %d workers already", maxWorkers), "poll another peer", "the poll did nothing: retry it")
	if tasks := poll(t, c, "filler-7", `"resize"`, 1, "0s"); len(tasks) != 0 {
		t.Fatalf("a known worker's poll = %+v; want none", tasks)
	}
}

// A broadcast to workers while a live peer does not answer for its
// workers is refused saying which peer, why, and that a retry may pass.
func TestBroadcastToWorkersUnansweredSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn, peers := startMemMesh(t, 3, 8)
		mn.setCut("p0", "p2", true)
		post503Says(t, peers[0].c, "/v1/groups", `{"mode": "broadcast", "to": "workers", "tasks": [{"handler": "split"}]}`,
			"peers p2 did not answer for their workers", "would miss the copies of their workers", "the request did nothing: retry it")
	})
}
