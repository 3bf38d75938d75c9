package node

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// toWorkers is a schedule's broadcast template to the workers of handler.
func toWorkers(handler string, require ...string) *shard.GroupSpec {
	return &shard.GroupSpec{ID: "b", Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{
		{Name: shard.WorkersTemplate, Handler: handler, Payload: []byte(`1`), Require: require}}}
}

// copies returns the names and pins of a broadcast's copies.
func copies(spec *shard.GroupSpec) (names, pins []string) {
	for _, ts := range spec.Tasks {
		names, pins = append(names, ts.Name), append(pins, ts.Pin)
	}
	return names, pins
}

// A template to workers expands over the live workers of its handler that
// the node's own demand and the members' heartbeats list: one copy per
// worker, in id order, pinned to the peer it polls (the first in id order
// for a worker polling two), carrying the template's labels; none serving
// or none matching is a field error, as for peers.
func TestExpandBroadcastToWorkers(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	c.node("n2").n.SetDemand([]Demand{{Handler: "split", Workers: []string{"wa"}}, {Handler: "other", Workers: []string{"wz"}}})
	c.node("n3").n.SetDemand([]Demand{{Handler: "split", Labels: map[string]string{"zone": "b"}, Workers: []string{"wc", "wa", "wb", "n3"}}})
	c.run(3 * time.Second)
	n := c.node("n1").n
	for _, tt := range []struct {
		require            []string
		wantNames, wantPin []string
	}{
		{nil, []string{"wa", "wb", "wc"}, []string{"n2", "n3", "n3"}},
		{[]string{"zone=b"}, []string{"wb", "wc"}, []string{"n3", "n3"}},
	} {
		spec := toWorkers("split", tt.require...)
		if err := n.ExpandBroadcast(spec); err != nil {
			t.Fatalf("ExpandBroadcast(%v): %v", tt.require, err)
		}
		if names, pins := copies(spec); !slices.Equal(names, tt.wantNames) || !slices.Equal(pins, tt.wantPin) {
			t.Errorf("ExpandBroadcast(%v) = %v at %v; want %v at %v", tt.require, names, pins, tt.wantNames, tt.wantPin)
		}
		if err := spec.Validate(); err != nil {
			t.Errorf("expanded spec invalid: %v", err)
		}
		for i := range spec.Tasks {
			if w := shard.BroadcastWorker(&spec.Tasks[i]); w != spec.Tasks[i].Name {
				t.Errorf("copy %d goes to worker %q; want %q", i, w, spec.Tasks[i].Name)
			}
		}
	}
	for _, tt := range []struct {
		spec  *shard.GroupSpec
		field string
	}{
		{toWorkers("nobody"), "handler"},
		{toWorkers("split", "zone=c"), "require"},
	} {
		var fe *shard.FieldError
		if err := n.ExpandBroadcast(tt.spec); !errors.As(err, &fe) || fe.Task != 0 || fe.Field != tt.field {
			t.Errorf("ExpandBroadcast(%s %v) = %v; want a field error on tasks[0].%s", tt.spec.Tasks[0].Handler, tt.spec.Tasks[0].Require, err, tt.field)
		}
	}
}

// A schedule whose broadcast goes to workers fires one copy per live
// worker of its handler at each firing, in the owner's view at that
// moment; a firing when no live worker serves it is recorded as skipped.
func TestScheduleBroadcastToWorkers(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	c.node("n2").n.SetDemand([]Demand{{Handler: "split", Workers: []string{"wa"}}})
	c.node("n3").n.SetDemand([]Demand{{Handler: "split", Workers: []string{"wb"}}})
	c.run(time.Second)
	spec := &shard.ScheduleSpec{ID: "split-nightly", Every: time.Second, Overlap: shard.OverlapAllow, Misfire: shard.MisfireOnce,
		Group: *toWorkers("split")}
	spec.Group.ID = ""
	owner := c.setSchedule(spec)
	c.run(2500 * time.Millisecond)
	fired := c.firings(owner, spec.ID)
	if len(fired) < 2 {
		t.Fatalf("firings = %+v; want at least 2 in 2.5 s", fired)
	}
	for _, f := range fired {
		if f.Skipped || f.Group == "" {
			t.Fatalf("firing %+v with workers wa and wb live; want a group", f)
		}
		var names, pins []string
		for i := range 2 {
			v := c.task(shard.TaskIDOf(f.Group, i))
			names, pins = append(names, v.Name), append(pins, v.Pin)
		}
		if !slices.Equal(names, []string{"wa", "wb"}) || !slices.Equal(pins, []string{"n2", "n3"}) {
			t.Errorf("firing %s: copies %v at %v; want wa, wb at n2, n3", f.Group, names, pins)
		}
	}
	// wb leaves: the next firings have wa's copy only; then none is left.
	c.node("n3").n.SetDemand(nil)
	c.run(2 * time.Second)
	last := c.firings(owner, spec.ID)
	if f := last[len(last)-1]; f.Skipped || c.task(shard.TaskIDOf(f.Group, 0)).Name != "wa" || c.hasTask(shard.TaskIDOf(f.Group, 1)) {
		t.Errorf("firing %+v after wb left; want wa's copy only", f)
	}
	c.node("n2").n.SetDemand(nil)
	c.run(2 * time.Second)
	last = c.firings(owner, spec.ID)
	if f := last[len(last)-1]; !f.Skipped || f.Group != "" {
		t.Errorf("firing %+v with no live worker; want it skipped", f)
	}
}

// setSchedule proposes spec on the node serving it and returns that node.
func (c *cluster) setSchedule(spec *shard.ScheduleSpec) *cnode {
	c.tb.Helper()
	for _, cn := range c.nodes {
		if cn.down || !cn.n.Serving(shard.GroupID(spec.ID)) {
			continue
		}
		req := cn.n.NextRequest()
		cn.n.SetSchedule(req, spec, "test")
		if r, ok := c.reply(cn, req, 100); ok {
			if r.Err != nil {
				c.tb.Fatalf("SetSchedule: %v", r.Err)
			}
			return cn
		}
	}
	c.tb.Fatalf("no node took schedule %s", spec.ID)
	return nil
}

// firings returns a schedule's recorded firings on cn.
func (c *cluster) firings(cn *cnode, id shard.ScheduleID) []shard.Firing {
	c.tb.Helper()
	v, err := cn.n.Schedule(id)
	if err != nil {
		c.tb.Fatalf("schedule %s on %s: %v", id, cn.id, err)
	}
	return v.Firings
}

// hasTask reports whether the node serving id's group holds it.
func (c *cluster) hasTask(id shard.TaskID) bool {
	for _, cn := range c.nodes {
		if !cn.down && cn.n.Serving(id.Group()) {
			_, err := cn.n.Task(id)
			return err == nil
		}
	}
	return false
}
