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
