package node

import (
	"slices"
	"testing"
	"time"
)

// TestStartTogetherMemberIDs: the member ids a peer started together
// keeps sorted (memberIDs, from which heartbeats' lists and digests come)
// are sorted and match its members whatever the order of the list, and
// stay so as a member is added after.
func TestStartTogetherMemberIDs(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).UTC()
	for _, order := range [][]string{{"a", "b", "c", "d", "e"}, {"e", "d", "c", "b", "a"}, {"c", "a", "e", "b", "d"}} {
		cfg := DefaultNodeConfig("c", "1")
		cfg.Partitions, cfg.Founder = 16, false
		for _, id := range order {
			cfg.Initial = append(cfg.Initial, PeerAddrs{ID: id, Addrs: []string{"/mem/" + id}})
		}
		n, err := NewNode(cfg, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		check := func(want ...string) {
			t.Helper()
			m := &n.mesh
			ids := slices.Clone(m.memberIDs())
			if !slices.Equal(ids, want) {
				t.Fatalf("list %v: member ids %v; want %v", order, ids, want)
			}
			for i, id := range ids {
				if m.mbs[i] != m.members[id] {
					t.Fatalf("list %v: member record %d is not %s's", order, i, id)
				}
			}
		}
		check("a", "b", "c", "d", "e")
		hb := Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: "b", Partitions: 16, Replicas: cfg.Replicas, Placement: cfg.Placement, Features: Features}}
		if err := n.Step("bb", hb); err != nil {
			t.Fatal(err)
		}
		check("a", "b", "bb", "c", "d", "e")
	}
}
