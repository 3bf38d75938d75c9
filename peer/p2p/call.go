package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// CallHandler answers the calls of remote peers (see Host.HandleCall). ctx is
// canceled when the host closes, and when the caller stops waiting (its
// ctx ended: a KindCancel frame, from a host of ProtocolCancel); from is
// the caller's peer id. A non-nil error reaches the caller as a
// *RemoteError carrying err.Error().
type CallHandler func(ctx context.Context, from string, req []byte) ([]byte, error)

// RemoteError is the error a remote CallHandler returned, as seen by Call.
type RemoteError struct {
	// Message is the remote error's text.
	Message string
}

// Error returns the remote message, prefixed.
func (e *RemoteError) Error() string { return "p2p: remote: " + e.Message }

// pendingCall is a Call waiting for its reply.
type pendingCall struct {
	peer peer.ID         // the callee; replies from anyone else are ignored
	done chan callResult // buffered (1); receives exactly one result
}

// callResult is the outcome of one call.
type callResult struct {
	data []byte
	err  error
}

// HandleCall sets the function answering calls from remote peers, replacing
// any previous one. Each call runs in its own host-owned goroutine, at most
// Config.MaxCalls at once; Close waits for running handlers, so they must
// honour ctx. Without a handler, calls fail with ErrNoHandler's text.
func (h *Host) HandleCall(f func(ctx context.Context, from string, req []byte) ([]byte, error)) {
	hf := CallHandler(f)
	h.handler.Store(&hf)
}

// Call sends req to peer to and waits for the answer of its CallHandler.
// Requests and replies share the long-lived streams of Send, matched by a
// correlation id. A remote handler error comes back as a *RemoteError; ctx
// bounds the wait; ErrDisconnected ends it early when the peer's last
// connection closes. As with Send, the host keeps req until it is written,
// so the caller must not modify it, even after Call returns.
func (h *Host) Call(ctx context.Context, to string, req []byte) ([]byte, error) {
	w, err := h.writerFor(to)
	if err != nil {
		return nil, err
	}
	pid := w.peer
	id := h.nextID.Add(1)
	pc := &pendingCall{peer: pid, done: make(chan callResult, 1)}
	h.callMu.Lock()
	h.pending[id] = pc
	h.callMu.Unlock()
	if err := h.enqueue(w, outFrame{kind: KindCall, id: id, data: req}); err != nil {
		h.takeCall(pid, id)
		return nil, err
	}
	select {
	case r := <-pc.done:
		return r.data, r.err
	case <-ctx.Done():
		if h.takeCall(pid, id) != nil {
			// The callee's handler may be running still (a long poll):
			// tell it to stop. Best effort: a full queue drops it, and
			// the handler ends on its own.
			_ = h.enqueue(w, outFrame{kind: KindCancel, id: id})
		}
		return nil, fmt.Errorf("p2p: call %s: %w", to, ctx.Err())
	case <-h.ctx.Done():
		h.takeCall(pid, id)
		return nil, ErrClosed
	}
}

// takeCall removes and returns the pending call id if it was made to p.
func (h *Host) takeCall(p peer.ID, id uint64) *pendingCall {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	pc := h.pending[id]
	if pc == nil || pc.peer != p {
		return nil
	}
	delete(h.pending, id)
	return pc
}

// finishCall completes the pending call id made to p; a reply to an unknown,
// finished or foreign call is ignored.
func (h *Host) finishCall(p peer.ID, id uint64, r callResult) {
	if pc := h.takeCall(p, id); pc != nil {
		pc.done <- r
		return
	}
	h.log.Debug("reply to no pending call", keyPeer, p.String(), "id", id)
}

// failCalls fails every call pending on peer p.
func (h *Host) failCalls(p peer.ID, err error) {
	h.callMu.Lock()
	defer h.callMu.Unlock()
	for id, pc := range h.pending {
		if pc.peer == p {
			delete(h.pending, id)
			pc.done <- callResult{err: fmt.Errorf("p2p: call %s: %w", p, err)}
		}
	}
}

