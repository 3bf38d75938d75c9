package node

import (
	"testing"
	"time"
)

// A quiesced leader that learns its voters restarted stops counting them
// for its read lease until they answer it again: a restarted voter lost
// its quiesced promise and votes again a lease window after its boot,
// which the leader learns of only later. Waking on the news used to
// count every live voter as answered at that moment, which stretched the
// lease past the moment the restarted voters could elect another leader.
func TestQuiescedLeaderForgetsRebootedVoters(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(40 * time.Second)
	part, lead := -1, (*cnode)(nil)
	for p := range parts {
		for _, cn := range c.nodes {
			if cn.n.Quiesced(p) && cn.n.parts[p].leader {
				part, lead = p, cn
			}
		}
	}
	if lead == nil {
		t.Fatal("no partition quiesced in 40 idle seconds")
	}
	if !lead.n.leaseHeld(lead.n.parts[part]) {
		t.Fatalf("%s leads quiesced partition %d without its lease", lead.id, part)
	}
	// Both followers restart; only their own loops run for a second, so
	// the leader hears their heartbeats (new boots) and nothing else.
	var others []*cnode
	for _, cn := range c.nodes {
		if cn != lead {
			c.start(cn, parts)
			others = append(others, cn)
		}
	}
	for range 100 {
		c.now = c.now.Add(10 * time.Millisecond)
		for _, cn := range others {
			cn.n.Tick(c.now)
			c.drain(cn)
		}
	}
	inbox := lead.inbox
	lead.inbox = nil
	lead.n.Tick(c.now)
	for _, e := range inbox {
		if e.Msg.Type == MsgHeartbeat {
			_ = lead.n.Step(e.Msg.From, e.Msg)
		}
	}
	c.drain(lead)
	p := lead.n.parts[part]
	for _, cn := range others {
		if mb := lead.n.mesh.members[cn.id]; mb == nil || mb.boot != "2" {
			t.Fatalf("%s did not learn that %s restarted", lead.id, cn.id)
		}
	}
	if lead.n.leaseHeld(p) {
		t.Fatalf("%s holds the read lease of partition %d on the word of two voters that restarted since (acked %v, quiesced %v)",
			lead.id, part, p.acked, p.quiesced)
	}
	// Their answers bring it back.
	c.run(5 * time.Second)
	if p := lead.n.parts[part]; p == nil || !lead.n.leaseHeld(p) {
		t.Fatalf("%s did not hold the read lease of partition %d again 5 s later", lead.id, part)
	}
}
