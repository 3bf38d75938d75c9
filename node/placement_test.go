package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// newLabeledCluster starts a cluster whose i-th node carries labels[i].
func newLabeledCluster(tb testing.TB, partitions int, labels ...map[string]string) *cluster {
	c := &cluster{tb: tb, now: time.Unix(1_700_000_000, 0).UTC(), runs: map[string][]Run{}, notify: map[string][]NotifyJob{}, cuts: map[[2]string]bool{}}
	for i, l := range labels {
		cn := &cnode{id: fmt.Sprintf("n%d", i+1), log: wal.NewMemory(), founder: i == 0, labels: l}
		c.nodes = append(c.nodes, cn)
		c.start(cn, partitions)
	}
	return c
}

// ranOn records on which nodes each task started.
func (c *cluster) ranOn() map[shard.TaskID][]string {
	ran := map[shard.TaskID][]string{}
	c.check = func() {
		for _, cn := range c.nodes {
			for _, r := range c.runs[cn.id] {
				ran[r.Task] = append(ran[r.Task], cn.id)
			}
		}
	}
	return ran
}

// task reads a task from the node serving its group.
func (c *cluster) task(id shard.TaskID) shard.TaskView {
	c.tb.Helper()
	for _, cn := range c.nodes {
		if !cn.down && cn.n.Serving(id.Group()) {
			v, err := cn.n.Task(id)
			if err != nil {
				c.tb.Fatalf("task %s on %s: %v", id, cn.id, err)
			}
			return v
		}
	}
	c.tb.Fatalf("no node serves %s", id)
	return shard.TaskView{}
}

func placed(name, pin string, require ...string) shard.TaskSpec {
	return shard.TaskSpec{Name: name, Handler: "echo", Payload: []byte(`1`), Pin: pin, Require: require}
}

// TestPlacementRunsOnMatchingPeers: tasks that require a label or are
// pinned run only on matching peers, wherever their group's owner is and
// whatever it can run itself; plain tasks still run anywhere.
func TestPlacementRunsOnMatchingPeers(t *testing.T) {
	c := newLabeledCluster(t, 8, map[string]string{"zone": "a"}, map[string]string{"gpu": "true", "zone": "a"}, map[string]string{"zone": "b"})
	c.run(15 * time.Second)
	ran := c.ranOn()
	var groups []shard.GroupID
	for i := range 8 {
		g := shard.GroupID(fmt.Sprint("g", i))
		tasks := []shard.TaskSpec{placed("plain", ""), placed("pin3", "n3"), placed("pin1", "n1")}
		for j := range 6 {
			tasks = append(tasks, placed(fmt.Sprint("gpu", j), "", "gpu=true"), placed(fmt.Sprint("zoneb", j), "", "zone=b"))
		}
		if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: tasks}); r.Err != nil {
			t.Fatalf("submit %s: %v", g, r.Err)
		}
		groups = append(groups, g)
	}
	c.run(20 * time.Second)
	want := map[string]string{"pin3": "n3", "pin1": "n1", "gpu": "n2", "zoneb": "n3"}
	for _, g := range groups {
		if st := c.groupState(g); st != shard.GroupSucceeded {
			t.Fatalf("%s = %v; want SUCCEEDED", g, st)
		}
		for i := range 15 {
			id := shard.TaskIDOf(g, i)
			v := c.task(id)
			kind := v.Name
			if !strings.HasPrefix(kind, "pin") {
				kind = strings.TrimRight(kind, "0123456789")
			}
			if kind == "plain" {
				continue
			}
			for _, on := range ran[id] {
				if on != want[kind] {
					t.Errorf("%s (%s) ran on %v; want only %s", id, v.Name, ran[id], want[kind])
				}
			}
			if got := shard.HolderPeer(v.Holder); got != want[kind] {
				t.Errorf("%s (%s) accepted from %s; want %s", id, v.Name, got, want[kind])
			}
		}
	}
}

func TestPlacementWaitingSaysWhy(t *testing.T) {
	c := newLabeledCluster(t, 4, nil, map[string]string{"gpu": "true"}, nil)
	c.run(15 * time.Second)
	g := shard.GroupID("gw")
	r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{
		placed("ghost", "nX"), placed("tpu", "", "tpu=true"), placed("gpu", "", "gpu=true"), placed("pin2", "n2", "tpu=true"),
	}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	c.node("n2").down = true // dies before it takes the gpu task
	c.run(12 * time.Second)
	for i, want := range []string{
		"pinned to peer nX, which is not a member of the mesh (yet: the task runs once it joins)",
		"no live peer has labels tpu=true",
		"no live peer has labels gpu=true",
		"pinned to peer n2, which is not alive",
	} {
		v := c.task(shard.TaskIDOf(g, i))
		if v.State != shard.Ready || v.Waiting != want {
			t.Errorf("%s (%s): %v waiting %q; want READY waiting %q", v.ID, v.Name, v.State, v.Waiting, want)
		}
	}
	c.start(c.node("n2"), 4)
	c.run(10 * time.Second)
	if v := c.task(shard.TaskIDOf(g, 2)); v.State != shard.Succeeded || shard.HolderPeer(v.Holder) != "n2" {
		t.Errorf("gpu task after n2 came back: %v on %s; want SUCCEEDED on n2", v.State, v.Holder)
	}
	if v := c.task(shard.TaskIDOf(g, 3)); v.Waiting != "pinned to peer n2, which lacks labels tpu=true" {
		t.Errorf("pin2 waiting %q", v.Waiting)
	}
}

