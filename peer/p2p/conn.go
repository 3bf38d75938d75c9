package p2p

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
)

// connEvent is the connection notifee: libp2p calls it for every connection
// opened or closed. Every call wakes the waiters on connChanged; a peer-level
// change (first connection up, last one down) is logged, and a peer gone
// fails the calls pending on it. It must not block.
func (h *Host) connEvent(n network.Network, p peer.ID, up bool) {
	h.mu.Lock()
	close(h.connCh)
	h.connCh = make(chan struct{})
	h.mu.Unlock()
	conns := len(n.ConnsToPeer(p))
	switch {
	case up && conns == 1:
		h.log.Info("peer connected", keyPeer, p.String())
	case !up && conns == 0:
		h.log.Info("peer disconnected", keyPeer, p.String())
		h.failCalls(p, ErrDisconnected)
		select {
		case h.lost <- p.String():
		default: // a hint: the failure detector finds the peer anyway
		}
	}
}

// closedAtOnce is how soon after it was made a connection this host
// dialed must close for noteClosedAtOnce to take it as refused: a peer
// whose --members does not list this host closes it as soon as the
// handshake proved this host's id, one round trip after it was made here.
const closedAtOnce = 2 * time.Second

// dialPause is how long this host does not dial a peer again (Connect, a
// stream's open) after the peer closed its dial at once, while it has no
// connection to it. Without it a peer that lists another which does not
// list it redialed it twice a second (its members loop and its stream
// writers, each a handshake on both sides: 164 in 83 s, three daemons);
// the join loops keep their own backoff. A restarted peer that closed one
// dial while it stopped is dialed again after it, or as soon as it dials
// this host.
const dialPause = 10 * time.Second

// dialPaused returns ErrDialPaused while this host holds back its dials
// to p (dialPause), nil otherwise.
func (h *Host) dialPaused(p peer.ID) error {
	if h.host.Network().Connectedness(p) == network.Connected {
		return nil
	}
	h.closedMu.Lock()
	defer h.closedMu.Unlock()
	at, ok := h.closedAt[p]
	switch {
	case !ok:
		return nil
	case time.Since(at) >= dialPause:
		delete(h.closedAt, p)
		return nil
	}
	return ErrDialPaused
}

// unpauseDial forgets p's closed dial: p connected to this host.
func (h *Host) unpauseDial(p peer.ID) {
	h.closedMu.Lock()
	delete(h.closedAt, p)
	h.closedMu.Unlock()
}

// noteClosedAtOnce takes a connection this host dialed, to a peer it
// allows, that closed within closedAtOnce while the host runs: the
// likeliest cause is the peer's --members, which does not list this host
// (lists that differ between peers; the peer's own log names this host as
// refused). It holds back this host's dials to the peer for dialPause and
// logs it, at most once per refusedLogEvery per peer. Without it the
// refused side alone said so, and this side logged a connect and a
// disconnect, twice a second. c is already removed from the peer's
// connections.
func (h *Host) noteClosedAtOnce(n network.Network, c network.Conn) {
	p, st := c.RemotePeer(), c.Stat()
	switch {
	case st.Direction != network.DirOutbound || h.ctx.Err() != nil || time.Since(st.Opened) >= closedAtOnce:
		return
	case h.gate != nil && !h.gate.allows(p): // closed here, by a reload
		return
	case len(n.ConnsToPeer(p)) > 0: // a duplicate closed, another kept
		return
	}
	h.closedMu.Lock()
	if h.closedAt == nil {
		h.closedAt = map[peer.ID]time.Time{}
	}
	h.closedAt[p] = time.Now()
	h.closedMu.Unlock()
	if !h.closedLog.due(p, time.Now()) {
		return
	}
	h.log.Warn("peer "+p.String()+" closed the connection right after the handshake: it may not list this peer ("+
		h.self.String()+") in its --members, or it is stopping; not dialed again for "+dialPause.String(),
		keyPeer, p.String(), "self", h.self.String(), "next_log_after", refusedLogEvery.String())
}

// closeUnlisted closes c when its peer is not in Config.MembersFile: the
// gater refused it already unless a reload removed the peer while c was
// being set up, after the gater let it through and before ReloadMembers
// looked at the connections. Closing blocks, and a notifee must not.
func (h *Host) closeUnlisted(c network.Conn) {
	if h.gate == nil || h.gate.allows(c.RemotePeer()) {
		return
	}
	h.spawn(func() { c.Close() })
}

// lostLen bounds the disconnects waiting for the peer's loop.
const lostLen = 256

// Disconnected returns the channel of peers whose last connection to this
// host closed (a peer killed: its kernel closes them at once), for the
// failure detector to ping them now (node.Node.Disconnected). Best effort:
// when it is full a disconnect is dropped. It is never closed.
func (h *Host) Disconnected() <-chan string { return h.lost }

// connChanged returns a channel closed at the next peer connect or
// disconnect. Take it before checking the state it guards.
func (h *Host) connChanged() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.connCh
}

// sleep waits d or until the host closes; it reports whether d elapsed.
func (h *Host) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.ctx.Done():
		return false
	}
}

// jitter returns d scaled by a random factor in [0.5, 1.5), so peers that
// lost the same neighbour do not redial in lockstep.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d)
}

// startMDNS advertises this host on the LAN and dials the peers it finds.
func (h *Host) startMDNS() error {
	h.mdns = mdns.NewMdnsService(h.host, ServiceName, mdnsNotifee{h})
	if err := h.mdns.Start(); err != nil {
		return wrapf("start mdns", err)
	}
	return nil
}

// mdnsNotifee receives the peers mDNS discovers.
type mdnsNotifee struct{ h *Host }

// HandlePeerFound dials a discovered peer in a host-owned goroutine.
func (n mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	h := n.h
	if ai.ID == h.self || h.host.Network().Connectedness(ai.ID) == network.Connected || !h.Allowed(ai.ID.String()) {
		return
	}
	h.spawn(func() {
		ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
		defer cancel()
		if err := h.host.Connect(ctx, ai); err != nil {
			h.log.Debug("mdns: dial failed", keyPeer, ai.ID.String(), keyErr, err)
		}
	})
}
