package peer

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestForwardedWaitEndsWithItsClient: a GET ?wait= through a peer that does
// not own the task is a call the owner answers once the task ends or the
// wait passes. When its client goes away, the owner's wait ends too (the
// caller's cancel reaches the owner's handler): a wait left parked there
// held one of the owner's call handlers (MaxCalls; with all busy, the
// calling peer's stream, its Raft traffic included, stalls) for up to the
// 5 minutes of --max-wait.
func TestForwardedWaitEndsWithItsClient(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	a := startMeshPeerWith(t, Config{DataDir: t.TempDir()})
	b := startMeshPeerWith(t, Config{DataDir: t.TempDir(), Join: []string{a.p.tr.Addrs()[0]}})
	waitLeading(t, a, b)
	key := keyOwnedBy(t, a, b, "gone")
	id := submitTaskRetrying(t, a.c, `{"handler": "thumb", "payload": 1, "key": "`+key+`"}`) // no worker: READY
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { // the client's wait, asked again while a moment's 503 answers it
		defer close(done)
		for ctx.Err() == nil {
			req, err := http.NewRequestWithContext(ctx, "GET", a.c.BaseURL+"/v1/tasks/"+id+"?wait=2m", nil)
			if err != nil {
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // canceled
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return
			}
			time.Sleep(50 * time.Millisecond) // a client's pause before it asks again
		}
	}()
	waitUntil(t, func() bool { return liveWaiters(t, b.p, id) == 1 })
	cancel()
	<-done
	waitUntil(t, func() bool { return liveWaiters(t, b.p, id) == 0 })
}
