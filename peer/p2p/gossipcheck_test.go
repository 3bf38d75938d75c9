package p2p

import (
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// gossipBothWays publishes from a and b until each has heard the other, or
// fails the test after testTimeout.
func gossipBothWays(tb testing.TB, a, b *Host, round int) {
	tb.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testTimeout)
	var aHeard, bHeard bool
	for !aHeard || !bHeard {
		a.Publish([]byte("a"))
		b.Publish([]byte("b"))
		select {
		case f := <-a.Gossip():
			aHeard = aHeard || f.From == b.ID()
		case f := <-b.Gossip():
			bHeard = bHeard || f.From == a.ID()
		case <-tick.C:
		case <-deadline:
			tb.Fatalf("round %d: gossip not heard within %v: a heard b %v, b heard a %v; a's topic peers %v, b's %v",
				round, testTimeout, aHeard, bHeard, a.topic.ListPeers(), b.topic.ListPeers())
		}
	}
}

// A peer restarted again and again (a new process with the same identity
// connects before the old one's connection closes) must keep receiving
// gossip. Gossipsub drops its writer to a peer whose stream died while
// another connection to it stayed up, respawns it with a backoff, and gives
// up after four such deaths in ten minutes: without the host's check, the
// fifth restart leaves the peer deaf to gossip for good.
func TestGossipSurvivesRepeatedRestarts(t *testing.T) {
	a := mustHost(t, Config{GossipCheck: 100 * time.Millisecond})
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Join: []string{addrOf(t, a, "tcp")}, GossipCheck: 100 * time.Millisecond}
	prev := mustHost(t, cfg)
	waitConnected(t, a, prev.ID())
	gossipBothWays(t, a, prev, 0)
	for round := 1; round <= 10; round++ {
		next := mustHost(t, cfg)
		waitConns(t, a, next.self, 2)
		if err := prev.Close(); err != nil {
			t.Fatal(err)
		}
		gossipBothWays(t, a, next, round)
		prev = next
	}
}

// waitConns waits until h holds n connections to p.
func waitConns(tb testing.TB, h *Host, p peer.ID, n int) {
	tb.Helper()
	timeout := time.After(testTimeout)
	for {
		changed := h.connChanged()
		if len(h.host.Network().ConnsToPeer(p)) == n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			tb.Fatalf("%s never held %d connections to %s", h.ID(), n, p)
		}
	}
}

// A connected peer is reconnected after gossipMisses checks in a row
// without it among the subscribers, then counted afresh; a peer that
// subscribes again or disconnects is forgotten.
func TestUnsubscribed(t *testing.T) {
	p, q := peer.ID("p"), peer.ID("q")
	misses := map[peer.ID]int{}
	check := func(connected, subscribed []peer.ID, want ...peer.ID) {
		t.Helper()
		if got := unsubscribed(misses, connected, subscribed); !slices.Equal(got, want) {
			t.Fatalf("unsubscribed = %v; want %v (misses %v)", got, want, misses)
		}
	}
	for range gossipMisses - 1 {
		check([]peer.ID{p, q}, []peer.ID{q})
	}
	check([]peer.ID{p, q}, []peer.ID{q}, p)
	check([]peer.ID{p, q}, []peer.ID{q}) // counting again
	check([]peer.ID{p, q}, []peer.ID{p, q})
	if len(misses) != 0 {
		t.Fatalf("misses after p subscribed = %v; want none", misses)
	}
	for range gossipMisses - 1 {
		check([]peer.ID{p}, nil)
	}
	check(nil, nil) // p disconnected: forgotten
	for range gossipMisses - 1 {
		check([]peer.ID{p}, nil)
	}
	check([]peer.ID{p}, nil, p)
}
