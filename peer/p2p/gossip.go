package p2p

import (
	"fmt"
	"sync/atomic"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
)

// startGossip creates the gossipsub router, joins GossipTopic and starts the
// goroutine that forwards its messages to the Gossip channel.
func (h *Host) startGossip() error {
	ps, err := pubsub.NewGossipSub(h.ctx, h.host, pubsub.WithLogger(h.log.With("component", "pubsub")))
	if err != nil {
		return wrapf("start gossipsub", err)
	}
	h.ps = ps
	if h.topic, err = ps.Join(GossipTopic); err != nil {
		return wrapf("join gossip topic", err)
	}
	if h.sub, err = h.topic.Subscribe(); err != nil {
		return wrapf("subscribe to gossip topic", err)
	}
	h.spawn(h.gossipLoop)
	return nil
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
}

// counters are the live values behind Stats.
type counters struct {
	framesSent, framesReceived, framesDropped atomic.Uint64
	queueFull, badFrames, gossipDropped       atomic.Uint64
}

// Stats returns a snapshot of the host's counters.
func (h *Host) Stats() Stats {
	c := &h.stats
	return Stats{
		FramesSent:     c.framesSent.Load(),
		FramesReceived: c.framesReceived.Load(),
		FramesDropped:  c.framesDropped.Load(),
		QueueFull:      c.queueFull.Load(),
		BadFrames:      c.badFrames.Load(),
		GossipDropped:  c.gossipDropped.Load(),
	}
}

// wrapf prefixes err with the package and the failed operation.
func wrapf(op string, err error) error {
	return fmt.Errorf("p2p: %s: %w", op, err)
}
