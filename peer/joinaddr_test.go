package peer

import (
	"log/slog"
	"strings"
	"testing"
)

// An address that is no address is refused as such, naming the flag and
// what it wants, before the open-mesh check asks where it points:
// `needled --join nothing` was refused as "another host" (trial s82).
func TestJoinOrListenNotAnAddress(t *testing.T) {
	for _, tt := range []struct {
		c    Config
		want []string
	}{
		{Config{Join: []string{"nothing"}}, []string{`--join "nothing" is not an address`, "host:port", "missing port"}},
		{Config{Join: []string{"127.0.0.1:4101", "/ip4/127.0.0.1/udp/4101/quic-v1"}}, []string{`--join "/ip4/127.0.0.1/udp/4101/quic-v1"`, "must be TCP"}},
		{Config{Join: []string{"/nothing"}, SwarmKeyFile: "swarm.key"}, []string{`--join "/nothing" is not an address`}},
		{Config{Listen: []string{"nothing"}}, []string{`--listen "nothing" is not a multiaddr`, "/ip4/IP/tcp/PORT"}},
	} {
		c := tt.c
		c.Logger = slog.New(slog.DiscardHandler)
		err := c.Validate()
		if err == nil || strings.Contains(err.Error(), "another host") || strings.Contains(err.Error(), "not a loopback") {
			t.Errorf("Validate(%v %v) = %v; want it to say the address is none", tt.c.Join, tt.c.Listen, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%v %v) = %v; want it to say %q", tt.c.Join, tt.c.Listen, err, w)
			}
		}
	}
}
