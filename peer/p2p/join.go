package p2p

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/pnet"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	ma "github.com/multiformats/go-multiaddr"
	madns "github.com/multiformats/go-multiaddr-dns"
	manet "github.com/multiformats/go-multiaddr/net"
	mss "github.com/multiformats/go-multistream"
)

// A join address names the peer to join through with its id (a full
// multiaddr ending in /p2p/<id>) or without it: a TCP multiaddr such as
// /dns4/needle-0/tcp/4001, or host:port. A deployment that starts every peer
// at once (compose, a Kubernetes StatefulSet) knows its peers' names, not
// their ids. For an address without an id the join loop learns the id by
// dialing and running the security handshake (learnID), then connects to
// that id as usual; it learns it again whenever the peer is not connected,
// since the name may now point at another host or the peer may have a new
// identity. A name that does not resolve yet is retried like a failed dial.

// joinTarget is one parsed Config.Join entry.
type joinTarget struct {
	raw  string       // as configured, for logs
	id   peer.ID      // from /p2p/<id>; "" when the address has none
	addr ma.Multiaddr // the transport part (may hold a DNS name)
}

// parseJoin parses a Config.Join entry: a multiaddr with /p2p/<id>, a TCP
// multiaddr without it, or host:port (a DNS name or an IP literal).
func parseJoin(s string) (joinTarget, error) {
	t := joinTarget{raw: s}
	if !strings.HasPrefix(s, "/") {
		m, err := hostPortAddr(s)
		if err != nil {
			return t, err
		}
		t.addr = m
		return t, nil
	}
	m, err := ma.NewMultiaddr(s)
	if err != nil {
		return t, err
	}
	t.addr, t.id = peer.SplitAddr(m)
	switch {
	case t.addr == nil:
		return t, errors.New("no transport address before /p2p")
	case t.id == "" && !isTCP(s):
		return t, errors.New("an address without /p2p/<id> must be TCP (/dns4/NAME/tcp/PORT, /ip4/IP/tcp/PORT or NAME:PORT)")
	}
	return t, nil
}

// CheckJoin returns nil when s can be a join address (Config.Join), else
// what is wanted and why s is not it.
func CheckJoin(s string) error {
	if _, err := parseJoin(s); err != nil {
		return fmt.Errorf("want host:port, a TCP multiaddr (/ip4/IP/tcp/PORT, /dns4/NAME/tcp/PORT) or a multiaddr ending in /p2p/<id>: %v", err)
	}
	return nil
}

// nonTCPJoins returns the join addresses a private network cannot dial.
func nonTCPJoins(joins []string) []string {
	var out []string
	for _, s := range joins {
		if t, err := parseJoin(s); err == nil && !isTCP(t.addr.String()) {
			out = append(out, s)
		}
	}
	return out
}

// hostPortAddr turns host:port into /ip4, /ip6 or /dns multiaddr with /tcp.
func hostPortAddr(s string) (ma.Multiaddr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("port %q: want 1..65535", port)
	}
	proto := "dns"
	if ip := net.ParseIP(host); ip != nil {
		proto = "ip6"
		if ip.To4() != nil {
			proto = "ip4"
		}
	} else if host == "" || strings.ContainsAny(host, "/ ") {
		return nil, fmt.Errorf("host %q: want a DNS name or an IP address", host)
	}
	return ma.NewMultiaddr("/" + proto + "/" + host + "/tcp/" + port)
}

