package node

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/ring"
)

// A peer placing with ring.PlacementSpread refuses a peer of a release
// that cannot (no FeaturePlacementSpread): it would place with the circle
// and disagree on every replica set. A peer that can is taken in, and the
// node's ring is then the spread one.
func TestSpreadPlacementRefusesOlderPeers(t *testing.T) {
	cfg := DefaultNodeConfig("p1", "1")
	cfg.Partitions, cfg.Placement, cfg.Debounce = 16, ring.PlacementSpread, time.Millisecond
	now := time.Unix(1_700_000_000, 0).UTC()
	n, err := NewNode(cfg, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	isMember := func(id string) bool {
		return slices.ContainsFunc(n.Members(), func(m MemberInfo) bool { return m.ID == id })
	}
	old := Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: "b", Partitions: 16, Features: Features &^ FeaturePlacementSpread}}
	if err := n.Step("old", old); !errors.Is(err, ErrPlacement) {
		t.Fatalf("Step(heartbeat without FeaturePlacementSpread) = %v; want ErrPlacement", err)
	}
	if isMember("old") {
		t.Fatal("a peer that cannot place with spread became a member")
	}
	cur := Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: "b", Partitions: 16, Features: Features}}
	if err := n.Step("new", cur); err != nil {
		t.Fatalf("Step(heartbeat with FeaturePlacementSpread) = %v", err)
	}
	if !isMember("new") {
		t.Fatal("a peer that can place with spread was refused")
	}
	n.Tick(now.Add(10 * time.Millisecond))
	if r := n.mesh.ring; r == nil || r.Config().Placement != ring.PlacementSpread {
		t.Fatalf("ring = %v; want one placed with spread", r)
	}

	cfg.Placement = ring.PlacementSpread + 1
	if _, err := NewNode(cfg, nil, now); !errors.Is(err, ring.ErrPlacement) {
		t.Fatalf("NewNode(unknown placement) = %v; want ring.ErrPlacement", err)
	}
}
