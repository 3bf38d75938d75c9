package peer

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/p2p"
)

// A peer started with --members refuses a host it does not list (counted
// in needle_peer_connections_refused_total), and reloads the file on
// ReloadMembers: a bad file keeps the list and says why.
func TestPeerMembers(t *testing.T) {
	other, _, err := p2p.InitIdentity(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "members")
	if err := os.WriteFile(file, []byte(other+" web-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _ := startPeerWith(t, Config{MembersFile: file})
	inbound := func() float64 {
		for _, m := range gather(t, p.metrics, "needle_peer_connections_refused_total").GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "direction" && l.GetValue() == "inbound" {
					return m.GetCounter().GetValue()
				}
			}
		}
		t.Fatal("no inbound series of needle_peer_connections_refused_total")
		return 0
	}
	if got := inbound(); got != 0 {
		t.Fatalf("refused inbound = %v before any dial; want 0", got)
	}

	outsider, err := p2p.New(t.Context(), p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// The dial may succeed on the outsider's side (its handshake ends
	// first) and be closed at once: wait for that close.
	if err := outsider.Connect(ctx, p.tr.Addrs()[0]); err == nil {
		select {
		case <-outsider.Disconnected():
		case <-ctx.Done():
			t.Fatal("the unlisted host stayed connected")
		}
	}
	if got := inbound(); got < 1 {
		t.Errorf("refused inbound = %v after an unlisted host's dial; want at least 1", got)
	}

	if ok, listed, _, err := p.ReloadMembers(); !ok || listed != 1 || err != nil {
		t.Errorf("ReloadMembers = %v, %d listed, %v; want ok, 1", ok, listed, err)
	}
	if err := os.WriteFile(file, []byte("not-an-id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, _, _, err := p.ReloadMembers(); ok || err == nil {
		t.Errorf("ReloadMembers(bad file) = %v, %v; want an error", ok, err)
	}
	if g := p.tr.(gated); g.Allowed(outsider.ID()) || !g.Allowed(other) {
		t.Error("a bad file changed the list")
	}
}
