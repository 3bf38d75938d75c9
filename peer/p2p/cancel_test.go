package p2p

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// blockingHandler answers every call by waiting for its ctx: started
// receives the call's ctx once it runs, ended is closed when the ctx ends.
func blockingHandler(h *Host) (started chan context.Context, ended chan struct{}) {
	started, ended = make(chan context.Context, 1), make(chan struct{})
	h.HandleCall(func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		started <- ctx
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	})
	return started, ended
}

// A caller that stops waiting (its ctx canceled) tells the callee, whose
// handler's ctx ends: a long poll forwarded to another peer ends there
// with its client, instead of holding one of Config.MaxCalls handlers
// (and, when all are busy, the calling stream) until it times out.
func TestCallCancelReachesHandler(t *testing.T) {
	a, b := pair(t, Config{})
	started, ended := blockingHandler(a)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, a.ID(), []byte("block"))
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(testTimeout):
		t.Fatal("the call's handler did not start")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call = %v; want context.Canceled", err)
	}
	select {
	case <-ended:
	case <-time.After(testTimeout):
		t.Fatal("the handler's ctx was not canceled after the caller gave up")
	}
	deadline := time.Now().Add(testTimeout)
	for {
		a.callMu.Lock()
		left := len(a.serving)
		a.callMu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls still served after their handlers returned; want 0", left)
		}
		time.Sleep(time.Millisecond)
	}
}

// A host that speaks only ProtocolID (a release before KindCancel) is sent
// no cancel frame: it would read an unknown kind and reset the stream,
// failing every call and message on it. Its handler runs on.
func TestCallCancelNotSentToOldProtocol(t *testing.T) {
	a, b := pair(t, Config{})
	a.host.RemoveStreamHandler(ProtocolCancel) // before b opens its stream
	// b learns it from a's identify push (a stream b opened taking a for
	// a host of ProtocolCancel would be refused: this test is of a host
	// that never spoke it).
	deadline := time.Now().Add(testTimeout)
	for {
		old, err1 := b.host.Peerstore().SupportsProtocols(a.self, ProtocolID)
		cur, err2 := b.host.Peerstore().SupportsProtocols(a.self, ProtocolCancel)
		if err1 == nil && err2 == nil && len(old) == 1 && len(cur) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b lists %v and %v for a; want %s alone", old, cur, ProtocolID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	started, _ := blockingHandler(a)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, a.ID(), []byte("block"))
		errc <- err
	}()
	var hctx context.Context
	select {
	case hctx = <-started:
	case err := <-errc:
		t.Fatalf("Call = %v before it was canceled", err)
	case <-time.After(testTimeout):
		t.Fatalf("the call's handler did not start: a %+v b %+v", a.Stats(), b.Stats())
	}
	cancel()
	<-errc
	// Frames to a peer arrive in order: a cancel frame would be read
	// before this message.
	if err := b.Send(a.ID(), []byte("after")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); string(f.Data) != "after" {
		t.Fatalf("got %q; want after", f.Data)
	}
	if hctx.Err() != nil {
		t.Fatalf("the handler's ctx ended (%v): a cancel frame went on a %s stream", hctx.Err(), ProtocolID)
	}
	if st := a.Stats(); st.BadFrames != 0 {
		t.Fatalf("BadFrames = %d; want 0", st.BadFrames)
	}
}

// With Config.MaxCalls handlers running (long polls, say), a call is
// answered ErrBusy at once, and the caller's messages, which share its
// stream, still arrive: the reader waited for a free handler, holding up
// every frame behind the call, Raft's included.
func TestCallsBusyDoNotHoldTheStream(t *testing.T) {
	a, b := pair(t, Config{MaxCalls: 2})
	started := make(chan struct{}, 2)
	a.HandleCall(func(ctx context.Context, _ string, req []byte) ([]byte, error) {
		if string(req) == "block" {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return req, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := b.Call(ctx, a.ID(), []byte("block"))
			errc <- err
		}()
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(testTimeout):
			t.Fatal("the blocking calls' handlers did not start")
		}
	}
	busyCtx, busyCancel := context.WithTimeout(t.Context(), testTimeout)
	defer busyCancel()
	if _, err := b.Call(busyCtx, a.ID(), []byte("ping")); err == nil || !strings.Contains(err.Error(), ErrBusy.Error()) {
		t.Fatalf("a call with every handler running = %v; want the remote %v", err, ErrBusy)
	}
	if err := b.Send(a.ID(), []byte("behind")); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, a.Inbound()); string(f.Data) != "behind" {
		t.Fatalf("got %q; want behind", f.Data)
	}
	if n := a.Stats().CallsBusy; n != 1 {
		t.Errorf("CallsBusy = %d; want 1", n)
	}
	cancel()
	for range 2 {
		<-errc
	}
	// The handlers end with their callers' cancel frames; calls are then
	// served again.
	deadline := time.Now().Add(testTimeout)
	for {
		got, err := b.Call(t.Context(), a.ID(), []byte("ping"))
		if err == nil && string(got) == "ping" {
			break
		}
		if err == nil || !strings.Contains(err.Error(), ErrBusy.Error()) || time.Now().After(deadline) {
			t.Fatalf("a call after the handlers ended = %q, %v; want ping", got, err)
		}
		time.Sleep(time.Millisecond)
	}
}
