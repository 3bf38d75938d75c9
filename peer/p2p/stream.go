package p2p

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Stream tuning.
const (
	streamBufSize  = 64 << 10 // bufio size of each stream's reader and writer
	openBackoffMin = 50 * time.Millisecond
	openBackoffMax = 2 * time.Second
	maxHeaderLen   = 2 + 2*binary.MaxVarintLen64 // length, version, kind, id
)

// writer is the outbound side towards one peer: a bounded queue drained by
// one goroutine (runWriter) that owns the peer's long-lived outbound stream.
type writer struct {
	peer  peer.ID
	queue chan outFrame // Config.QueueLen; filled by enqueue, drained by runWriter
}

// outFrame is a queued frame, encoded only when written.
type outFrame struct {
	kind Kind
	id   uint64 // correlation id; 0 for messages
	data []byte // owned by the host from enqueue on; never modified
	// reuse: data came from Buffer (SendReusing) and goes back to the
	// pool once written or dropped.
	reuse bool
}

// maxReused bounds the buffers the pool keeps: a rare large message (a
// snapshot's, a big group's entry) is left to the collector rather than
// held for the small ones.
const maxReused = 1 << 20

// bufPool holds the message buffers Buffer lends and SendReusing takes
// back. A busy peer encodes every Raft message it sends into a buffer: a
// new one each time was 5% of the bytes it allocated.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// Buffer returns an empty buffer to encode a message into for
// SendReusing, with the room of one sent before.
func (h *Host) Buffer() []byte {
	return (*bufPool.Get().(*[]byte))[:0]
}

// release puts a written or dropped frame's buffer back in the pool if it
// came from Buffer.
func release(f outFrame) {
	if f.reuse && cap(f.data) <= maxReused {
		b := f.data[:0]
		bufPool.Put(&b)
	}
}

// Send queues data for peer to and returns at once. Frames to one peer are
// written in order on one long-lived stream; a frame lost with a broken
// stream is not retried. The host keeps data until it is written: the caller
// must not modify it after Send returns. Errors: ErrUnknownPeer, ErrSelf,
// ErrFrameTooLarge, ErrQueueFull, ErrClosed.
func (h *Host) Send(to string, data []byte) error {
	return h.send(outFrame{kind: KindMessage, data: data}, to)
}

// SendReusing is Send for data from Buffer: the host takes it back once it
// is written (or dropped), to lend it again. The caller must neither read
// nor modify data after the call, nor send it twice.
func (h *Host) SendReusing(to string, data []byte) error {
	return h.send(outFrame{kind: KindMessage, data: data, reuse: true}, to)
}

func (h *Host) send(f outFrame, to string) error {
	w, err := h.writerFor(to)
	if err == nil {
		err = h.enqueue(w, f)
	}
	if err != nil {
		release(f)
	}
	return err
}

// Inbound returns the channel of messages from every peer. It is bounded
// (Config.InboundLen): while it is full, the stream readers wait, which
// pushes back on the senders. It is never closed.
func (h *Host) Inbound() <-chan Frame { return h.inbound }

// enqueue puts f on w's queue without waiting.
func (h *Host) enqueue(w *writer, f outFrame) error {
	if n := frameLen(f.id, len(f.data)); n > h.cfg.MaxFrame {
		return fmt.Errorf("%w: %d bytes > max %d", ErrFrameTooLarge, n, h.cfg.MaxFrame)
	}
	select {
	case w.queue <- f:
		return nil
	default:
		h.stats.queueFull.Add(1)
		return ErrQueueFull
	}
}

// writerFor returns the writer of peer id to, creating it and its goroutine
// on first use. Writers are found by the id string, so the hot path of Send
// decodes nothing; a non-canonical spelling of a known peer shares that
// peer's writer, keeping one stream (one order) per peer.
func (h *Host) writerFor(to string) (*writer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if w := h.writers[to]; w != nil {
		return w, nil
	}
	p, err := h.parsePeer(to)
	if err != nil {
		return nil, err
	}
	w := h.writers[p.String()]
	if w == nil {
		w = &writer{peer: p, queue: make(chan outFrame, h.cfg.QueueLen)}
		h.writers[p.String()] = w
		h.wg.Add(1)
		go h.runWriter(w)
	}
	h.writers[to] = w
	return w, nil
}

// runWriter drains w.queue onto one outbound stream, opened lazily and
// reopened after a failure. A burst of queued frames is written through one
// buffer and flushed when the queue is momentarily empty. When the stream
// cannot be opened, the frames queued are dropped (the calls among them
// fail at once) and the writer backs off; the next frame tries again.
func (h *Host) runWriter(w *writer) {
	defer h.wg.Done()
	var s network.Stream
	bw := bufio.NewWriterSize(nil, streamBufSize)
	defer func() {
		if s != nil {
			s.Reset()
		}
	}()
	backoff := openBackoffMin
	for {
		var f outFrame
		select {
		case f = <-w.queue:
		case <-h.ctx.Done():
			return
		}
		if s != nil && s.Conn().IsClosed() {
			s.Reset() // its connection is gone: reopen rather than lose f
			s = nil
		}
		if s == nil {
			var err error
			if s, err = h.openStream(w.peer); err != nil {
				h.dropFrame(w.peer, f, "open stream", err)
				release(f)
				// So is the rest of the queue: each frame would wait a
				// backoff and an attempt of its own, and a call queued
				// behind the messages to an unreachable peer (a Raft
				// follower that died) waited minutes for its failure.
				h.dropQueued(w, "open stream", err)
				if !h.sleep(jitter(backoff)) {
					return
				}
				backoff = min(2*backoff, openBackoffMax)
				continue
			}
			backoff = openBackoffMin
			bw.Reset(s)
		}
		if lost, err := h.writeBurst(bw, w.queue, f, s.Protocol() == ProtocolCancel); err != nil {
			h.lostBurst(w, lost, err)
			s.Reset()
			s = nil
		}
	}
}

