package node_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
)

// countHandler counts the log records whose message contains sub.
type countHandler struct {
	sub string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// A peer that joins becomes the preferred owner of some partitions: each
// leader adds it as a learner, promotes it, and hands it the leadership.
// Handed over in the message that told it the promotion committed, before
// it applied the promotion, the new voter did not campaign (Raft: "is
// unpromotable"), and the leader refused proposals for a second until it
// gave up on the transfer. The leader now waits a heartbeat period after
// a replica change before it transfers.
func TestTransferWaitsForPromotionToApply(t *testing.T) {
	var unpromotable atomic.Int64
	m := nodetest.NewMeshWith(t, 3, 16, func(p *nodetest.Peer, cfg *node.NodeConfig) {
		cfg.Logger = slog.New(countHandler{sub: "unpromotable", n: &unpromotable})
	})
	m.Run(15 * time.Second)
	n4 := m.AddPeer("n4")
	if !m.RunUntil(60*time.Second, func() bool { return len(n4.Node.Leading()) >= 2 }) {
		t.Fatalf("n4 leads %v after 60 s; want the partitions it is the preferred owner of", n4.Node.Leading())
	}
	m.Run(10 * time.Second)
	if k := unpromotable.Load(); k > 0 {
		t.Fatalf("%d transfers reached a voter that had not applied its promotion (n4 leads %v)", k, n4.Node.Leading())
	}
}
