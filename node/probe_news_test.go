package node

import (
	"slices"
	"testing"
	"time"
)

// A join reaches the members even while every one of them is heard all
// the time (Raft between every pair, as while a young mesh forms): probes
// skip members heard lately, but not while there is news to spread, which
// rides on probes alone. Before, the seed of a forming mesh sent no probe
// at all, and two joiners that learned the seed before each other never
// learned each other until the next anti-entropy exchange (30 s).
func TestProbeNewsWhileMembersTalk(t *testing.T) {
	cfg, n, now := loneNode(t)
	hb := func(members ...string) Message {
		return Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: "b", Partitions: 16, Features: Features,
			Members: members, Replicas: cfg.Replicas, Placement: cfg.Placement, Inc: 5}}
	}
	for _, id := range []string{"a", "b"} {
		if err := n.Step(id, hb(id, "p1")); err != nil {
			t.Fatal(err)
		}
	}
	// Run past the news of a's and b's joins, then c joins while a and b
	// talk to p1 every 100 ms.
	talk := func(d time.Duration) (carried map[string]bool) {
		carried = map[string]bool{}
		for end := now.Add(d); now.Before(end); {
			now = now.Add(100 * time.Millisecond)
			n.Tick(now)
			for _, id := range []string{"a", "b"} {
				if err := n.Step(id, Message{Type: MsgAck}); err != nil {
					t.Fatal(err)
				}
			}
			rd := n.Ready()
			for _, e := range rd.Messages {
				if e.Msg.Type != MsgProbe {
					continue
				}
				for _, u := range e.Msg.Probe.Updates {
					if u.ID == "c" && u.State == PeerAlive && slices.Equal(u.Addrs, []string{"/c"}) {
						carried[e.To] = true
					}
				}
			}
			n.Advance(rd)
		}
		return carried
	}
	talk(10 * time.Second)
	join := hb("c")
	join.Heartbeat.Addrs = []string{"/c"}
	if err := n.Step("c", join); err != nil {
		t.Fatal(err)
	}
	if carried := talk(3 * time.Second); !carried["a"] || !carried["b"] {
		t.Errorf("c's join went to %v in 3 s of a and b talking; want both", carried)
	}
}
