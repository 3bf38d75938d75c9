package peer

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/ring"
)

// newPeerID returns a fresh libp2p peer id.
func newPeerID(t *testing.T) string {
	t.Helper()
	id, _, err := p2p.InitIdentity(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestParseInitialGroupsByPeer(t *testing.T) {
	a, b := newPeerID(t), newPeerID(t)
	got, err := parseInitial([]string{
		"/ip4/10.0.0.1/tcp/4001/p2p/" + a,
		"/ip4/10.0.0.2/tcp/4001/p2p/" + b,
		"/ip4/10.0.0.1/udp/4001/quic-v1/p2p/" + a,
		"/dns4/needle-1/tcp/4001/p2p/" + b,
		"/ip4/10.0.0.1/tcp/4001/p2p/" + a, // twice: kept once
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []node.PeerAddrs{
		{ID: a, Addrs: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + a, "/ip4/10.0.0.1/udp/4001/quic-v1/p2p/" + a}},
		{ID: b, Addrs: []string{"/dns4/needle-1/tcp/4001/p2p/" + b, "/ip4/10.0.0.2/tcp/4001/p2p/" + b}},
	}
	if !slices.EqualFunc(got, want, func(x, y node.PeerAddrs) bool { return x.ID == y.ID && slices.Equal(x.Addrs, y.Addrs) }) {
		t.Errorf("parseInitial = %v; want %v", got, want)
	}
	if got, err := parseInitial(nil); got != nil || err != nil {
		t.Errorf("parseInitial(nil) = %v, %v; want nil, nil", got, err)
	}
	// The node takes the list as it is (Validate: ids valid, each once).
	cfg := node.DefaultNodeConfig(a, "boot")
	cfg.Founder, cfg.Initial, cfg.ValidID = false, got, p2p.ValidID
	if err := cfg.Validate(); err != nil {
		t.Errorf("node refuses the parsed list: %v", err)
	}
}

func TestParseInitialErrors(t *testing.T) {
	a := newPeerID(t)
	for _, tt := range []struct{ in, want string }{
		{"10.0.0.1:4001", "is not a multiaddr"},
		{"/ip4/10.0.0.1/tcp/4001", "has no /p2p/<peer id>"},
		{"/dns4/needle-0/tcp/4001", "needled --init prints it"},
		{"/ip4/10.0.0.1/tcp/4001/p2p/notapeerid", `"notapeerid" is not a peer id`},
		{"/p2p/" + a, "has no address before /p2p/<peer id>"},
		{"/ip4/10.0.0.1/tcp/4001/p2p/" + a + "/tcp/5", "want /p2p/<peer id> at its end"},
		{"/ip4/10.0.0.1/tcp/4001/p2p/" + a[:len(a)-4], "is not a peer id"},
	} {
		_, err := parseInitial([]string{"/ip4/10.0.0.9/tcp/1/p2p/" + a, tt.in})
		if err == nil {
			t.Errorf("parseInitial(%q) = nil error; want one", tt.in)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "--initial-peers") || !strings.Contains(msg, tt.in) || !strings.Contains(msg, tt.want) {
			t.Errorf("parseInitial(%q) = %q; want it to name --initial-peers, the value and %q", tt.in, msg, tt.want)
		}
	}
	c := Config{Initial: []string{"/ip4/10.0.0.1/tcp/4001"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--initial-peers") {
		t.Errorf("Config.Validate with a bad Initial = %v; want the --initial-peers error", err)
	}
}

// TestInitialMembership: a peer named in Initial carries the list with its
// own addresses and does not found; one not named joins; without Initial,
// a peer without Join founds as before.
func TestInitialMembership(t *testing.T) {
	self, other := newPeerID(t), newPeerID(t)
	initial := []node.PeerAddrs{
		{ID: other, Addrs: []string{"/ip4/10.0.0.2/tcp/4001/p2p/" + other}},
		{ID: self, Addrs: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + self}},
	}
	real := []string{"/ip4/127.0.0.1/tcp/4101/p2p/" + self}
	p := &Peer{log: slog.New(slog.DiscardHandler)}
	ncfg := node.NodeConfig{ID: self, Addrs: real}
	p.initialMembership(&ncfg, initial, false)
	if ncfg.Founder || len(ncfg.Initial) != 2 || !slices.Equal(ncfg.Initial[1].Addrs, real) || ncfg.Initial[0].ID != other {
		t.Errorf("named: founder %v initial %v; want no founder, this peer's entry with its host's addresses", ncfg.Founder, ncfg.Initial)
	}
	if initial[1].Addrs[0] != "/ip4/10.0.0.1/tcp/4001/p2p/"+self {
		t.Errorf("the parsed list was changed: %v", initial)
	}
	ncfg = node.NodeConfig{ID: newPeerID(t)}
	p.initialMembership(&ncfg, initial, false)
	if ncfg.Founder || ncfg.Initial != nil {
		t.Errorf("not named: founder %v initial %v; want a joiner", ncfg.Founder, ncfg.Initial)
	}
	ncfg = node.NodeConfig{ID: self}
	p.initialMembership(&ncfg, nil, false)
	if !ncfg.Founder {
		t.Error("no Initial, no Join: want a founder")
	}
	p.cfg.Join = []string{"needle-0:4001"}
	ncfg = node.NodeConfig{ID: self}
	p.initialMembership(&ncfg, nil, false)
	if ncfg.Founder {
		t.Error("Join: want a joiner")
	}
	if got := initialJoins(initial, self); !slices.Equal(got, initial[0].Addrs) {
		t.Errorf("initialJoins = %v; want the other peer's addresses only", got)
	}
}

// Init prints the addresses a start would listen on: without --listen and
// a swarm key, loopback's (checkMeshOpen), not p2p's default of every
// interface, which a start refuses without a key (audit s77, F11); with a
// key, p2p's TCP default.
func TestInitDefaultListen(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	id, addrs, err := Init(Config{DataDir: t.TempDir(), Partitions: 8, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range LoopbackListen {
		want = append(want, a+"/p2p/"+id)
	}
	if !slices.Equal(addrs, want) {
		t.Errorf("Init without --listen or a key = %v; want %v", addrs, want)
	}
	var kb bytes.Buffer
	if err := p2p.GenerateSwarmKey(&kb); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(key, kb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	id, addrs, err = Init(Config{DataDir: t.TempDir(), Partitions: 8, SwarmKeyFile: key, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/ip4/0.0.0.0/tcp/4001/p2p/" + id}; !slices.Equal(addrs, want) {
		t.Errorf("Init with a swarm key = %v; want %v", addrs, want)
	}
}

// TestInitDataDir: Init creates a data dir a start accepts, with the id it
// printed; a second Init prints the same id and a start with another
// --placement is refused by Init as by New.
func TestInitDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Partitions: 32, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, HTTPAddr: "0.0.0.0:7070", // no API: no token needed
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	id, addrs, err := Init(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/ip4/127.0.0.1/tcp/0/p2p/" + id}; !slices.Equal(addrs, want) {
		t.Errorf("Init addrs = %v; want %v", addrs, want)
	}
	if stored, ok, err := p2p.StoredID(dir); err != nil || !ok || stored != id {
		t.Fatalf("StoredID = %q %v %v; want %q", stored, ok, err, id)
	}
	again, _, err := Init(cfg)
	if err != nil || again != id {
		t.Fatalf("second Init = %q, %v; want %q", again, err, id)
	}
	// A data dir that holds no partition yet takes another --placement
	// (its record is from an Init, or a start the mesh refused for its
	// placement, whose error said to pass the flag).
	other := cfg
	other.Placement, other.PlacementSet = ring.PlacementCircle, true // a new data dir records spread
	if again, _, err := Init(other); err != nil || again != id {
		t.Errorf("Init with another --placement on a data dir with no partition = %q, %v; want %q", again, err, id)
	}
	p, err := New(Config{DataDir: dir, Partitions: 32, HTTPAddr: "127.0.0.1:0",
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: cfg.Logger})
	if err != nil {
		t.Fatalf("New on an Init'ed data dir: %v", err)
	}
	if p.ID() != id {
		t.Errorf("started peer id %s; Init printed %s", p.ID(), id)
	}
	if parts := p.node.Partitions(); parts != 32 {
		t.Errorf("partitions = %d; want 32", parts)
	}
	if rec, _, err := p.wal.Meta("placement"); err != nil || string(rec) != ring.PlacementCircle.String() {
		t.Errorf("placement record = %q, %v; want circle, the one Init replaced", rec, err)
	}
	// It founds the mesh: run it until it serves every partition.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Ready()
	waitFor(t, "the founder to serve its partitions", 30*time.Second, func() bool { return p.readiness() == nil })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// One that holds partitions keeps its mesh's placement.
	other.Placement = ring.PlacementSpread
	if _, _, err := Init(other); err == nil || !strings.Contains(err.Error(), "--placement") {
		t.Errorf("Init with another --placement on a data dir with partitions = %v; want the start's refusal", err)
	}
}
