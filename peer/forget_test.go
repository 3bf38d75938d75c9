package peer

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Forgetting a peer the mesh still hears from is refused (409 naming id)
// unless forced: a forgotten id never comes back, so a mistyped id or a
// forget before the stop would ban a healthy host for good.
func TestForgetRefusesALivePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	// A forgotten peer that runs on cannot hand its leadership over: its
	// drain at the test's end would wait out the whole drain timeout.
	peers := startMesh3With(t, func(c *Config) { c.DrainTimeout = -1 })
	live := peers[2].p.ID()
	path := "/v1/peers/" + live + "/forget"
	status, data := wcall(t, peers[0].c, "POST", path, "")
	if status != http.StatusConflict || !strings.Contains(string(data), `"field":"id"`) || !strings.Contains(string(data), "is alive") {
		t.Fatalf("forget of a live peer = %d %s; want 409 naming id", status, data)
	}
	if status, data := wcall(t, peers[0].c, "GET", "/v1/peers", ""); status != http.StatusOK || !strings.Contains(string(data), live) {
		t.Fatalf("peers after a refused forget = %d %s; want it listed", status, data)
	}
	if status, data := wcall(t, peers[0].c, "POST", path+"?force=maybe", ""); status != http.StatusBadRequest || !strings.Contains(string(data), `"field":"force"`) {
		t.Fatalf("forget force=maybe = %d %s; want 400 naming force", status, data)
	}
	if status, data := wcall(t, peers[0].c, "POST", path+"?force=true", ""); status != http.StatusOK || string(data) != `{"forgotten":"`+live+`","audited":true}` {
		t.Fatalf("forced forget = %d %s; want 200, audited", status, data)
	}
	want := `"action":"peer_forgotten","subject":"` + live + `"`
	if status, data := wcall(t, peers[1].c, "GET", "/v1/audit", ""); status != http.StatusOK || !strings.Contains(string(data), want) {
		t.Fatalf("audit after the forget = %d %s; want %s", status, data, want)
	}
	// Again: it was forgotten already, which the 404 says (it said "no
	// member"), with the way to declare its disk lost; that still applies
	// (200), and once declared, a repeat does nothing again (404).
	if status, data := wcall(t, peers[0].c, "POST", path, ""); status != http.StatusNotFound || !strings.Contains(string(data), `"field":"id"`) ||
		!strings.Contains(string(data), "peer "+live+" was forgotten already") || !strings.Contains(string(data), "unsafe_recover=true") {
		t.Fatalf("forget of a peer forgotten already = %d %s; want 404 naming id, saying so and how to declare its disk lost", status, data)
	}
	// (Audited or not: the entry's partition may be one the forgotten
	// peer, running on, still led.)
	if status, data := wcall(t, peers[0].c, "POST", path+"?unsafe_recover=true", ""); status != http.StatusOK ||
		!strings.HasPrefix(string(data), `{"forgotten":"`+live+`","audited":`) || !strings.HasSuffix(string(data), `,"unsafe_recover":true}`) {
		t.Fatalf("unsafe forget of a peer forgotten already = %d %s; want 200", status, data)
	}
	if status, data := wcall(t, peers[0].c, "POST", path+"?unsafe_recover=true", ""); status != http.StatusNotFound ||
		!strings.Contains(string(data), "was forgotten already") || !strings.Contains(string(data), "declared lost for good already") {
		t.Fatalf("unsafe forget again = %d %s; want 404 saying its disk was declared lost already", status, data)
	}
	// The forgotten peer runs on. The peer that forgot it answers its next
	// message by saying so, and it is then never ready, saying why.
	var health string
	waitFor(t, "the forgotten peer to say it was removed", 30*time.Second, func() bool {
		status, data := wcall(t, peers[2].c, "GET", "/healthz", "")
		health = string(data)
		return status == http.StatusServiceUnavailable && strings.Contains(health, "removed from the mesh for good")
	})
	if !strings.Contains(health, peers[0].p.ID()) {
		t.Fatalf("healthz of the forgotten peer = %s; want it to name %s, which forgot it", health, peers[0].p.ID())
	}
}
