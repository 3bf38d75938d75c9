package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer"
	"github.com/needle-mesh/needle/peer/p2p"
)

func testPeerID(t *testing.T) string {
	t.Helper()
	id, _, err := p2p.InitIdentity(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestParseFlagsInitialPeers: --initial-peers repeats on the command line,
// takes a comma-separated NEEDLE_INITIAL_PEERS, or repeated config lines,
// with --join's precedence.
func TestParseFlagsInitialPeers(t *testing.T) {
	a, b := "/ip4/10.0.0.1/tcp/4001/p2p/"+testPeerID(t), "/ip4/10.0.0.2/tcp/4001/p2p/"+testPeerID(t)
	file := filepath.Join(t.TempDir(), "needle.conf")
	if err := os.WriteFile(file, []byte("initial-peers = "+a+"\ninitial-peers = "+b+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flags", []string{"--initial-peers", a, "--initial-peers", b}, nil},
		{"env", nil, map[string]string{"NEEDLE_INITIAL_PEERS": a + "," + b}},
		{"file", []string{"--config", file}, nil},
		{"flag over env", []string{"--initial-peers", a, "--initial-peers", b}, map[string]string{"NEEDLE_INITIAL_PEERS": "/ip4/10.9.9.9/tcp/1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = &strings.Builder{}
			if err := m.ParseFlags(tt.args, func(k string) string { return tt.env[k] }); err != nil {
				t.Fatal(err)
			}
			if want := []string{a, b}; !slices.Equal(m.Config.Initial, want) {
				t.Errorf("Initial = %v; want %v", m.Config.Initial, want)
			}
			m.Config.SwarmKeyFile = "swarm.key" // other hosts: a private mesh
			if err := m.Config.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestInitialPeersErrors: a bad --initial-peers stops the daemon at start
// (Config.Validate, before anything is opened) naming the flag and the value.
func TestInitialPeersErrors(t *testing.T) {
	id := testPeerID(t)
	for _, tt := range []struct{ value, want string }{
		{"10.0.0.1:4001", "is not a multiaddr"},
		{"/dns4/needle-0/tcp/4001", "has no /p2p/<peer id>"},
		{"/ip4/10.0.0.1/tcp/4001/p2p/" + id[:len(id)-3], "is not a peer id"},
	} {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		if err := m.ParseFlags([]string{"--initial-peers", tt.value, "--data", t.TempDir()}, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		err := m.Config.Validate()
		if err == nil || !strings.Contains(err.Error(), "--initial-peers") || !strings.Contains(err.Error(), tt.value) ||
			!strings.Contains(err.Error(), tt.want) {
			t.Errorf("--initial-peers %q: Validate() = %v; want an error naming the flag, the value and %q", tt.value, err, tt.want)
		}
	}
}

// TestInitFlag: needled --init creates the data dir, prints the id and the
// listen addresses, prints the same on an existing dir, and a start accepts
// the dir with that id.
func TestInitFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--init", "--data", dir, "--partitions", "32", "--listen", "/ip4/127.0.0.1/tcp/4101", "--log-level", "warn"}
	run := func() string {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		if err := m.ParseFlags(args, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		if !m.Init {
			t.Fatal("--init not set")
		}
		var out strings.Builder
		if err := m.RunInit(&out); err != nil {
			t.Fatalf("RunInit: %v", err)
		}
		return out.String()
	}
	first := run()
	lines := strings.Split(strings.TrimSpace(first), "\n")
	if len(lines) != 2 || lines[1] != "/ip4/127.0.0.1/tcp/4101/p2p/"+lines[0] {
		t.Fatalf("--init printed %q; want the id, then the listen address with /p2p/<id>", first)
	}
	if again := run(); again != first {
		t.Errorf("--init on the existing dir printed %q; want %q again", again, first)
	}
	m := NewMain()
	m.Stderr = &strings.Builder{}
	if err := m.ParseFlags([]string{"--data", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--http", "127.0.0.1:0", "--drain-timeout", "-1s"},
		func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	m.Config.Logger = slog.New(slog.DiscardHandler)
	p, err := peer.New(m.Config)
	if err != nil {
		t.Fatalf("start on the --init data dir: %v", err)
	}
	if p.ID() != lines[0] {
		t.Errorf("started with id %s; --init printed %s", p.ID(), lines[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestInitFlagCommandLineOnly: --init from the environment or a config
// file would make every start exit at once: it is refused.
func TestInitFlagCommandLineOnly(t *testing.T) {
	m := NewMain()
	m.Stderr = &strings.Builder{}
	err := m.ParseFlags(nil, func(k string) string { return map[string]string{"NEEDLE_INIT": "true"}[k] })
	if err == nil || !strings.Contains(err.Error(), "--init") {
		t.Errorf("NEEDLE_INIT=true: ParseFlags = %v; want a refusal naming --init", err)
	}
}