// joinLoop keeps this host connected to one Config.Join peer: it dials while
// the peer is not connected, with exponential backoff and jitter, and sleeps
// on connChanged while it is. It returns when the host closes, or when the
// address turns out to be this host.
//
// A connection that closes soon after it was made counts as a failed dial
// (joinStable): a peer whose --members does not list this host completes
// the handshake and then closes the connection, so the dial succeeds here
// and, without it, the loop would dial again at once, as fast as
// handshakes go.
func (h *Host) joinLoop(t joinTarget) {
	backoff := joinBackoffMin
	failures := 0
	current := t.id       // the peer this loop keeps connected; learned when t.id == ""
	var upSince time.Time // when the connection to current was made or seen; zero once it is gone
	for h.ctx.Err() == nil {
		changed := h.connChanged()
		if current != "" && h.host.Network().Connectedness(current) == network.Connected {
			if upSince.IsZero() {
				upSince = time.Now()
			}
			select {
			case <-changed:
			case <-h.ctx.Done():
			}
			continue
		}
		if !upSince.IsZero() {
			var wait time.Duration
			wait, backoff, failures = afterDrop(time.Since(upSince), backoff, failures)
			upSince = time.Time{}
			if wait > 0 {
				if failures == 1 {
					h.log.Warn("join: connection closed soon after it was made (the peer restarted, or refuses this host: is it in the peer's --members?); retrying with backoff",
						keyAddr, t.raw, keyPeer, current.String())
				}
				if !h.sleep(wait) {
					return
				}
			}
		}
		id, err := h.dialJoin(t)
		if errors.Is(err, ErrSelf) {
			h.log.Warn("join address is this host; skipped", keyAddr, t.raw)
			return
		}
		if id != "" {
			current = id
		}
		if err == nil {
			upSince = time.Now()
		}
		if err == nil || h.ctx.Err() != nil {
			continue
		}
		failures++
		if failures == 1 {
			h.log.Warn("join: dial failed; retrying with backoff", keyAddr, t.raw, keyErr, err)
		} else {
			h.log.Debug("join: dial failed", keyAddr, t.raw, keyErr, err, "attempt", failures)
		}
		if !h.sleep(jitter(backoff)) {
			return
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// afterDrop decides what the join loop does once the connection it kept
// closed after being up for upFor: a connection that held joinStable or
// longer (a peer restarted, a network cut) is dialed again at once, with
// the backoff reset; one that closed sooner counts as one more failure,
// waited out with the backoff, which grows.
func afterDrop(upFor, backoff time.Duration, failures int) (wait, nextBackoff time.Duration, nextFailures int) {
	if upFor >= joinStable {
		return 0, joinBackoffMin, 0
	}
	return jitter(backoff), min(2*backoff, joinBackoffMax), failures + 1
}

// dialJoin connects to t once, learning its peer id first when the address
// carries none. It returns the id it dialed ("" when it could not learn
// one) and ErrSelf when that id is this host's.
func (h *Host) dialJoin(t joinTarget) (peer.ID, error) {
	ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
	defer cancel()
	id := t.id
	if id == "" {
		var err error
		if id, err = h.learnID(ctx, t.addr); err != nil {
			return "", err
		}
		if id != h.self {
			h.host.ConnManager().Protect(id, joinProtectTag)
		}
	}
	if id == h.self {
		return id, ErrSelf
	}
	return id, h.host.Connect(ctx, peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{t.addr}})
}

// learnID resolves addr and returns the peer id of the first of its
// addresses that completes a handshake.
func (h *Host) learnID(ctx context.Context, addr ma.Multiaddr) (peer.ID, error) {
	addrs, err := madns.DefaultResolver.Resolve(ctx, addr)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", addr, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("resolve %s: no address", addr)
	}
	var errs []error
	for _, a := range addrs {
		id, err := h.handshake(ctx, a)
		if err == nil {
			return id, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
	}
	return "", errors.Join(errs...)
}

// handshake dials addr over TCP and runs what libp2p's upgrader runs first
// on an outbound connection: the private-network protector (with a swarm
// key), multistream-select of Noise, and the Noise handshake, which proves
// the remote's identity key. Without an expected id the handshake accepts
// any key; the id it returns is the one the remote proved it holds. The
// connection is closed after it: the caller dials that id through the host.
func (h *Host) handshake(ctx context.Context, addr ma.Multiaddr) (peer.ID, error) {
	var d manet.Dialer
	raw, err := d.DialContext(ctx, addr)
	if err != nil {
		return "", err
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	var conn net.Conn = raw
	if h.psk != nil {
		if conn, err = pnet.NewProtectedConn(h.psk, raw); err != nil {
			return "", err
		}
	}
	if err := mss.SelectProtoOrFail(noise.ID, conn); err != nil {
		return "", fmt.Errorf("negotiate %s: %w", noise.ID, err)
	}
	tr, err := noise.New(noise.ID, h.key, nil)
	if err != nil {
		return "", err
	}
	st, err := tr.WithSessionOptions(noise.DisablePeerIDCheck())
	if err != nil {
		return "", err
	}
	sc, err := st.SecureOutbound(ctx, conn, "")
	if err != nil {
		return "", fmt.Errorf("noise handshake: %w", err)
	}
	defer sc.Close()
	return sc.RemotePeer(), nil
}

// loopbackOnly reports whether every one of addrs is Loopback (and there
// is one).
func loopbackOnly(addrs []string) bool {
	for _, a := range addrs {
		if !Loopback(a) {
			return false
		}
	}
	return len(addrs) > 0
}

// Loopback reports whether addr, a listen or join address (a multiaddr,
// or host:port), reaches only this host: 127.0.0.0/8, ::1 or localhost.
// An address that does not parse is not (its own check names it).
func Loopback(addr string) bool {
	var m ma.Multiaddr
	var err error
	if strings.HasPrefix(addr, "/") {
		m, err = ma.NewMultiaddr(addr)
	} else {
		m, err = hostPortAddr(addr)
	}
	if err != nil || len(m) == 0 {
		return false
	}
	if manet.IsIPLoopback(m) {
		return true
	}
	switch c := m[0]; c.Protocol().Code {
	case ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
		return strings.EqualFold(c.Value(), "localhost")
	}
	return false
}
