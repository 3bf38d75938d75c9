package node_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/ring"
)

func isMember(p *nodetest.Peer, id string) bool {
	return slices.ContainsFunc(p.Node.Members(), func(m node.MemberInfo) bool { return m.ID == id })
}

// A peer started with another --replicas or --placement than its mesh
// computes other replica sets: the mesh refuses its heartbeats (it never
// becomes a member) and the peer stops (Fatal) naming the mesh's flags,
// whether it joins or restarts with them, the founder too. The mesh's own
// peers keep going.
func TestMeshRefusesOtherPlacement(t *testing.T) {
	m := nodetest.NewMesh(t, 0, 8)
	other := map[string]func(cfg *node.NodeConfig){
		"n3": func(cfg *node.NodeConfig) { cfg.Replicas = 2 },
	}
	m.Configure = func(p *nodetest.Peer, cfg *node.NodeConfig) {
		if f := other[p.ID]; f != nil {
			f(cfg)
		}
	}
	for _, id := range []string{"n1", "n2"} {
		m.AddPeer(id)
	}
	m.Run(5 * time.Second)
	if !isMember(m.MustPeer("n1"), "n2") {
		t.Fatal("n2 did not join n1")
	}
	n3 := m.AddPeer("n3")
	m.Run(5 * time.Second)
	if err := n3.Node.Fatal(); !errors.Is(err, node.ErrReplicas) || errors.Is(err, node.ErrPlacement) ||
		!strings.Contains(err.Error(), "start it with --placement circle --replicas 3") {
		t.Errorf("n3 with --replicas 2: Fatal() = %v; want ErrReplicas naming the mesh's flags", err)
	}
	for _, id := range []string{"n1", "n2"} {
		p := m.MustPeer(id)
		if err := p.Node.Fatal(); err != nil {
			t.Errorf("%s: Fatal() = %v", id, err)
		}
		if isMember(p, "n3") {
			t.Errorf("%s took n3, which places with 2 replicas, as a member", id)
		}
		if !slices.ContainsFunc(p.Stepped, func(s string) bool { return strings.Contains(s, "n3 places with --placement circle --replicas 2") }) {
			t.Errorf("%s: refusals %q name no n3", id, p.Stepped)
		}
	}

	// A member restarted with other flags, then the founder: each stops,
	// and restarted with the mesh's flags is taken back.
	other["n2"] = func(cfg *node.NodeConfig) { cfg.Placement = ring.PlacementSpread }
	other["n1"] = func(cfg *node.NodeConfig) { cfg.Replicas, cfg.Placement = 5, ring.PlacementSpread }
	for _, id := range []string{"n2", "n1"} {
		m.Crash(id, false)
		m.Restart(id)
		m.Run(5 * time.Second)
		if err := m.MustPeer(id).Node.Fatal(); !errors.Is(err, node.ErrPlacement) {
			t.Errorf("%s restarted with another placement: Fatal() = %v; want ErrPlacement", id, err)
		}
		// Its heartbeat refused, its probes must not keep it alive: the
		// peer that stays (the simulated one keeps sending) holds it dead.
		if st, _ := m.MustPeer(otherOf(id)).Node.PeerState(id); st != node.PeerDead {
			t.Errorf("%s restarted with another placement is %v to %s; want dead", id, st, otherOf(id))
		}
		m.Crash(id, false)
		delete(other, id)
		m.Restart(id)
		m.Run(5 * time.Second)
		for _, p := range m.Peers[:2] {
			if err := p.Node.Fatal(); err != nil {
				t.Errorf("%s restarted with the mesh's flags: %s: Fatal() = %v", id, p.ID, err)
			}
		}
		if !isMember(m.MustPeer("n1"), "n2") || !isMember(m.MustPeer("n2"), "n1") {
			t.Errorf("%s restarted with the mesh's flags: n1 and n2 do not take each other back", id)
		}
		if st, _ := m.MustPeer(otherOf(id)).Node.PeerState(id); st != node.PeerAlive {
			t.Errorf("%s restarted with the mesh's flags is %v to %s; want alive", id, st, otherOf(id))
		}
	}
}

// otherOf names the other peer of n1 and n2.
func otherOf(id string) string {
	if id == "n1" {
		return "n2"
	}
	return "n1"
}
