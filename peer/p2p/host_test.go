package p2p

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

const testTimeout = 20 * time.Second

// loopback is the listen set of test hosts: TCP and QUIC, ephemeral ports.
var loopback = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}

// mustHost starts a host on loopback and closes it when the test ends.
func mustHost(tb testing.TB, cfg Config) *Host {
	tb.Helper()
	if cfg.Listen == nil {
		cfg.Listen = loopback
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	h, err := New(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		if err := h.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return h
}

// addrOf returns h's loopback address of the given transport ("tcp" or "quic-v1").
func addrOf(tb testing.TB, h *Host, transport string) string {
	tb.Helper()
	for _, a := range h.Addrs() {
		if strings.HasPrefix(a, "/ip4/127.0.0.1/") && strings.Contains(a, "/"+transport+"/") {
			return a
		}
	}
	tb.Fatalf("no %s loopback address in %v", transport, h.Addrs())
	return ""
}

// waitConnected waits until h is connected to peer id.
func waitConnected(tb testing.TB, h *Host, id string) {
	tb.Helper()
	timeout := time.After(testTimeout)
	for {
		changed := h.connChanged()
		if slices.Contains(h.Connected(), id) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			tb.Fatalf("%s never connected to %s", h.ID(), id)
		}
	}
}

// recv receives one frame from ch or fails the test.
func recv(tb testing.TB, ch <-chan Frame) Frame {
	tb.Helper()
	select {
	case f := <-ch:
		return f
	case <-time.After(testTimeout):
		tb.Fatal("no frame received")
		return Frame{}
	}
}

// pair starts host a and host b joining a, and waits for the connection.
func pair(tb testing.TB, cfg Config) (a, b *Host) {
	a = mustHost(tb, cfg)
	cfg.Join = []string{addrOf(tb, a, "tcp")}
	b = mustHost(tb, cfg)
	waitConnected(tb, b, a.ID())
	waitConnected(tb, a, b.ID())
	return a, b
}

func TestSendInOrderBothWays(t *testing.T) {
	const n = 10000
	a, b := pair(t, Config{QueueLen: n})
	var wg sync.WaitGroup
	for _, dir := range [][2]*Host{{a, b}, {b, a}} {
		from, to := dir[0], dir[1]
		for i := range n {
			if err := from.Send(to.ID(), binary.AppendUvarint(nil, uint64(i))); err != nil {
				t.Fatalf("Send(%d) = %v", i, err)
			}
		}
		wg.Go(func() {
			for i := range n {
				f := recv(t, to.Inbound())
				got, _ := binary.Uvarint(f.Data)
				if f.From != from.ID() || got != uint64(i) {
					t.Errorf("frame %d = %d from %s; want %d from %s", i, got, f.From, i, from.ID())
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSendReusingIntact sends messages encoded into lent buffers, some
// larger than a stream's write buffer (written through, not copied), while
// the sender encodes the next ones into buffers the host took back: every
// message arrives whole and in order, so none was lent again before its
// bytes were written.
func TestSendReusingIntact(t *testing.T) {
	const n = 2000
	a, b := pair(t, Config{QueueLen: n})
	sizeOf := func(i int) int { return 16 + (i*7919)%(3*streamBufSize/2) }
	fill := func(buf []byte, i int) []byte {
		buf = binary.AppendUvarint(buf, uint64(i))
		for len(buf) < sizeOf(i) {
			buf = append(buf, byte(i))
		}
		return buf
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			f := recv(t, a.Inbound())
			got, k := binary.Uvarint(f.Data)
			if got != uint64(i) || len(f.Data) != sizeOf(i) {
				t.Errorf("frame %d: id %d, %d bytes; want %d bytes", i, got, len(f.Data), sizeOf(i))
				return
			}
			for _, c := range f.Data[k:] {
				if c != byte(i) {
					t.Errorf("frame %d: a byte %d among its own %d", i, c, byte(i))
					return
				}
			}
		}
	}()
	for i := range n {
		if err := b.SendReusing(a.ID(), fill(b.Buffer(), i)); err != nil {
			t.Fatalf("SendReusing(%d) = %v", i, err)
		}
	}
	<-done
}

func TestCall(t *testing.T) {
	a, b := pair(t, Config{})
	a.HandleCall(func(ctx context.Context, from string, req []byte) ([]byte, error) {
		switch string(req) {
		case "fail":
			return nil, errors.New("boom")
		case "block":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return append([]byte(from[:4]+":"), req...), nil
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				req := fmt.Appendf(nil, "req-%d", i)
				got, err := b.Call(t.Context(), a.ID(), req)
				want := b.ID()[:4] + ":" + string(req)
				if err != nil || string(got) != want {
					t.Errorf("Call(%s) = %q, %v; want %q", req, got, err, want)
				}
			})
		}
		wg.Wait()
	})
	t.Run("remote error", func(t *testing.T) {
		_, err := b.Call(t.Context(), a.ID(), []byte("fail"))
		var re *RemoteError
		if !errors.As(err, &re) || re.Message != "boom" {
			t.Fatalf("Call(fail) = %v; want RemoteError{boom}", err)
		}
	})
	t.Run("no handler", func(t *testing.T) {
		_, err := a.Call(t.Context(), b.ID(), []byte("x"))
		var re *RemoteError
		if !errors.As(err, &re) || re.Message != ErrNoHandler.Error() {
			t.Fatalf("Call to a host without handler = %v; want RemoteError{%v}", err, ErrNoHandler)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := b.Call(ctx, a.ID(), []byte("block")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Call(block) = %v; want DeadlineExceeded", err)
		}
	})
}

func TestQUIC(t *testing.T) {
	a := mustHost(t, Config{})
	b := mustHost(t, Config{Listen: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}})
	if err := b.Connect(t.Context(), addrOf(t, a, "quic-v1")); err != nil {
		t.Fatalf("Connect over QUIC: %v", err)
	}
	a.HandleCall(func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil })
	if got, err := b.Call(t.Context(), a.ID(), []byte("ping")); err != nil || string(got) != "ping" {
		t.Fatalf("Call over QUIC = %q, %v; want ping", got, err)
	}
	if err := b.Send(a.ID(), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); string(f.Data) != "hello" {
		t.Fatalf("got %q; want hello", f.Data)
	}
}

func TestSendErrors(t *testing.T) {
	h := mustHost(t, Config{QueueLen: 1, MaxFrame: 1024})
	sk, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	nobody, _ := peer.IDFromPrivateKey(sk)
	tests := []struct {
		name string
		to   string
		data []byte
		want error
	}{
		{"malformed id", "not-a-peer", nil, ErrUnknownPeer},
		{"self", h.ID(), nil, ErrSelf},
		{"too large", nobody.String(), make([]byte, 1024), ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := h.Send(tt.to, tt.data); !errors.Is(err, tt.want) {
				t.Fatalf("Send(%.12s) = %v; want %v", tt.to, err, tt.want)
			}
		})
	}
	t.Run("queue full", func(t *testing.T) {
		// nobody cannot be dialed: its writer backs off, the queue of 1 fills.
		var full int
		for range 100 {
			if err := h.Send(nobody.String(), []byte("x")); errors.Is(err, ErrQueueFull) {
				full++
			}
		}
		if full == 0 {
			t.Fatal("100 Sends to an unreachable peer with QueueLen 1: no ErrQueueFull")
		}
	})
	t.Run("closed", func(t *testing.T) {
		g := mustHost(t, Config{})
		g.Close()
		if err := g.Send(nobody.String(), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Send after Close = %v; want ErrClosed", err)
		}
	})
}

func TestIdentityPersists(t *testing.T) {
	dir := t.TempDir()
	h1, err := New(t.Context(), Config{DataDir: dir, Listen: loopback})
	if err != nil {
		t.Fatal(err)
	}
	id := h1.ID()
	h1.Close()
	h2 := mustHost(t, Config{DataDir: dir})
	if h2.ID() != id {
		t.Fatalf("ID after restart = %s; want %s", h2.ID(), id)
	}
	if got, ok, err := StoredID(dir); err != nil || !ok || got != id {
		t.Fatalf("StoredID = %s, %v, %v; want %s", got, ok, err, id)
	}
	if _, ok, err := StoredID(t.TempDir()); err != nil || ok {
		t.Fatalf("StoredID of an empty dir: ok %v, %v; want false, nil", ok, err)
	}
	st, err := os.Stat(filepath.Join(dir, IdentityFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
}

// writeSwarmKey writes a fresh swarm key file and returns its path.
func writeSwarmKey(t *testing.T) string {
	var buf bytes.Buffer
	if err := GenerateSwarmKey(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSwarmKey(t *testing.T) {
	key := writeSwarmKey(t)
	tcp := []string{"/ip4/127.0.0.1/tcp/0"}
	a, b := pair(t, Config{SwarmKeyFile: key, Listen: loopback}) // QUIC dropped
	for _, addr := range a.Addrs() {
		if strings.Contains(addr, "/udp/") {
			t.Errorf("host with a swarm key listens on %s; want TCP only", addr)
		}
	}
	outsiders := map[string]*Host{
		"other key": mustHost(t, Config{SwarmKeyFile: writeSwarmKey(t), Listen: tcp}),
		"no key":    mustHost(t, Config{Listen: tcp}),
	}
	// A mismatched key garbles the handshake; it fails by timing out, so
	// both outsiders dial at once with a short deadline.
	var wg sync.WaitGroup
	for name, c := range outsiders {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if err := c.Connect(ctx, addrOf(t, a, "tcp")); err == nil {
				t.Errorf("%s: Connect to a private network succeeded; want an error", name)
			}
			c.Send(a.ID(), []byte("intruder"))
		})
	}
	wg.Wait()
	if err := b.Send(a.ID(), []byte("member")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); f.From != b.ID() || string(f.Data) != "member" {
		t.Fatalf("got %q from %s; want member from %s", f.Data, f.From, b.ID())
	}
	for _, c := range outsiders {
		if slices.Contains(a.Connected(), c.ID()) {
			t.Errorf("outsider %s is connected", c.ID())
		}
	}
}

func TestGossip(t *testing.T) {
	a := mustHost(t, Config{})
	join := []string{addrOf(t, a, "tcp")}
	b := mustHost(t, Config{Join: join})
	c := mustHost(t, Config{Join: join})
	waitConnected(t, b, a.ID())
	waitConnected(t, c, a.ID())
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	got := map[string]bool{}
	for len(got) < 2 {
		if err := a.Publish([]byte("load")); err != nil {
			t.Fatal(err)
		}
		select {
		case f := <-b.Gossip():
			got["b"] = f.From == a.ID() && string(f.Data) == "load"
		case f := <-c.Gossip():
			got["c"] = f.From == a.ID() && string(f.Data) == "load"
		case <-tick.C:
		case <-deadline:
			t.Fatalf("gossip not received within 10 s: %v", got)
		}
	}
	if !got["b"] || !got["c"] {
		t.Fatalf("gossip received = %v; want load from %s", got, a.ID())
	}
	select {
	case f := <-a.Gossip():
		t.Fatalf("publisher received its own gossip %q", f.Data)
	default:
	}
}

// Two hosts with MDNS find and dial each other on the LAN. Multicast may be
// absent (containers, CI), so a host that finds nobody skips the test.
func TestMDNS(t *testing.T) {
	a := mustHost(t, Config{MDNS: true, Listen: []string{"/ip4/0.0.0.0/tcp/0"}})
	b := mustHost(t, Config{MDNS: true, Listen: []string{"/ip4/0.0.0.0/tcp/0"}})
	addrOf(t, a, "tcp") // 0.0.0.0 expands to every interface, loopback included
	timeout := time.After(3 * time.Second)
	for {
		changed := a.connChanged()
		if slices.Contains(a.Connected(), b.ID()) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Skip("mdns: no discovery within 3 s; no multicast here?")
		}
	}
}

// After a connection drops, the join loop reconnects, the writer notices
// its stream's connection is gone and reopens it without losing a frame, and
// calls pending on the lost connection fail with ErrDisconnected.
func TestReconnect(t *testing.T) {
	a, b := pair(t, Config{})
	started := make(chan struct{})
	a.HandleCall(func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err := b.Send(a.ID(), []byte("before")); err != nil {
		t.Fatal(err)
	}
	recv(t, a.Inbound())
	callErr := make(chan error, 1)
	go func() {
		_, err := b.Call(t.Context(), a.ID(), []byte("hang"))
		callErr <- err
	}()
	<-started
	dropped := b.connChanged()
	if err := a.host.Network().ClosePeer(b.self); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-callErr:
		if !errors.Is(err, ErrDisconnected) {
			t.Fatalf("pending Call after disconnect = %v; want ErrDisconnected", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("pending Call did not fail after disconnect")
	}
	<-dropped
	waitConnected(t, b, a.ID())
	if err := b.Send(a.ID(), []byte("after")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); string(f.Data) != "after" {
		t.Fatalf("after reconnect got %q; want %q", f.Data, "after")
	}
}

// Close returns only after every goroutine running the host's code ended.
func TestCloseStopsGoroutines(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	a, err := New(t.Context(), Config{Listen: loopback, Logger: quiet, InboundLen: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(t.Context(), Config{Listen: loopback, Logger: quiet, Join: []string{addrOf(t, a, "tcp")}})
	if err != nil {
		t.Fatal(err)
	}
	waitConnected(t, b, a.ID())
	a.HandleCall(func(ctx context.Context, _ string, req []byte) ([]byte, error) { return req, nil })
	if _, err := b.Call(t.Context(), a.ID(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	for range 3 { // a's reader blocks on the full Inbound: Close must free it
		b.Send(a.ID(), []byte("unread"))
	}
	for _, h := range []*Host{b, a} {
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "peer/p2p.(*Host)") {
		t.Fatalf("goroutines of a closed Host still run:\n%s", stacks)
	}
}

// A peer whose host closes is reported on Disconnected once its last
// connection is gone, for the failure detector to ping it at once.
func TestDisconnectedReported(t *testing.T) {
	a, b := pair(t, Config{})
	if err := b.Send(a.ID(), []byte("hello")); err != nil {
		t.Fatal(err)
	}
	recv(t, a.Inbound())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-a.Disconnected():
		if id != b.ID() {
			t.Fatalf("Disconnected = %s; want %s", id, b.ID())
		}
	case <-time.After(testTimeout):
		t.Fatal("no disconnect reported after the other host closed")
	}
}

// A call to a peer that is gone fails soon, however many messages to it
// are queued before it: each waited a backoff and a dial of its own, and a
// call behind a Raft follower's messages waited minutes to fail.
func TestCallToAGonePeerFailsBehindQueuedMessages(t *testing.T) {
	a, b := pair(t, Config{})
	gone := a.ID()
	dropped := b.connChanged()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	<-dropped
	for range 200 {
		_ = b.Send(gone, []byte("raft")) // a full queue refuses some: fine
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := b.Call(ctx, gone, []byte("logs?"))
	if err == nil || ctx.Err() != nil { // (the dial's own timeouts may be in err)
		t.Fatalf("Call to a gone peer = %v; want it to fail for the peer, before its deadline", err)
	}
}
