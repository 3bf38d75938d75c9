package node

import (
	"testing"
	"time"
)

// TestStartTogetherNotAfterLeaving: a peer named in the initial
// membership that holds no partition because it left them all (its
// record of left partitions says so) does not found them again from the
// list still in its config: it starts as a joiner, holding nothing.
func TestStartTogetherNotAfterLeaving(t *testing.T) {
	initial := []PeerAddrs{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	cfg := DefaultNodeConfig("a", "2")
	cfg.Partitions, cfg.Founder, cfg.Initial = 8, false, initial
	fresh, err := NewNode(cfg, nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !fresh.together || len(fresh.Held()) == 0 {
		t.Fatalf("a named peer with nothing stored: together %v, holds %v; want it to bootstrap", fresh.together, fresh.Held())
	}
	cfg.Left = encodeLeft(map[int]tombstone{3: {term: 4, lastTerm: 4, lastIndex: 90}})
	n, err := NewNode(cfg, nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if n.together || len(n.Held()) != 0 || !n.joining {
		t.Fatalf("a named peer that left its partitions: together %v, holds %v, joining %v; want a joiner holding nothing", n.together, n.Held(), n.joining)
	}
}