// openStream opens the outbound stream to p, dialing p if needed.
func (h *Host) openStream(p peer.ID) (network.Stream, error) {
	if err := h.dialPaused(p); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(h.ctx, dialTimeout)
	defer cancel()
	s, err := h.host.NewStream(ctx, p, ProtocolCancel, ProtocolID)
	if err != nil {
		return nil, err
	}
	h.log.Debug("outbound stream opened", keyPeer, p.String())
	return s, nil
}

// writeBurst writes f and then every frame already queued, and flushes once
// the queue is empty. On error it returns every frame of the unflushed
// burst: any of them may not have reached the peer (bufio writes through
// when its buffer fills, so some may have). A KindCancel frame is left
// out of a stream that is not of ProtocolCancel (cancels false).
func (h *Host) writeBurst(bw *bufio.Writer, queue <-chan outFrame, f outFrame, cancels bool) ([]outFrame, error) {
	var hdr [maxHeaderLen]byte
	var burst []outFrame
	for {
		if f.kind != KindCancel || cancels {
			burst = append(burst, f)
			if _, err := bw.Write(appendHeader(hdr[:0], f.kind, f.id, len(f.data))); err != nil {
				return burst, err
			}
			if _, err := bw.Write(f.data); err != nil {
				return burst, err
			}
			h.stats.framesSent.Add(1)
		}
		select {
		case f = <-queue:
			continue
		default:
		}
		if err := bw.Flush(); err != nil {
			return burst, err
		}
		for _, f := range burst {
			release(f)
		}
		return nil, nil
	}
}

// lostBurst accounts for the frames of a burst whose write failed. A
// reply goes out again on the next stream (the caller matches replies by
// id and ignores a repeat, so a copy that did arrive does no harm); a
// call fails now, rather than at its caller's deadline (it may have
// reached the peer: sending it again could run it twice); a message is
// lost, as Send documents.
func (h *Host) lostBurst(w *writer, lost []outFrame, err error) {
	for _, f := range lost {
		if f.kind == KindReply || f.kind == KindError {
			if h.enqueue(w, f) == nil {
				continue
			}
		}
		h.dropFrame(w.peer, f, "write", err)
		release(f)
	}
}

// dropQueued drops every frame queued for w now (failing its calls).
func (h *Host) dropQueued(w *writer, op string, err error) {
	for {
		select {
		case f := <-w.queue:
			h.dropFrame(w.peer, f, op, err)
			release(f)
		default:
			return
		}
	}
}

// dropFrame accounts for a frame lost on its way out. A lost call fails now
// rather than at its deadline.
func (h *Host) dropFrame(p peer.ID, f outFrame, op string, err error) {
	h.stats.framesDropped.Add(1)
	if h.ctx.Err() != nil {
		return
	}
	h.log.Debug("frame dropped", keyPeer, p.String(), "op", op, keyErr, err)
	if f.kind == KindCall {
		h.finishCall(p, f.id, callResult{err: fmt.Errorf("p2p: call %s: %s: %w", p, op, err)})
	}
}

// handleStream is the stream handler of ProtocolID: it reads the frames of
// one inbound stream until it ends, in the goroutine libp2p gave it. A bad
// frame is logged and resets the stream; the host stays up.
func (h *Host) handleStream(s network.Stream) {
	if !h.enter() {
		s.Reset()
		return
	}
	defer h.wg.Done()
	from := s.Conn().RemotePeer()
	fromStr := from.String()
	r := bufio.NewReaderSize(s, streamBufSize)
	for {
		f, err := ReadFrame(r, h.cfg.MaxFrame)
		switch {
		case err == io.EOF:
			s.Close()
			return
		case errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge):
			h.stats.badFrames.Add(1)
			h.log.Warn("bad frame; stream reset", keyPeer, fromStr, keyErr, err)
			s.ResetWithError(network.StreamProtocolViolation)
			return
		case err != nil:
			h.log.Debug("inbound stream ended", keyPeer, fromStr, keyErr, err)
			s.Reset()
			return
		}
		h.stats.framesReceived.Add(1)
		if !h.dispatch(from, fromStr, f) {
			s.Reset()
			return
		}
	}
}

// dispatch hands one inbound frame to its consumer. It reports false when
// the host is closing.
func (h *Host) dispatch(from peer.ID, fromStr string, f WireFrame) bool {
	switch f.Kind {
	case KindMessage:
		select {
		case h.inbound <- Frame{From: fromStr, Data: f.Payload}:
			return true
		case <-h.ctx.Done():
			return false
		}
	case KindCall:
		return h.serveCall(from, fromStr, f)
	case KindReply:
		h.finishCall(from, f.ID, callResult{data: f.Payload})
	case KindError:
		h.finishCall(from, f.ID, callResult{err: &RemoteError{Message: string(f.Payload)}})
	case KindCancel:
		h.cancelServed(from, f.ID)
	}
	return true
}
