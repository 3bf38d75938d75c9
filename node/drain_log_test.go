package node_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
)

// A peer that drained and stopped (a rolling restart) is a planned stop:
// the others log it at INFO, saying so, not the WARN "peer dead" an
// operator's alerts watch for. A peer that dies without draining is
// still a WARN.
func TestDrainedPeerStopIsNotAWarning(t *testing.T) {
	logs := map[string]recLog{}
	m := nodetest.NewMeshWith(t, 3, 8, func(p *nodetest.Peer, cfg *node.NodeConfig) {
		l := newRecLog("peer dead", "peer stopped while draining")
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
	if got := l.levels("peer stopped while draining"); len(got) != 1 || got[0] != slog.LevelInfo {
		t.Errorf("n1 logged n3's stop after its drain at %v; want one INFO", got)
	}
	if got := l.levels("peer dead"); len(got) != 1 || got[0] != slog.LevelWarn {
		t.Errorf("n1 logged %v \"peer dead\"; want one WARN, for n2 alone", got)
	}
}
