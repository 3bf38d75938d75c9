package node

import (
	"errors"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A peer's drain is recorded in the partition its id maps to, on every
// replica; while a replica lacks FeaturePeerAudit it is refused, naming
// the peer to upgrade; and only peer actions are taken.
func TestAuditPeer(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	const peer = "n-gone"
	var owner *cnode
	for _, cn := range c.nodes {
		if cn.n.Serving(shard.GroupID(peer)) {
			owner = cn
		}
	}
	if owner == nil {
		t.Fatal("no owner of the peer's partition")
	}
	ask := func(typ shard.EventType) Reply {
		t.Helper()
		req := owner.n.NextRequest()
		owner.n.AuditPeer(req, typ, peer, "token:ops")
		if r, ok := c.reply(owner, req, 100); ok {
			return r
		}
		t.Fatal("no reply")
		return Reply{}
	}
	if r := ask(shard.EvCanceled); r.Err == nil {
		t.Fatal("AuditPeer took a cancel")
	}
	for id, mb := range owner.n.mesh.members {
		if id != owner.id {
			mb.features &^= FeaturePeerAudit
		}
	}
	var ue *UpgradeError
	if r := ask(shard.EvPeerDrained); !errors.As(r.Err, &ue) || ue.Peer == owner.id {
		t.Fatalf("AuditPeer with older replicas = %v; want an UpgradeError naming one", r.Err)
	}
	for _, mb := range owner.n.mesh.members {
		mb.features |= FeaturePeerAudit
	}
	if r := ask(shard.EvPeerDrained); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.run(time.Second)
	replicas := 0
	for _, cn := range c.nodes {
		if p := cn.n.parts[cn.n.PartitionOf(shard.GroupID(peer))]; p != nil {
			a := p.shard.Audit()
			if len(a) != 1 || a[0].Type != shard.EvPeerDrained || a[0].Subject != peer || a[0].By != "token:ops" {
				t.Fatalf("%s's audit = %+v", cn.id, a)
			}
			replicas++
		}
	}
	if replicas != 3 {
		t.Fatalf("%d replicas hold the entry; want 3", replicas)
	}
}
