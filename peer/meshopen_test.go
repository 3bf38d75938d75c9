package peer

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// Without a swarm key or a members file the mesh stays on this host:
// --listen defaults to loopback, and a listen, join or initial address
// beyond it stops the peer with an error naming the flag and the ways
// out, unless --insecure-open-mesh. A swarm key, a members file, or a
// test's own transport, lifts it.
func TestOpenMeshRefused(t *testing.T) {
	const id = "12D3KooWAdGkj1x5oVYRbRhs9qhMfvZJjxGKr4BwjJyzVQF3jgGj"
	for _, tt := range []struct {
		name    string
		c       Config
		wantErr string // the flag the error names; "" = none
	}{
		{"defaults", Config{}, ""},
		{"loopback listen", Config{Listen: []string{"/ip4/127.0.0.1/tcp/4101", "/ip6/::1/tcp/4101"}}, ""},
		{"localhost join", Config{Join: []string{"127.0.0.1:4101", "localhost:4101", "/dns4/localhost/tcp/4101"}}, ""},
		{"all interfaces", Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001"}}, "--listen"},
		{"another host's address", Config{Listen: []string{"/ip4/10.0.0.2/tcp/4001"}}, "--listen"},
		{"join another host", Config{Join: []string{"10.0.0.1:4001"}}, "--join"},
		{"join by name", Config{Join: []string{"/dns4/needle-0/tcp/4001"}}, "--join"},
		{"initial peers elsewhere", Config{Initial: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + id}}, "--initial-peers"},
		{"open on purpose", Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001"}, Join: []string{"10.0.0.1:4001"}, OpenMesh: true}, ""},
		{"swarm key", Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001"}, Join: []string{"10.0.0.1:4001"}, SwarmKeyFile: "swarm.key"}, ""},
		// A members file closes the mesh as a key does: every host
		// proves its peer id in the handshake, and an unlisted one is
		// refused before any protocol runs.
		{"members file", Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001"}, Join: []string{"10.0.0.1:4001"},
			Initial: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + id}, MembersFile: "members"}, ""},
		{"members file and key", Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001"}, SwarmKeyFile: "swarm.key", MembersFile: "members"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.Logger = slog.New(slog.DiscardHandler)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--swarm-key") ||
				!strings.Contains(err.Error(), "--members FILE") || !strings.Contains(err.Error(), "--insecure-open-mesh") {
				t.Fatalf("Validate() = %v; want an error naming %s, --swarm-key, --members FILE and --insecure-open-mesh", err, tt.wantErr)
			}
		})
	}
	c := Config{Logger: slog.New(slog.DiscardHandler)}
	if err := c.Validate(); err != nil || !slices.Equal(c.Listen, LoopbackListen) {
		t.Fatalf("Listen without a key = %v (%v); want %v", c.Listen, err, LoopbackListen)
	}
	c = Config{Logger: slog.New(slog.DiscardHandler), SwarmKeyFile: "swarm.key"}
	if err := c.Validate(); err != nil || len(c.Listen) != 0 {
		t.Fatalf("Listen with a key = %v (%v); want the transport's default (every interface)", c.Listen, err)
	}
	c = Config{Logger: slog.New(slog.DiscardHandler), MembersFile: "members"}
	if err := c.Validate(); err != nil || len(c.Listen) != 0 {
		t.Fatalf("Listen with a members file = %v (%v); want the transport's default (every interface)", c.Listen, err)
	}
}
