package p2p

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// tcpPort returns the loopback TCP port h listens on.
func tcpPort(tb testing.TB, h *Host) string {
	tb.Helper()
	m := ma.StringCast(addrOf(tb, h, "tcp"))
	port, err := m.ValueForProtocol(ma.P_TCP)
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

var tcpLoopback = []string{"/ip4/127.0.0.1/tcp/0"}

// A peer joins through an address without /p2p/<id>: by DNS name, by IP
// multiaddr and by host:port, in an open and in a private mesh.
func TestJoinWithoutID(t *testing.T) {
	key := writeSwarmKey(t)
	for _, tc := range []struct {
		name, key string
		join      func(port string) string
	}{
		{"dns4", "", func(p string) string { return "/dns4/localhost/tcp/" + p }},
		{"dns4 private", key, func(p string) string { return "/dns4/localhost/tcp/" + p }},
		{"ip4", "", func(p string) string { return "/ip4/127.0.0.1/tcp/" + p }},
		{"host:port private", key, func(p string) string { return "localhost:" + p }},
		{"dns4 with id", key, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustHost(t, Config{SwarmKeyFile: tc.key, Listen: tcpLoopback})
			join := "/dns4/localhost/tcp/" + tcpPort(t, a) + "/p2p/" + a.ID()
			if tc.join != nil {
				join = tc.join(tcpPort(t, a))
			}
			b := mustHost(t, Config{SwarmKeyFile: tc.key, Listen: tcpLoopback, Join: []string{join}})
			waitConnected(t, b, a.ID())
			waitConnected(t, a, b.ID())
			if err := b.Send(a.ID(), []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if f := recv(t, a.Inbound()); f.From != b.ID() || string(f.Data) != "hello" {
				t.Fatalf("got %q from %s; want hello from %s", f.Data, f.From, b.ID())
			}
		})
	}
}

// A joiner started before its seed listens keeps retrying until it answers.
func TestJoinWithoutIDWaitsForSeed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	b := mustHost(t, Config{Listen: tcpLoopback, Join: []string{"localhost:" + port}})
	a := mustHost(t, Config{Listen: []string{"/ip4/127.0.0.1/tcp/" + port}})
	waitConnected(t, b, a.ID())
}

// When the name answers with another identity (the peer came back with a
// new key), the join loop learns the new id and connects to it.
func TestJoinWithoutIDRelearns(t *testing.T) {
	a := mustHost(t, Config{Listen: tcpLoopback})
	port := tcpPort(t, a)
	b := mustHost(t, Config{Listen: tcpLoopback, Join: []string{"/dns4/localhost/tcp/" + port}})
	waitConnected(t, b, a.ID())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := mustHost(t, Config{Listen: []string{"/ip4/127.0.0.1/tcp/" + port}})
	if a2.ID() == a.ID() {
		t.Fatal("ephemeral hosts share an id")
	}
	waitConnected(t, b, a2.ID())
}

// An id-less address that leads back to the host itself is recognised.
func TestJoinWithoutIDSelf(t *testing.T) {
	a := mustHost(t, Config{Listen: tcpLoopback})
	tgt, err := parseJoin("localhost:" + tcpPort(t, a))
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.dialJoin(tgt)
	if !errors.Is(err, ErrSelf) || id.String() != a.ID() {
		t.Fatalf("dialJoin(self) = %s, %v; want %s, ErrSelf", id, err, a.ID())
	}
}

// A host of another private network does not reveal its id: the handshake
// fails under the wrong key.
func TestJoinWithoutIDWrongKey(t *testing.T) {
	a := mustHost(t, Config{SwarmKeyFile: writeSwarmKey(t), Listen: tcpLoopback})
	b := mustHost(t, Config{SwarmKeyFile: writeSwarmKey(t), Listen: tcpLoopback})
	tgt, err := parseJoin("127.0.0.1:" + tcpPort(t, a))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := b.dialJoin(tgt); err == nil || id != "" {
		t.Fatalf("dialJoin across swarm keys = %q, %v; want an error", id, err)
	}
}

func TestParseJoin(t *testing.T) {
	id := "12D3KooWGzRcSUH7ouMCaGZ8CmZDEuMfSSJGYL2ybU2ZjjFNK6Fo"
	good := map[string]string{ // join -> transport address
		"/ip4/10.0.0.1/tcp/4001/p2p/" + id:         "/ip4/10.0.0.1/tcp/4001",
		"/dns4/needle-0/tcp/4001/p2p/" + id:        "/dns4/needle-0/tcp/4001",
		"/ip4/10.0.0.1/udp/4001/quic-v1/p2p/" + id: "/ip4/10.0.0.1/udp/4001/quic-v1",
		"/dns4/needle-0/tcp/4001":                  "/dns4/needle-0/tcp/4001",
		"/ip6/::1/tcp/4001":                        "/ip6/::1/tcp/4001",
		"needle-0:4001":                            "/dns/needle-0/tcp/4001",
		"needle-0.needle-peers.svc:4001":           "/dns/needle-0.needle-peers.svc/tcp/4001",
		"10.1.2.3:4001":                            "/ip4/10.1.2.3/tcp/4001",
		"[::1]:4001":                               "/ip6/::1/tcp/4001",
	}
	for s, want := range good {
		tgt, err := parseJoin(s)
		if err != nil {
			t.Errorf("parseJoin(%q): %v", s, err)
			continue
		}
		if tgt.addr.String() != want {
			t.Errorf("parseJoin(%q).addr = %s; want %s", s, tgt.addr, want)
		}
		if hasID := strings.Contains(s, "/p2p/"); hasID != (tgt.id != "") {
			t.Errorf("parseJoin(%q).id = %q", s, tgt.id)
		}
	}
	for _, s := range []string{
		"", "needle-0", "needle-0:", "needle-0:0", "needle-0:65536", "needle-0:http", ":4001",
		"/dns4/needle-0/udp/4001/quic-v1", "/dns4/needle-0", "/p2p/" + id, "/nonsense",
	} {
		if _, err := parseJoin(s); err == nil {
			t.Errorf("parseJoin(%q) = nil error; want one", s)
		}
		if err := (&Config{Join: []string{s}}).Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(join %q) = %v; want ErrConfig", s, err)
		}
	}
	if _, err := peer.Decode(id); err != nil {
		t.Fatalf("test id: %v", err)
	}
}

// Loopback tells the addresses that reach only this host, in every form
// --listen, --join and --initial-peers take.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"/ip4/127.0.0.1/tcp/4001":              true,
		"/ip4/127.8.9.10/udp/4001/quic-v1":     true,
		"/ip6/::1/tcp/4001":                    true,
		"/dns4/localhost/tcp/4001":             true,
		"/dns/LocalHost/tcp/4001":              true,
		"127.0.0.1:4001":                       true,
		"localhost:4001":                       true,
		"[::1]:4001":                           true,
		"/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW": false, // not a multiaddr: its own check names it
		"/ip4/0.0.0.0/tcp/4001":                false,
		"/ip4/10.0.0.1/tcp/4001":               false,
		"/dns4/needle-0/tcp/4001":              false,
		"needle-0:4001":                        false,
		"10.0.0.1:4001":                        false,
		"":                                     false,
		"nonsense":                             false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v; want %v", addr, got, want)
		}
	}
	if !loopbackOnly([]string{"/ip4/127.0.0.1/tcp/1", "localhost:2"}) || loopbackOnly(nil) ||
		loopbackOnly([]string{"/ip4/127.0.0.1/tcp/1", "/ip4/0.0.0.0/tcp/1"}) {
		t.Error("loopbackOnly is wrong")
	}
}
