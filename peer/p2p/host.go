package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// Protocol and topic names; part of the wire contract between peers.
const (
	// ProtocolID is the stream protocol carrying frames between peers.
	ProtocolID protocol.ID = "/needle/rpc/1.0.0"
	// ProtocolCancel is ProtocolID with KindCancel frames: a host opens its
	// streams with it where the other host speaks it, ProtocolID
	// otherwise, and serves both.
	ProtocolCancel protocol.ID = "/needle/rpc/1.1.0"
	// GossipTopic is the gossipsub topic of load and liveness gossip.
	GossipTopic = "needle/load/1"
)

// Timeouts and backoffs of the host's own dials.
const (
	dialTimeout    = 10 * time.Second
	joinBackoffMin = 250 * time.Millisecond
	// joinBackoffMax bounds the wait between two dials of a join address
	// (jittered to 2.5-7.5 s): a peer started before the one it joins
	// through (containers, hosts booting in any order) connects within
	// seconds of that one coming up, where a 30 s cap left it idle up to
	// 45 s; a dial refused or closed at once costs a handshake.
	joinBackoffMax = 5 * time.Second
	// joinStable is how long a joined connection must have lasted for its
	// loss to be redialed at once; one lost sooner is backed off from
	// (joinLoop).
	joinStable     = 10 * time.Second
	joinProtectTag = "needle-join"
)

// Errors returned by Host methods.
var (
	// ErrClosed is returned by every method of a closed Host.
	ErrClosed = errors.New("p2p: host closed")
	// ErrUnknownPeer is returned for a peer id that does not parse.
	ErrUnknownPeer = errors.New("p2p: unknown peer")
	// ErrSelf is returned when a host is asked to send to or dial itself.
	ErrSelf = errors.New("p2p: peer is this host")
	// ErrQueueFull is returned by Send and Call when the peer's outbound
	// queue holds Config.QueueLen frames.
	ErrQueueFull = errors.New("p2p: outbound queue full")
	// ErrDisconnected fails the calls pending on a peer whose last
	// connection closed.
	ErrDisconnected = errors.New("p2p: peer disconnected")
	// ErrNoHandler is the remote error of a call to a host without HandleCall.
	ErrNoHandler = errors.New("p2p: no call handler")
	// ErrBusy is the remote error of a call to a host running
	// Config.MaxCalls handlers already.
	ErrBusy = errors.New("p2p: busy: every call handler is running")
	// ErrDialPaused is returned by Connect, and fails the streams opened,
	// to a peer that closed this host's last dial right after the
	// handshake, for dialPause after it (noteClosedAtOnce).
	ErrDialPaused = errors.New("p2p: peer closed this host's last dial at once (its --members may not list this host); not dialed again yet")
)

// Frame is a message received from a peer.
type Frame struct {
	// From is the sender's peer id (peer.ID.String()); for gossip, the
	// message's signed author, not the neighbour that relayed it.
	From string
	// Data is the payload; the receiver owns it.
	Data []byte
}

// Host is a libp2p host speaking needle's frame protocol and gossip. All its
// methods are safe for concurrent use. See doc.go for the goroutines it owns.
type Host struct {
	cfg  Config       // with defaults; read-only after New
	log  *slog.Logger // carries keyNode
	host host.Host
	key  crypto.PrivKey // the identity key: learnID's handshakes
	psk  []byte         // the swarm key; nil for an open mesh
	gate *memberGate    // Config.MembersFile's; nil lets every peer in
	self peer.ID
	id   string // self.String(), cached: base58 encoding is costly

	ps    *pubsub.PubSub
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	mdns  mdns.Service // nil unless Config.MDNS

	ctx    context.Context // canceled by Close; parent of every goroutine's work
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Host starts or borrows

	inbound chan Frame    // messages from every peer; Config.InboundLen
	gossip  chan Frame    // gossip from other peers; Config.GossipLen
	lost    chan string   // peers whose last connection closed (Disconnected)
	callSem chan struct{} // running call handlers; Config.MaxCalls

	mu      sync.Mutex         // guards closed, writers, connCh (taken before callMu)
	closed  bool               // set once by Close
	writers map[string]*writer // by peer id string; one per peer ever sent to
	connCh  chan struct{}      // closed and replaced on every peer (dis)connect
	callMu  sync.Mutex         // guards pending and serving
	pending map[uint64]*pendingCall
	// serving cancels the ctx of each call handler running, by caller
	// and correlation id (KindCancel).
	serving map[servedCall]*serving

	closedLog peerLogs // noteClosedAtOnce's lines, by peer
	// closedMu guards closedAt: when each peer last closed this host's
	// dial at once (noteClosedAtOnce); an entry goes when the peer
	// connects to this host or dialPause passed.
	closedMu sync.Mutex
	closedAt map[peer.ID]time.Time

	handler atomic.Pointer[CallHandler]
	nextID  atomic.Uint64 // last correlation id used by Call
	stats   counters
}

