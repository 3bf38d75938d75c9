package peer

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node/nodetest"
)

// TestLoopDrivesThroughNodeDriver runs two real peers (Badger, libp2p on
// loopback) with their node.Drivers traced: the loop hands each Ready to
// the shared driver (the one the simulator uses), which sends the leaders'
// early Raft messages before their WAL write and the responses after it.
func TestLoopDrivesThroughNodeDriver(t *testing.T) {
	c := nodetest.NewContract()
	first := startTracedPeer(t, c, "a", nil)
	startTracedPeer(t, c, "b", []string{first.tr.Addrs()[0]})
	waitFor(t, "a leader's early Raft messages before its persist", 30*time.Second, func() bool {
		_, early := c.Counts()
		return early > 0 || c.Err() != nil
	})
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
}

// startTracedPeer starts a real peer whose driver reports to c as name.
func startTracedPeer(t *testing.T, c *nodetest.Contract, name string, join []string) *Peer {
	t.Helper()
	p, err := New(Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Slots: 2, Partitions: 4,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Join: join,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p.driver.Trace = c.For(name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return p
}
