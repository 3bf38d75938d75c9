package peer

import (
	"context"
	"net/http"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
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
	res, err := a.c.SubmitTask(t.Context(), &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "thumb", Payload: []byte("1")}, Key: key}) // no worker: READY
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", a.c.BaseURL+"/v1/tasks/"+res.ID+"?wait=2m", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitUntil(t, func() bool { return liveWaiters(t, b.p, res.ID) == 1 })
	cancel()
	<-done
	waitUntil(t, func() bool { return liveWaiters(t, b.p, res.ID) == 0 })
}
