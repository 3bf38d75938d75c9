package node

import (
	"errors"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A group with a concurrency is proposed only when every replica of its
// partition can apply it: an older replica would refuse its encoding.
// The refusal names the peer to upgrade, and no group is created; with
// every replica able, the group runs bounded.
func TestGroupConcurrencyGate(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	spec := shard.GroupSpec{ID: "g-gate", Mode: shard.ModeParallel, Concurrency: 1,
		Tasks: []shard.TaskSpec{{Handler: "h"}, {Handler: "h"}}}
	for _, cn := range c.nodes {
		for id, mb := range cn.n.mesh.members {
			if id != cn.id {
				mb.features &^= FeatureGroupConcurrency
			}
		}
	}
	r := c.submit(spec)
	var ue *UpgradeError
	if !errors.As(r.Err, &ue) || !errors.Is(r.Err, ErrUnavailable) || ue.Peer == "" || ue.What != "a group's concurrency" {
		t.Fatalf("Submit with older replicas = %v; want an UpgradeError naming one", r.Err)
	}
	if st := c.groupState(spec.ID); st != 0 {
		t.Fatalf("the refused group exists: %v", st)
	}
	for _, cn := range c.nodes {
		for _, mb := range cn.n.mesh.members {
			mb.features |= FeatureGroupConcurrency
		}
	}
	if r := c.submit(spec); r.Err != nil {
		t.Fatalf("Submit with every replica able: %v", r.Err)
	}
}
