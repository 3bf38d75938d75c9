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

// loneNode starts peer p1 alone over 16 partitions, with its config and
// clock.
func loneNode(t *testing.T) (NodeConfig, *Node, time.Time) {
	t.Helper()
	cfg := DefaultNodeConfig("p1", "1")
	cfg.Partitions = 16
	now := time.Unix(1_700_000_000, 0).UTC()
	n, err := NewNode(cfg, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, n, now
}

// A heartbeat carries the sender's --replicas and --placement; one that
// differs is refused with the kind of difference, and the sender becomes
// no member. A heartbeat of an older release carries neither (Replicas 0)
// and is taken as before. A founder alone in its new mesh is never the
// odd one out; a joiner with an empty disk is, at the first heartbeat it
// hears.
func TestPlacementMismatchRefused(t *testing.T) {
	cfg, n, now := loneNode(t)
	hb := func(replicas int, p ring.Placement) Message {
		return Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: "b", Partitions: 16, Features: Features,
			Members: []string{"a", "b"}, Replicas: replicas, Placement: p}}
	}
	for _, tc := range []struct {
		from      string
		m         Message
		want, not error
	}{
		{"r5", hb(5, ring.PlacementCircle), ErrReplicas, ErrPlacement},
		{"sp", hb(3, ring.PlacementSpread), ErrPlacement, ErrReplicas},
		{"both", hb(2, ring.PlacementSpread), ErrReplicas, nil},
		{"future", hb(3, ring.PlacementSpread+7), ErrPlacement, ErrReplicas},
	} {
		err := n.Step(tc.from, tc.m)
		if !errors.Is(err, tc.want) || tc.not != nil && errors.Is(err, tc.not) || tc.from == "both" && !errors.Is(err, ErrPlacement) {
			t.Errorf("Step(%s) = %v; want %v", tc.from, err, tc.want)
		}
		if slices.ContainsFunc(n.Members(), func(m MemberInfo) bool { return m.ID == tc.from }) {
			t.Errorf("%s became a member", tc.from)
		}
	}
	if err := n.Fatal(); err != nil {
		t.Fatalf("a founder alone in its new mesh stopped: %v", err)
	}
	for _, id := range []string{"old", "same"} {
		m := hb(0, ring.PlacementCircle) // an older release
		if id == "same" {
			m = hb(3, ring.PlacementCircle)
		}
		if err := n.Step(id, m); err != nil {
			t.Errorf("Step(%s) = %v", id, err)
		}
	}

	cfg.ID, cfg.Founder = "j", false
	j, err := NewNode(cfg, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	lone := hb(3, ring.PlacementSpread)
	lone.Heartbeat.Members = []string{"x"}
	if err := j.Step("x", lone); !errors.Is(err, ErrPlacement) {
		t.Fatalf("joiner: Step = %v; want ErrPlacement", err)
	}
	if err := j.Fatal(); !errors.Is(err, ErrPlacement) {
		t.Errorf("a joiner refused by its mesh: Fatal() = %v; want ErrPlacement", err)
	}
}