func TestExpandBroadcast(t *testing.T) {
	c := newLabeledCluster(t, 4, map[string]string{"zone": "a"}, map[string]string{"zone": "b"}, map[string]string{"zone": "b"})
	c.run(15 * time.Second)
	n := c.node("n1").n
	for _, tt := range []struct {
		require []string
		want    []string
	}{
		{nil, []string{"n1", "n2", "n3"}},
		{[]string{"zone=b"}, []string{"n2", "n3"}},
	} {
		spec := &shard.GroupSpec{ID: "b", Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{placed("", "", tt.require...)}}
		if err := n.ExpandBroadcast(spec); err != nil {
			t.Fatalf("ExpandBroadcast(%v): %v", tt.require, err)
		}
		var got []string
		for _, ts := range spec.Tasks {
			if ts.Name != ts.Pin {
				t.Errorf("copy named %q pinned to %q", ts.Name, ts.Pin)
			}
			got = append(got, ts.Pin)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ExpandBroadcast(%v) pins %v; want %v", tt.require, got, tt.want)
		}
		if err := spec.Validate(); err != nil {
			t.Errorf("expanded spec invalid: %v", err)
		}
	}
	spec := &shard.GroupSpec{ID: "b", Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{placed("", "", "zone=c")}}
	var fe *shard.FieldError
	if err := n.ExpandBroadcast(spec); !errors.As(err, &fe) || fe.Task != 0 || fe.Field != "require" {
		t.Errorf("ExpandBroadcast(zone=c) = %v; want a field error on tasks[0].require", err)
	}
	// Each copy runs once, on its peer.
	ran := c.ranOn()
	spec = &shard.GroupSpec{ID: "bc", Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{placed("", "")}}
	if r := c.submit(*spec); r.Err != nil || len(r.Submit.Tasks) != 3 {
		t.Fatalf("submit broadcast: %+v", r)
	}
	c.run(10 * time.Second)
	for i, peer := range []string{"n1", "n2", "n3"} {
		id := shard.TaskIDOf("bc", i)
		if v := c.task(id); v.State != shard.Succeeded || v.Name != peer || !slices.Equal(ran[id], []string{peer}) {
			t.Errorf("%s: %v named %q ran on %v; want SUCCEEDED once on %s", id, v.State, v.Name, ran[id], peer)
		}
	}
}

// TestPinnedToForgottenPeerFails: a task pinned to a peer that is only
// down waits for it; once the peer is forgotten (needle forget, or
// --forget-after of silence) the owner fails it with the reason, and its
// group finishes instead of staying RUNNING forever.
func TestPinnedToForgottenPeerFails(t *testing.T) {
	c := newLabeledCluster(t, 4, nil, nil, nil, nil)
	c.run(15 * time.Second)
	c.node("n4").down = true
	g := shard.GroupID("gf")
	r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{
		placed("on-n4", "n4"), placed("on-n2", "n2"), placed("anywhere", ""),
	}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	c.run(10 * time.Second)
	if v := c.task(shard.TaskIDOf(g, 0)); v.State != shard.Ready {
		t.Fatalf("pinned to a peer that is down: %v; want READY (it may come back)", v.State)
	}
	c.node("n1").n.Forget("n4") // one peer forgets; gossip tells the rest
	c.run(10 * time.Second)
	v := c.task(shard.TaskIDOf(g, 0))
	if v.State != shard.Failed || v.Attempt != 0 || !strings.Contains(v.Error, "pinned to peer n4, which left the mesh") {
		t.Fatalf("pinned to a forgotten peer: %v attempt %d error %q; want FAILED, 0 attempts, the reason", v.State, v.Attempt, v.Error)
	}
	for i := 1; i <= 2; i++ {
		if v := c.task(shard.TaskIDOf(g, i)); v.State != shard.Succeeded {
			t.Errorf("%s: %v; want SUCCEEDED", v.Name, v.State)
		}
	}
	if st := c.groupState(g); st != shard.GroupFailed {
		t.Errorf("group = %v; want FAILED (finished)", st)
	}
}