// New starts a host: it loads or creates the identity, listens, subscribes to
// the gossip topic and starts dialing Config.Join. ctx bounds the start only;
// the host runs until Close.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	sk, err := loadIdentity(cfg.DataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	var psk []byte
	if cfg.SwarmKeyFile != "" {
		if psk, err = LoadSwarmKey(cfg.SwarmKeyFile); err != nil {
			return nil, err
		}
	}
	var gate *memberGate
	if cfg.MembersFile != "" {
		self, err := peer.IDFromPrivateKey(sk)
		if err != nil {
			return nil, fmt.Errorf("p2p: identity: %w", err)
		}
		if gate, err = newMemberGate(cfg.MembersFile, self, cfg.Logger.With("node", self.String())); err != nil {
			return nil, err
		}
	}
	opts, err := hostOptions(&cfg, sk, psk)
	if err != nil {
		return nil, err
	}
	if gate != nil {
		opts = append(opts, libp2p.ConnectionGater(gate))
	}
	lh, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("p2p: start host: %w", err)
	}
	h := newHost(cfg, lh)
	h.key, h.psk, h.gate = sk, psk, gate
	if err := h.start(ctx); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// hostOptions turns cfg into libp2p options. With a swarm key it drops the
// non-TCP listen addresses from cfg.Listen, because libp2p's QUIC transport
// refuses private networks.
func hostOptions(cfg *Config, sk crypto.PrivKey, psk []byte) ([]libp2p.Option, error) {
	opts := []libp2p.Option{
		libp2p.Identity(sk),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DefaultMuxers,
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	}
	if psk == nil {
		switch {
		case loopbackOnly(cfg.Listen):
			cfg.Logger.Info("no swarm key: the mesh listens on this host only (loopback)")
		case cfg.MembersFile != "":
			cfg.Logger.Info("no swarm key: only the peer ids of --members may connect, refused after the handshake",
				keyFile, cfg.MembersFile)
		default:
			cfg.Logger.Warn("no swarm key: open mesh, any libp2p host can connect")
		}
		opts = append(opts, libp2p.Transport(quic.NewTransport))
		return append(opts, libp2p.ListenAddrStrings(cfg.Listen...)), nil
	}
	tcpAddrs, other := splitTCP(cfg.Listen)
	if len(tcpAddrs) == 0 {
		return nil, fmt.Errorf("%w: with a swarm key only TCP listen addresses work, got %v", ErrConfig, cfg.Listen)
	}
	cfg.Listen = tcpAddrs
	attrs := []any{keyFile, cfg.SwarmKeyFile, keyListen, tcpAddrs}
	if len(other) > 0 {
		attrs = append(attrs, "dropped", other)
	}
	cfg.Logger.Info("private network: TCP only, QUIC does not support swarm keys", attrs...)
	if nonTCP := nonTCPJoins(cfg.Join); len(nonTCP) > 0 {
		cfg.Logger.Warn("private network: join addresses that are not TCP cannot be dialed", "join", nonTCP)
	}
	opts = append(opts, libp2p.PrivateNetwork(psk))
	return append(opts, libp2p.ListenAddrStrings(cfg.Listen...)), nil
}

// newHost wraps a started libp2p host; nothing runs yet.
func newHost(cfg Config, lh host.Host) *Host {
	ctx, cancel := context.WithCancel(context.Background())
	return &Host{
		cfg:     cfg,
		log:     cfg.Logger.With("node", lh.ID().String()),
		host:    lh,
		self:    lh.ID(),
		id:      lh.ID().String(),
		ctx:     ctx,
		cancel:  cancel,
		inbound: make(chan Frame, cfg.InboundLen),
		gossip:  make(chan Frame, cfg.GossipLen),
		lost:    make(chan string, lostLen),
		callSem: make(chan struct{}, cfg.MaxCalls),
		writers: make(map[string]*writer),
		connCh:  make(chan struct{}),
		pending: make(map[uint64]*pendingCall),
		serving: make(map[servedCall]*serving),
	}
}

