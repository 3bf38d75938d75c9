package peer

import (
	"net/http"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
)

// A drain waits for the tasks external workers run through the peer: their
// outcomes come back through its hub, and a peer that stopped before them
// made each such task run again elsewhere.
func TestDrainWaitsForExternalWorkers(t *testing.T) {
	p, c := startPeerWith(t, Config{DrainTimeout: 30 * time.Second})
	id, lease := leaseOne(t, c, "w1", "resize")
	if status, data := wcall(t, c, "POST", "/v1/drain", ""); status != http.StatusAccepted {
		t.Fatalf("POST /v1/drain = %d %s; want 202", status, data)
	}
	waitUntil(t, func() bool {
		select {
		case <-p.drained:
			t.Fatalf("drained while worker w1 still runs %s", id)
		default:
		}
		var draining bool
		_ = p.read(t.Context(), func(n *node.Node) error { draining = n.Draining(); return nil })
		return draining
	})
	var done bool
	var what string
	if err := p.read(t.Context(), func(n *node.Node) error { done, what = n.Drained(); return nil }); err != nil {
		t.Fatal(err)
	}
	if done || what != "external workers running tasks" {
		t.Fatalf("draining while worker w1 runs %s: Drained() = %v, %q; want it waiting for the worker", id, done, what)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/complete", `{"result": "resized"}`); status != http.StatusOK {
		t.Fatalf("complete during the drain = %d %s; want 200", status, data)
	}
	select {
	case <-p.drained:
	case <-time.After(30 * time.Second):
		t.Fatal("the peer did not finish draining once the worker reported")
	}
}