// serveCall runs the handler of one inbound call in a host-owned goroutine.
// With Config.MaxCalls running already, the call is answered ErrBusy: the
// reader of the calling stream never waits for a handler, since the
// caller's messages (Raft's) come on the same stream, behind the call, and
// handlers may wait minutes (a forwarded GET ?wait=). It reports false
// when the host is closing.
func (h *Host) serveCall(from peer.ID, fromStr string, f WireFrame) bool {
	select {
	case h.callSem <- struct{}{}:
	case <-h.ctx.Done():
		return false
	default:
		h.stats.callsBusy.Add(1)
		busy := []byte(ErrBusy.Error())
		if w, err := h.writerFor(fromStr); err == nil && h.enqueue(w, outFrame{kind: KindError, id: f.ID, data: busy}) == nil {
			return true
		}
		return h.spawn(func() { h.reply(fromStr, KindError, f.ID, busy) }) // waits for room
	}
	key := servedCall{from, f.ID}
	ctx, cancel := context.WithCancel(h.ctx)
	s := &serving{cancel}
	h.callMu.Lock()
	h.serving[key] = s // a caller's ids are unique: a repeat replaces it
	h.callMu.Unlock()
	ok := h.spawn(func() {
		defer func() { <-h.callSem }()
		defer h.endServed(key, s)
		h.answer(ctx, from, fromStr, f)
	})
	if !ok {
		h.endServed(key, s)
		<-h.callSem
	}
	return ok
}

// servedCall names a call this host's handler is answering: its caller and
// the caller's correlation id.
type servedCall struct {
	from peer.ID
	id   uint64
}

// serving is the handler of a servedCall, running.
type serving struct{ cancel context.CancelFunc }

// cancelServed cancels the ctx of the handler answering call id of peer
// from, when it still runs (KindCancel).
func (h *Host) cancelServed(from peer.ID, id uint64) {
	h.callMu.Lock()
	s := h.serving[servedCall{from, id}]
	h.callMu.Unlock()
	if s != nil {
		s.cancel()
	}
}

// endServed forgets the handler s of call key, returned, and releases its
// ctx.
func (h *Host) endServed(key servedCall, s *serving) {
	h.callMu.Lock()
	if h.serving[key] == s {
		delete(h.serving, key)
	}
	h.callMu.Unlock()
	s.cancel()
}

// answer runs the handler for call f with ctx and queues its reply to the
// caller.
func (h *Host) answer(ctx context.Context, from peer.ID, fromStr string, f WireFrame) {
	kind, resp := KindReply, []byte(nil)
	if hp := h.handler.Load(); hp == nil {
		kind, resp = KindError, []byte(ErrNoHandler.Error())
	} else if out, err := (*hp)(ctx, fromStr, f.Payload); err != nil {
		kind, resp = KindError, []byte(err.Error())
	} else {
		resp = out
	}
	h.reply(fromStr, kind, f.ID, resp)
}

// reply queues the answer to call id of peer to.
func (h *Host) reply(to string, kind Kind, id uint64, resp []byte) {
	w, err := h.writerFor(to)
	if err == nil {
		err = h.enqueueReply(w, outFrame{kind: kind, id: id, data: resp})
	}
	if errors.Is(err, ErrFrameTooLarge) {
		err = h.enqueueReply(w, outFrame{kind: KindError, id: id, data: []byte(err.Error())})
	}
	if err != nil && h.ctx.Err() == nil {
		h.log.Warn("call reply dropped", keyPeer, to, keyErr, err)
	}
}

// replyQueueWait bounds how long an answer waits for room in a full
// outbound queue before it is dropped.
var replyQueueWait = 10 * time.Second

// enqueueReply queues a call's reply, waiting for room when the peer's
// queue is full: a dropped reply leaves its caller waiting until its
// deadline, while the answering goroutine (one of Config.MaxCalls) can
// afford to wait for the writer to drain.
func (h *Host) enqueueReply(w *writer, f outFrame) error {
	err := h.enqueue(w, f)
	if !errors.Is(err, ErrQueueFull) {
		return err
	}
	t := time.NewTimer(replyQueueWait)
	defer t.Stop()
	select {
	case w.queue <- f:
		return nil
	case <-t.C:
		return err
	case <-h.ctx.Done():
		return ErrClosed
	}
}
