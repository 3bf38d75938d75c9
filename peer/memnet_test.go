package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/wal"
)

// memNet is an in-memory mesh: the Transport of peers running in one
// process, for tests under testing/synctest (every wait is on a channel,
// so the bubble's virtual clock advances as soon as they all wait).
// Messages are delivered at once, in order, and dropped when the
// receiver's queue is full, as the libp2p host drops them; a cut link
// drops everything both ways.
type memNet struct {
	mu    sync.Mutex
	hosts map[string]*memHost
	cut   map[[2]string]bool
}

func newMemNet() *memNet {
	return &memNet{hosts: map[string]*memHost{}, cut: map[[2]string]bool{}}
}

var errMemUnreachable = errors.New("memnet: peer unreachable")

// memHost is one peer's end of a memNet.
type memHost struct {
	net     *memNet
	id      string
	inbound chan p2p.Frame
	gossip  chan p2p.Frame

	mu      sync.Mutex
	handler func(ctx context.Context, from string, req []byte) ([]byte, error)
}

// host attaches a peer named id.
func (n *memNet) host(id string) *memHost {
	h := &memHost{net: n, id: id, inbound: make(chan p2p.Frame, 4096), gossip: make(chan p2p.Frame, 256)}
	n.mu.Lock()
	n.hosts[id] = h
	n.mu.Unlock()
	return h
}

// setCut cuts (or heals) the link between a and b.
func (n *memNet) setCut(a, b string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[[2]string{a, b}], n.cut[[2]string{b, a}] = cut, cut
}

// to returns the host from may reach as to.
func (n *memNet) to(from, to string) (*memHost, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.hosts[to]
	if h == nil || n.cut[[2]string{from, to}] {
		return nil, fmt.Errorf("%w: %s", errMemUnreachable, to)
	}
	return h, nil
}

func (h *memHost) ID() string                { return h.id }
func (h *memHost) Addrs() []string           { return []string{"/memory/" + h.id} }
func (h *memHost) ValidID(id string) bool    { return id != "" }
func (h *memHost) Inbound() <-chan p2p.Frame { return h.inbound }
func (h *memHost) Gossip() <-chan p2p.Frame  { return h.gossip }

func (h *memHost) Send(to string, data []byte) error {
	r, err := h.net.to(h.id, to)
	if err != nil {
		return err
	}
	select {
	case r.inbound <- p2p.Frame{From: h.id, Data: append([]byte(nil), data...)}:
		return nil
	default:
		return p2p.ErrQueueFull
	}
}

func (h *memHost) Call(ctx context.Context, to string, req []byte) ([]byte, error) {
	r, err := h.net.to(h.id, to)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	f := r.handler
	r.mu.Unlock()
	if f == nil {
		return nil, p2p.ErrNoHandler
	}
	return f(ctx, h.id, append([]byte(nil), req...))
}

func (h *memHost) HandleCall(f func(ctx context.Context, from string, req []byte) ([]byte, error)) {
	h.mu.Lock()
	h.handler = f
	h.mu.Unlock()
}

func (h *memHost) Publish(data []byte) error {
	h.net.mu.Lock()
	var to []*memHost
	for id, r := range h.net.hosts {
		if id != h.id && !h.net.cut[[2]string{h.id, id}] {
			to = append(to, r)
		}
	}
	h.net.mu.Unlock()
	for _, r := range to {
		select {
		case r.gossip <- p2p.Frame{From: h.id, Data: append([]byte(nil), data...)}:
		default: // a full queue drops it, as gossipsub may
		}
	}
	return nil
}

// Close detaches the host: the others can no longer reach it.
func (h *memHost) Close() error {
	h.net.mu.Lock()
	if h.net.hosts[h.id] == h {
		delete(h.net.hosts, h.id)
	}
	h.net.mu.Unlock()
	return nil
}

// memListener is an API listener whose connections are in-memory pipes.
type memListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects a client to the listener.
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "memory" }

// memPeer is a peer of an in-memory mesh.
type memPeer struct {
	p    *Peer
	c    *api.Client
	done chan struct{} // closed when Run returns, with its error in err
	err  error
	stop func() // cancels Run and waits for it; idempotent
}

// startMemPeer runs a peer named id on mn, with an in-memory WAL and API,
// until the test ends or stop is called. Call it inside a synctest bubble:
// the peer's timers then run on the virtual clock. Its Config is base with
// the runtime filled in.
func startMemPeer(t *testing.T, mn *memNet, id string, base Config) *memPeer {
	t.Helper()
	ln := newMemListener()
	cfg := base
	cfg.Runtime = Runtime{Transport: mn.host(id), WAL: wal.NewMemory(), Listener: ln}
	if cfg.Partitions == 0 {
		cfg.Partitions = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{DialContext: ln.dial}
	mp := &memPeer{p: p, done: make(chan struct{}),
		c: &api.Client{BaseURL: "http://localhost", HTTP: &http.Client{Transport: tr}}} // the dial picks the peer
	go func() { mp.err = p.Run(ctx); close(mp.done) }()
	<-p.Ready()
	var once sync.Once
	mp.stop = func() {
		once.Do(func() {
			tr.CloseIdleConnections()
			cancel()
			<-mp.done
			if mp.err != nil {
				t.Errorf("Run: %v", mp.err)
			}
		})
	}
	t.Cleanup(mp.stop)
	return mp
}
