package p2p

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// startGossip creates the gossipsub router, joins GossipTopic and starts the
// goroutine that forwards its messages to the Gossip channel.
func (h *Host) startGossip() error {
	ps, err := pubsub.NewGossipSub(h.ctx, h.host, pubsub.WithLogger(h.log.With("component", "pubsub")))
	if err != nil {
		return wrapf("start gossipsub", err)
	}
	h.ps = ps
	if h.gate != nil {
		// Inline: the check is a map read, cheaper than the goroutine
		// and throttle slot an asynchronous validator takes per message.
		if err := ps.RegisterTopicValidator(GossipTopic, h.gate.validate, pubsub.WithValidatorInline(true)); err != nil {
			return wrapf("register gossip validator", err)
		}
	}
	if h.topic, err = ps.Join(GossipTopic); err != nil {
		return wrapf("join gossip topic", err)
	}
	if h.sub, err = h.topic.Subscribe(); err != nil {
		return wrapf("subscribe to gossip topic", err)
	}
	h.spawn(h.gossipLoop)
	h.spawn(h.watchGossip)
	return nil
}

// gossipMisses is how many checks in a row a connected peer may be missing
// from the topic's subscribers before watchGossip reconnects it.
const gossipMisses = 3

// watchGossip reconnects peers that gossipsub stopped talking to. Gossipsub
// drops its writer to a peer when that writer's stream dies while another
// connection to the peer stays up (a restarted peer's new connection
// arriving before the old one closes, two peers dialing each other at
// once), opens a new one after a backoff, and gives up after four such
// deaths in ten minutes (MaxBackoffAttempts, TimeToLive in its backoff.go,
// not configurable). It then neither sends to the peer nor learns that the
// peer subscribes, until a connection to it opens again: that peer's
// heartbeats go nowhere and the mesh holds it dead while it runs. Either
// way one side ends up connected to a peer that is not among the topic's
// subscribers; every Config.GossipCheck this finds such peers (speaking
// ProtocolID, so needle peers only) and, after gossipMisses checks in a
// row, closes the connections to them and dials them again: the fresh
// connection starts gossipsub's state for that peer afresh.
func (h *Host) watchGossip() {
	t := time.NewTicker(h.cfg.GossipCheck)
	defer t.Stop()
	misses := map[peer.ID]int{}
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		net := h.host.Network()
		var connected []peer.ID
		for _, p := range net.Peers() {
			if net.Connectedness(p) != network.Connected {
				continue
			}
			if ok, err := h.host.Peerstore().SupportsProtocols(p, ProtocolID); err == nil && len(ok) > 0 {
				connected = append(connected, p)
			}
		}
		for _, p := range unsubscribed(misses, connected, h.topic.ListPeers()) {
			h.regossip(p)
		}
	}
}

// unsubscribed updates misses, the consecutive checks each connected peer
// was found missing from subscribers, and returns the peers that reached
// gossipMisses (their count starts again). Peers no longer connected or
// subscribed again are forgotten.
func unsubscribed(misses map[peer.ID]int, connected, subscribed []peer.ID) []peer.ID {
	sub := make(map[peer.ID]bool, len(subscribed))
	for _, p := range subscribed {
		sub[p] = true
	}
	var out []peer.ID
	seen := make(map[peer.ID]bool, len(connected))
	for _, p := range connected {
		if sub[p] {
			continue
		}
		seen[p] = true
		misses[p]++
		if misses[p] >= gossipMisses {
			out = append(out, p)
			misses[p] = 0
		}
	}
	for p := range misses {
		if !seen[p] {
			delete(misses, p)
		}
	}
	return out
}

// regossip closes every connection to p and dials it again at the
// addresses the peerstore holds (the join loop and the peer's dialMembers
// would too, later).
func (h *Host) regossip(p peer.ID) {
	h.stats.gossipResets.Add(1)
	h.log.Warn("gossip: connected peer missing from the topic; reconnecting it", keyPeer, p.String())
	if err := h.host.Network().ClosePeer(p); err != nil {
		h.log.Debug("gossip: close peer", keyPeer, p.String(), keyErr, err)
	}
	ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
	defer cancel()
	if err := h.host.Connect(ctx, peer.AddrInfo{ID: p, Addrs: h.host.Peerstore().Addrs(p)}); err != nil {
		h.log.Debug("gossip: redial", keyPeer, p.String(), keyErr, err)
	}
}

