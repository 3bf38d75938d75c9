package api

import (
	"errors"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

func TestExpandToWorkers(t *testing.T) {
	ws := []WorkerInfo{
		{ID: "w3", Peer: "p1", Handlers: []string{"split"}, Labels: []string{"zone=a"}},
		{ID: "w1", Peer: "p2", Handlers: []string{"split", "other"}, Labels: []string{"zone=a"}},
		{ID: "w1", Peer: "p1", Handlers: []string{"split"}, Labels: []string{"zone=a"}}, // polls two peers
		{ID: "w2", Peer: "p2", Handlers: []string{"other"}},
		{ID: "w4", Peer: "p2", Handlers: []string{"split"}, Labels: []string{"zone=b"}},
		{ID: "p2", Peer: "p2", Handlers: []string{"split"}, Labels: []string{"zone=a"}}, // named as its peer
	}
	tmpl := func(require ...string) *shard.GroupSpec {
		return &shard.GroupSpec{Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{{Handler: "split", Require: require}}}
	}
	spec := tmpl("zone=a")
	if err := ExpandToWorkers(spec, ws, 100); err != nil {
		t.Fatal(err)
	}
	var got [][2]string
	for _, ts := range spec.Tasks {
		got = append(got, [2]string{ts.Name, ts.Pin})
		if w := shard.BroadcastWorker(&ts); w != ts.Name {
			t.Errorf("copy %s reads as worker %q", ts.Name, w)
		}
	}
	if want := [][2]string{{"w1", "p1"}, {"w3", "p1"}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("copies %v; want %v", got, want)
	}
	if err := validateCore(spec); err != nil {
		t.Fatalf("expanded spec: %v", err)
	}
	for _, tt := range []struct {
		spec  *shard.GroupSpec
		max   int
		field string
	}{
		{tmpl(), 1, "to"},
		{tmpl("zone=z"), 100, "tasks[0].require"},
		{&shard.GroupSpec{Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{{Handler: "nobody"}}}, 100, "tasks[0].handler"},
		{&shard.GroupSpec{Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Handler: "split"}}}, 100, "to"},
	} {
		err := ExpandToWorkers(tt.spec, ws, tt.max)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("ExpandToWorkers(%+v, max %d) = %v; want a field error naming %s", tt.spec.Tasks, tt.max, err, tt.field)
		}
	}
}
