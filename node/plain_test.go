package node_test

import (
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
)

// TestPlainFirstContact: in a mesh started together, two peers without
// labels or external workers meet by probes alone, no heartbeat between
// them (Probe.Plain); a peer with labels still has them known by every
// other, through the heartbeat its first contacts exchange. The start's
// gossip is lost, as a real start loses what it publishes before pubsub
// has a mesh: without Plain, every first contact carries two heartbeats,
// and the count between plain peers fails. The count starts after the
// greetings (co-replicas' SyncPull heartbeats at start).
func TestPlainFirstContact(t *testing.T) {
	const size, parts = 12, 12
	initial := initialOf(size)
	labeled := "n12"
	m := nodetest.NewMeshWith(t, size, parts, func(p *nodetest.Peer, cfg *node.NodeConfig) {
		startTogether(initial)(p, cfg)
		if p.ID == labeled {
			cfg.Labels = map[string]string{"zone": "b"}
		}
	})
	m.GossipFrom = m.Now.Add(time.Second)
	m.Run(100 * time.Millisecond)  // the greetings go out
	between := map[[2]string]int{} // heartbeats asked for or riding a probe, by link
	m.OnSend = func(s nodetest.Sent) {
		switch {
		case s.Msg.Type == node.MsgProbe && s.Msg.Probe.Beat != nil,
			s.Msg.Type == node.MsgHeartbeat && s.Msg.Heartbeat.Sync != 0:
			between[[2]string{s.From, s.To}]++
		}
	}
	knowsLabels := func() bool {
		for _, p := range m.Peers {
			if p.ID == labeled {
				continue
			}
			i := slices.IndexFunc(p.Node.Members(), func(mi node.MemberInfo) bool { return mi.ID == labeled })
			if i < 0 || !slices.Equal(p.Node.Members()[i].Labels, []string{"zone=b"}) {
				return false
			}
		}
		return true
	}
	// Some peers share no partition with the labeled one: its greetings
	// do not reach them, its labels come by a first contact.
	strangers := 0
	for _, p := range m.Peers {
		shares := false
		for part := range parts {
			_, a := p.Node.Replica(part)
			_, b := m.MustPeer(labeled).Node.Replica(part)
			shares = shares || a && b
		}
		if !shares {
			strangers++
		}
	}
	if strangers == 0 {
		t.Fatalf("every peer shares a partition with %s: the test needs some that do not", labeled)
	}
	if !m.RunUntil(30*time.Second, knowsLabels) {
		t.Fatalf("not every peer knows %s's labels 30 s after the start", labeled)
	}
	m.Run(20 * time.Second) // every pair has met by now (2 probes a second, 11 others)
	withLabeled := 0
	for link, n := range between {
		if link[0] != labeled && link[1] != labeled {
			t.Errorf("%s -> %s: %d heartbeats between two plain peers started together; want none", link[0], link[1], n)
		} else {
			withLabeled += n
		}
	}
	if withLabeled == 0 {
		t.Fatalf("no heartbeat to or from %s, yet its labels are known: the count cannot see them", labeled)
	}
}
