package p2p

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultMaxFrame is the default Config.MaxFrame: 64 MiB.
	DefaultMaxFrame = 64 << 20
	// DefaultQueueLen is the default Config.QueueLen, in frames.
	DefaultQueueLen = 4096
	// MaxMaxFrame is the largest Config.MaxFrame Validate accepts: 1 GiB.
	MaxMaxFrame = 1 << 30
	// ServiceName is the mDNS service name peers advertise and look for.
	ServiceName = "needle"
)

// DefaultListen returns the default Config.Listen: TCP and QUIC on port 4001,
// all IPv4 interfaces.
func DefaultListen() []string {
	return []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
}

// Log attribute keys used by this package.
const (
	keyPeer   = "peer"
	keyAddr   = "addr"
	keyErr    = "err"
	keyFile   = "file"
	keyListen = "listen"
)

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("p2p: invalid config")

// Config configures a Host. The zero value of every field but Logger selects
// its default; a nil Logger discards logs.
type Config struct {
	// DataDir holds the identity key file DataDir/identity.key (an Ed25519
	// libp2p private key, crypto.MarshalPrivateKey, mode 0600). It is created
	// on the first start and reused afterwards, so the peer id is stable.
	// "" means an ephemeral identity (tests, tools): a new id on every start.
	DataDir string
	// Listen lists the multiaddrs to listen on. Default DefaultListen().
	// With a swarm key, non-TCP addresses are dropped (see doc.go).
	Listen []string
	// Join lists the peers to join through: full multiaddrs ending in
	// /p2p/<id>, or TCP addresses without the id (/dns4/needle-0/tcp/4001,
	// /ip4/10.0.0.1/tcp/4001, needle-0:4001), whose id is learned by a
	// handshake (see join.go). Each is dialed at start and re-dialed with
	// exponential backoff whenever it is not connected; a name that does not
	// resolve yet is retried the same way.
	Join []string
	// SwarmKeyFile is the path of a swarm key (see GenerateSwarmKey). ""
	// runs an open mesh (logged once as a warning); otherwise only hosts
	// holding the same key can connect, over TCP only.
	SwarmKeyFile string
	// MembersFile is the path of a members file (see LoadMembers): only
	// the peer ids it lists may connect, either way, and gossip authored
	// by any other is dropped. "" lets every peer in that can reach the
	// host (and, with a swarm key, holds it). Host.ReloadMembers reads it
	// again. Without a swarm key it alone keeps strangers out, refused
	// right after the handshake.
	MembersFile string
	// MDNS also discovers and dials peers on the LAN (service ServiceName).
	MDNS bool
	// MaxFrame is the largest frame accepted or sent, in bytes, counting the
	// version, kind and correlation id. Default DefaultMaxFrame, at most
	// MaxMaxFrame. Every host of a mesh should use the same value.
	MaxFrame int
	// QueueLen is the length of each peer's outbound queue, in frames.
	// Default DefaultQueueLen. Send returns ErrQueueFull beyond it.
	QueueLen int
	// InboundLen is the length of the Inbound channel, in frames (default
	// 1024). When it is full, readers block: back-pressure on their streams.
	InboundLen int
	// GossipLen is the length of the Gossip channel (default 256). When it
	// is full the oldest message is dropped and counted in Stats.
	GossipLen int
	// GossipCheck is how often the host looks for connected peers that
	// gossipsub has stopped talking to, and reconnects those missing for
	// three checks in a row (default 2 s; see watchGossip).
	GossipCheck time.Duration
	// MaxCalls bounds the HandleCall handlers running at once (default
	// 4096). Beyond it, a call is answered ErrBusy at once: its stream
	// carries the caller's messages too, which waiting would hold up.
	MaxCalls int
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports the first invalid field, wrapping ErrConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.MaxFrame < 0 || c.MaxFrame > MaxMaxFrame:
		return bad("MaxFrame %d: want 0 (default) or 1..%d", c.MaxFrame, MaxMaxFrame)
	case c.MaxFrame > 0 && c.MaxFrame < 64:
		return bad("MaxFrame %d: want at least 64 bytes", c.MaxFrame)
	case c.QueueLen < 0:
		return bad("QueueLen %d: want >= 0", c.QueueLen)
	case c.InboundLen < 0:
		return bad("InboundLen %d: want >= 0", c.InboundLen)
	case c.GossipLen < 0:
		return bad("GossipLen %d: want >= 0", c.GossipLen)
	case c.GossipCheck < 0:
		return bad("GossipCheck %v: want >= 0", c.GossipCheck)
	case c.MaxCalls < 0:
		return bad("MaxCalls %d: want >= 0", c.MaxCalls)
	}
	for _, s := range c.Listen {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return bad("listen %q: %v", s, err)
		}
	}
	for _, s := range c.Join {
		if _, err := parseJoin(s); err != nil {
			return bad("join %q (want a multiaddr ending in /p2p/<id>, a TCP multiaddr or host:port without it): %v", s, err)
		}
	}
	return nil
}

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if len(c.Listen) == 0 {
		c.Listen = DefaultListen()
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.InboundLen == 0 {
		c.InboundLen = 1024
	}
	if c.GossipLen == 0 {
		c.GossipLen = 256
	}
	if c.GossipCheck == 0 {
		c.GossipCheck = 2 * time.Second
	}
	if c.MaxCalls == 0 {
		c.MaxCalls = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// isTCP reports whether a listen or dial address runs over TCP only (no
// QUIC, WebTransport or WebRTC), the transports a private network supports.
func isTCP(addr string) bool {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return false
	}
	_, errTCP := m.ValueForProtocol(ma.P_TCP)
	_, errUDP := m.ValueForProtocol(ma.P_UDP)
	return errTCP == nil && errUDP != nil && !strings.Contains(addr, "/ws")
}

// splitTCP splits addrs into TCP ones and the rest.
func splitTCP(addrs []string) (tcp, other []string) {
	for _, a := range addrs {
		if isTCP(a) {
			tcp = append(tcp, a)
		} else {
			other = append(other, a)
		}
	}
	return tcp, other
}