// start registers the protocol and notifee, joins gossip, starts mDNS and the
// join loops.
func (h *Host) start(ctx context.Context) error {
	h.host.Network().Notify(&network.NotifyBundle{
		ConnectedF: func(n network.Network, c network.Conn) {
			if c.Stat().Direction == network.DirInbound {
				h.unpauseDial(c.RemotePeer()) // it lets this host in
			}
			h.connEvent(n, c.RemotePeer(), true)
			h.closeUnlisted(c)
		},
		DisconnectedF: func(n network.Network, c network.Conn) {
			h.noteClosedAtOnce(n, c) // a dial the peer refused after the handshake
			h.connEvent(n, c.RemotePeer(), false)
		},
	})
	h.host.SetStreamHandler(ProtocolID, h.handleStream)
	h.host.SetStreamHandler(ProtocolCancel, h.handleStream)
	if err := h.startGossip(); err != nil {
		return err
	}
	if h.cfg.MDNS {
		if err := h.startMDNS(); err != nil {
			return err
		}
	}
	for _, addr := range h.cfg.Join {
		t, _ := parseJoin(addr) // checked by Validate
		if t.id != "" && t.id != h.self {
			h.host.ConnManager().Protect(t.id, joinProtectTag)
		}
		h.spawn(func() { h.joinLoop(t) })
	}
	h.log.Info("p2p host started", "addrs", h.Addrs())
	return ctx.Err()
}

// Close stops every goroutine the host started, closes the libp2p host and
// waits for them. Calls still waiting return ErrClosed. Close is idempotent.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	if h.mdns != nil {
		h.mdns.Close()
	}
	if h.sub != nil {
		h.sub.Cancel()
	}
	err := h.host.Close() // resets every stream: unblocks readers and writers
	h.wg.Wait()
	if err != nil {
		return fmt.Errorf("p2p: close host: %w", err)
	}
	return nil
}

// enter registers one more goroutine with the WaitGroup, unless the host is
// closed. A true result must be paired with h.wg.Done().
func (h *Host) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

// spawn runs f in a goroutine owned by the host; it does nothing once the
// host is closed.
func (h *Host) spawn(f func()) bool {
	if !h.enter() {
		return false
	}
	go func() {
		defer h.wg.Done()
		f()
	}()
	return true
}

// ID returns this host's peer id.
func (h *Host) ID() string { return h.id }

// Addrs returns the full multiaddrs (ending in /p2p/<id>) this host listens
// on, with unspecified addresses expanded to every interface, loopback
// included; sorted.
func (h *Host) Addrs() []string {
	addrs, err := h.host.Network().InterfaceListenAddresses()
	if err != nil {
		addrs = h.host.Addrs()
	}
	return p2pAddrs(peer.AddrInfo{ID: h.self, Addrs: addrs})
}

// p2pAddrs returns the sorted, de-duplicated full multiaddrs of ai.
func p2pAddrs(ai peer.AddrInfo) []string {
	full, err := peer.AddrInfoToP2pAddrs(&ai)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(full))
	for _, a := range full {
		out = append(out, a.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Connected returns the ids of the peers this host holds a connection to,
// sorted.
func (h *Host) Connected() []string {
	peers := h.host.Network().Peers()
	out := make([]string, 0, len(peers))
	for _, p := range peers {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

// Connect dials a full multiaddr (ending in /p2p/<id>) and returns once the
// connection is secured, or with ctx's error.
func (h *Host) Connect(ctx context.Context, addr string) error {
	ai, err := peer.AddrInfoFromString(addr)
	if err != nil {
		return fmt.Errorf("p2p: connect %q: %w", addr, err)
	}
	if ai.ID == h.self {
		return fmt.Errorf("p2p: connect %q: %w", addr, ErrSelf)
	}
	if h.isClosed() {
		return ErrClosed
	}
	if err := h.dialPaused(ai.ID); err != nil {
		return fmt.Errorf("p2p: connect %s: %w", addr, err)
	}
	if err := h.host.Connect(ctx, *ai); err != nil {
		return fmt.Errorf("p2p: connect %s: %w", addr, err)
	}
	return nil
}

// PeerAddrs returns the addresses the peerstore knows for peer id, as full
// multiaddrs ready for Connect or Config.Join; sorted. It returns nil for an
// unknown or malformed id.
func (h *Host) PeerAddrs(id string) []string {
	pid, err := peer.Decode(id)
	if err != nil {
		return nil
	}
	return p2pAddrs(peer.AddrInfo{ID: pid, Addrs: h.host.Peerstore().Addrs(pid)})
}

// isClosed reports whether Close has been called.
func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// parsePeer decodes a peer id given to Send or Call and refuses this host's.
// ValidID reports whether id is a well-formed peer id.
func ValidID(id string) bool {
	_, err := peer.Decode(id)
	return err == nil
}

func (h *Host) parsePeer(id string) (peer.ID, error) {
	pid, err := peer.Decode(id)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrUnknownPeer, id, err)
	}
	if pid == h.self {
		return "", ErrSelf
	}
	return pid, nil
}
