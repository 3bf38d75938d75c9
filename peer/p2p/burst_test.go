package p2p

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/libp2p/go-libp2p/core/peer"
)

// failAfter is a writer that takes n bytes, then fails.
type failAfter struct{ n int }

var errBroken = errors.New("broken stream")

func (w *failAfter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		k := w.n
		w.n = 0
		return k, errBroken
	}
	w.n -= len(b)
	return len(b), nil
}

// A write that fails mid-burst loses every frame of the burst, not only
// the one at hand: replies go out again, calls fail at once.
func TestLostBurst(t *testing.T) {
	h := &Host{cfg: Config{MaxFrame: 1 << 20}, log: slog.New(slog.DiscardHandler), ctx: context.Background(),
		pending: map[uint64]*pendingCall{}}
	const pid = peer.ID("remote")
	w := &writer{peer: pid, queue: make(chan outFrame, 8)}
	call := &pendingCall{peer: pid, done: make(chan callResult, 1)}
	h.pending[7] = call
	// The first reply fits in the 64-byte buffer; the 200-byte call makes
	// bufio write through and the stream fails.
	w.queue <- outFrame{kind: KindCall, id: 7, data: make([]byte, 200)}
	w.queue <- outFrame{kind: KindMessage, data: []byte("m")}
	bw := bufio.NewWriterSize(&failAfter{n: 10}, 64)
	lost, err := h.writeBurst(bw, w.queue, outFrame{kind: KindReply, id: 3, data: []byte("answer")}, true)
	if !errors.Is(err, errBroken) {
		t.Fatalf("writeBurst = %v; want the write error", err)
	}
	if len(lost) != 2 || lost[0].id != 3 || lost[1].id != 7 {
		t.Fatalf("lost = %+v; want the reply 3 and the call 7 (the burst so far)", lost)
	}
	h.lostBurst(w, lost, err)
	select {
	case r := <-call.done:
		if !errors.Is(r.err, errBroken) {
			t.Errorf("call 7 failed with %v; want the write error", r.err)
		}
	default:
		t.Error("call 7 still pending after its frame was lost")
	}
	var requeued []outFrame
	for len(w.queue) > 0 {
		requeued = append(requeued, <-w.queue)
	}
	if len(requeued) != 2 || requeued[0].kind != KindMessage || requeued[1].kind != KindReply || requeued[1].id != 3 {
		t.Errorf("queue after the loss = %+v; want the untouched message, then reply 3 again", requeued)
	}
}

// A reply waits for room in a full queue instead of being dropped, and
// gives up after replyQueueWait.
func TestReplyWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &Host{cfg: Config{MaxFrame: 1 << 20}, log: slog.New(slog.DiscardHandler), ctx: t.Context()}
		w := &writer{peer: peer.ID("remote"), queue: make(chan outFrame, 1)}
		w.queue <- outFrame{kind: KindMessage, data: []byte("m")}
		done := make(chan error, 1)
		go func() { done <- h.enqueueReply(w, outFrame{kind: KindReply, id: 1, data: []byte("r")}) }()
		synctest.Wait() // blocked on the full queue
		select {
		case err := <-done:
			t.Fatalf("enqueueReply returned %v on a full queue; want it to wait", err)
		default:
		}
		<-w.queue // the writer drains one frame
		if err := <-done; err != nil {
			t.Fatalf("enqueueReply = %v; want it queued once there was room", err)
		}
		if f := <-w.queue; f.kind != KindReply || f.id != 1 {
			t.Fatalf("queued %+v; want reply 1", f)
		}
		w.queue <- outFrame{kind: KindMessage}
		if err := h.enqueueReply(w, outFrame{kind: KindReply, id: 2}); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("enqueueReply on a queue full for %v = %v; want ErrQueueFull", replyQueueWait, err)
		}
	})
}
