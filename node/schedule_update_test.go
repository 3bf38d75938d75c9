package node

import (
	"errors"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// updateSchedule proposes new settings on cn and returns its reply.
func (c *cluster) updateSchedule(cn *cnode, spec *shard.ScheduleSpec, base uint64) Reply {
	c.tb.Helper()
	req := cn.n.NextRequest()
	cn.n.UpdateSchedule(req, spec, base, "token:ops")
	if r, ok := c.reply(cn, req, 200); ok {
		return r
	}
	c.tb.Fatal("no reply to UpdateSchedule")
	return Reply{}
}

// An update replicates: after the owner dies, the new owner holds the new
// settings, the firings and the revision, and fires by them.
func TestScheduleUpdateSurvivesLeaderChange(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	spec := &shard.ScheduleSpec{ID: "s-upd", Every: time.Second, Overlap: shard.OverlapAllow, Misfire: shard.MisfireOnce,
		Group: shard.GroupSpec{Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "old"}}}}
	owner := c.setSchedule(spec)
	c.run(2500 * time.Millisecond)
	before, _ := owner.n.Schedule(spec.ID)
	if len(before.Firings) < 2 {
		t.Fatalf("firings before the update = %+v", before.Firings)
	}
	upd := before.Spec
	upd.Every, upd.Name = 2*time.Second, "renamed"
	upd.Group.Tasks = []shard.TaskSpec{{Handler: "new"}}
	if r := c.updateSchedule(owner, &upd, shard.ScheduleRevision(&before.Spec)); r.Err != nil {
		t.Fatalf("UpdateSchedule: %v", r.Err)
	}
	// A second update from the old revision is refused.
	stale := upd
	stale.Name = "stale"
	if r := c.updateSchedule(owner, &stale, shard.ScheduleRevision(&before.Spec)); !errors.Is(r.Err, shard.ErrRevision) {
		t.Fatalf("stale UpdateSchedule = %v; want ErrRevision", r.Err)
	}
	c.run(time.Second) // replicated to the followers
	owner.down = true
	var next *cnode
	ok := false
	for range 100 {
		c.run(500 * time.Millisecond)
		for _, cn := range c.nodes {
			if !cn.down && cn.n.Serving(shard.GroupID(spec.ID)) {
				next, ok = cn, true
			}
		}
		if ok {
			break
		}
	}
	if !ok {
		t.Fatal("no new owner")
	}
	v, err := next.n.Schedule(spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Spec.Name != "renamed" || v.Spec.Every != 2*time.Second || v.Spec.Group.Tasks[0].Handler != "new" {
		t.Fatalf("new owner %s holds %+v", next.id, v.Spec)
	}
	if len(v.Firings) < len(before.Firings) {
		t.Fatalf("firings lost: %d, had %d", len(v.Firings), len(before.Firings))
	}
	c.run(5 * time.Second)
	v, _ = next.n.Schedule(spec.ID)
	last := v.Firings[len(v.Firings)-1]
	if last.Group == "" || c.task(shard.TaskIDOf(last.Group, 0)).Handler != "new" {
		t.Fatalf("the new owner's firing %+v does not run the new template", last)
	}
}

// A leader proposes an update only when every replica of the partition
// can apply it: a replica of an older needle refuses it, with the peer
// to upgrade named.
func TestScheduleUpdateGate(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	spec := &shard.ScheduleSpec{ID: "s-gate", Every: time.Minute, Overlap: shard.OverlapAllow, Misfire: shard.MisfireOnce,
		Group: shard.GroupSpec{Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "h"}}}}
	owner := c.setSchedule(spec)
	for id, mb := range owner.n.mesh.members {
		if id != owner.id {
			mb.features &^= FeatureScheduleUpdate
		}
	}
	upd := *spec
	upd.Every = time.Hour
	req := owner.n.NextRequest()
	owner.n.UpdateSchedule(req, &upd, 0, "x")
	c.step(10 * time.Millisecond)
	r := owner.replies[req]
	var ue *UpgradeError
	if !errors.As(r.Err, &ue) || !errors.Is(r.Err, ErrUnavailable) || ue.Peer == "" || ue.Peer == owner.id {
		t.Fatalf("UpdateSchedule with an older replica = %v; want an UpgradeError naming it", r.Err)
	}
	if v, _ := owner.n.Schedule(spec.ID); v.Spec.Every != time.Minute {
		t.Fatalf("the refused update applied: %+v", v.Spec)
	}
}
