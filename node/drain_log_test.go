package node_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
)

// levelLog records the level of every record whose message holds one of
// its substrings.
type levelLog struct {
	mu   *sync.Mutex
	seen map[string][]slog.Level
}

func (h levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (h levelLog) Handle(_ context.Context, r slog.Record) error {
	for _, sub := range []string{"peer dead", "peer stopped while draining"} {
		if strings.Contains(r.Message, sub) {
			h.mu.Lock()
			h.seen[sub] = append(h.seen[sub], r.Level)
			h.mu.Unlock()
		}
	}
	return nil
}
func (h levelLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelLog) WithGroup(string) slog.Handler      { return h }

// A peer that drained and stopped (a rolling restart) is a planned stop:
// the others log it at INFO, saying so, not the WARN "peer dead" an
// operator's alerts watch for. A peer that dies without draining is
// still a WARN.
func TestDrainedPeerStopIsNotAWarning(t *testing.T) {
	logs := map[string]levelLog{}
	m := nodetest.NewMeshWith(t, 3, 8, func(p *nodetest.Peer, cfg *node.NodeConfig) {
		l := levelLog{mu: &sync.Mutex{}, seen: map[string][]slog.Level{}}
		logs[p.ID] = l
		cfg.Logger = slog.New(l)
	})
	m.Run(10 * time.Second) // formed
	n3 := m.MustPeer("n3")
	n3.Node.Drain()
	if !m.RunUntil(30*time.Second, func() bool { done, _ := n3.Node.Drained(); return done }) {
		_, what := n3.Node.Drained()
		t.Fatalf("n3 did not drain: %s", what)
	}
	m.Crash("n3", false)
	m.Run(30 * time.Second)
	m.Crash("n2", false) // no drain: a failure
	m.Run(30 * time.Second)
	l := logs["n1"]
	l.mu.Lock()
	defer l.mu.Unlock()
	if got := l.seen["peer stopped while draining"]; len(got) != 1 || got[0] != slog.LevelInfo {
		t.Errorf("n1 logged n3's stop after its drain at %v; want one INFO", got)
	}
	if got := l.seen["peer dead"]; len(got) != 1 || got[0] != slog.LevelWarn {
		t.Errorf("n1 logged %v \"peer dead\"; want one WARN, for n2 alone", got)
	}
}