// Publish gossips data to the peers subscribed to GossipTopic. Delivery is
// best effort: gossip is advisory (load, liveness), never for state. With
// no peer in the topic it does nothing: the message would reach nobody,
// after being signed, validated and handed to this host's own
// subscription (most of a lone idle peer's CPU).
func (h *Host) Publish(data []byte) error {
	if h.isClosed() {
		return ErrClosed
	}
	if len(h.topic.ListPeers()) == 0 {
		return nil
	}
	if err := h.topic.Publish(h.ctx, data); err != nil {
		return wrapf("publish", err)
	}
	return nil
}

// Gossip returns the channel of gossip from other peers (this host's own
// messages are filtered out). It is bounded (Config.GossipLen); when it is
// full the oldest message is dropped and counted in Stats.GossipDropped. It
// is never closed.
func (h *Host) Gossip() <-chan Frame { return h.gossip }

// gossipLoop forwards subscription messages until the host closes.
func (h *Host) gossipLoop() {
	for {
		m, err := h.sub.Next(h.ctx)
		if err != nil {
			return // host closing: ctx canceled or subscription canceled
		}
		if m.ReceivedFrom == h.self || m.GetFrom() == h.self {
			continue
		}
		h.pushGossip(Frame{From: m.GetFrom().String(), Data: m.Data})
	}
}

// pushGossip delivers f, dropping the oldest queued message while the
// channel is full. gossipLoop is the only sender, so one drop makes room.
func (h *Host) pushGossip(f Frame) {
	for {
		select {
		case h.gossip <- f:
			return
		default:
		}
		select {
		case <-h.gossip:
			h.stats.gossipDropped.Add(1)
		default:
		}
	}
}

// Stats are cumulative counters of a Host, for metrics and tests.
type Stats struct {
	// FramesSent counts frames written to outbound streams.
	FramesSent uint64
	// FramesReceived counts well-formed frames read from inbound streams.
	FramesReceived uint64
	// FramesDropped counts outbound frames lost because their stream could
	// not be opened or broke while they were written.
	FramesDropped uint64
	// QueueFull counts Send and Call refusals with ErrQueueFull.
	QueueFull uint64
	// BadFrames counts malformed inbound frames (each reset its stream).
	BadFrames uint64
	// GossipDropped counts gossip messages dropped because Gossip was full.
	GossipDropped uint64
	// GossipResets counts peers reconnected because gossipsub had stopped
	// talking to them (watchGossip).
	GossipResets uint64
	// CallsBusy counts the calls answered ErrBusy (Config.MaxCalls
	// handlers were running).
	CallsBusy uint64
	// RefusedInbound and RefusedOutbound count the connections refused to
	// peers not in Config.MembersFile: accepted and closed after the
	// handshake, or dials not made. GossipRefused counts the gossip
	// messages dropped for an author not in it.
	RefusedInbound, RefusedOutbound, GossipRefused uint64
}

// counters are the live values behind Stats.
type counters struct {
	framesSent, framesReceived, framesDropped atomic.Uint64
	queueFull, badFrames, gossipDropped       atomic.Uint64
	gossipResets, callsBusy                   atomic.Uint64
}

// Stats returns a snapshot of the host's counters.
func (h *Host) Stats() Stats {
	c := &h.stats
	var in, out, gossip uint64
	if g := h.gate; g != nil {
		in, out, gossip = g.refusedIn.Load(), g.refusedOut.Load(), g.gossipRefused.Load()
	}
	return Stats{
		RefusedInbound:  in,
		RefusedOutbound: out,
		GossipRefused:   gossip,
		FramesSent:      c.framesSent.Load(),
		FramesReceived:  c.framesReceived.Load(),
		FramesDropped:   c.framesDropped.Load(),
		QueueFull:       c.queueFull.Load(),
		BadFrames:       c.badFrames.Load(),
		GossipDropped:   c.gossipDropped.Load(),
		GossipResets:    c.gossipResets.Load(),
		CallsBusy:       c.callsBusy.Load(),
	}
}

// wrapf prefixes err with the package and the failed operation.
func wrapf(op string, err error) error {
	return fmt.Errorf("p2p: %s: %w", op, err)
}
