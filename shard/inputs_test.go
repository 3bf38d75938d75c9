package shard

import (
	"reflect"
	"testing"
)

// succeed reports a successful outcome with result for task id.
func (o *owner) succeed(id TaskID, holder, result string) {
	o.tb.Helper()
	v, err := o.s.Task(id)
	if err != nil {
		o.tb.Fatal(err)
	}
	ev, err := o.s.Report(o.now, Outcome{Task: id, Round: v.Round, Holder: holder, OK: true, Result: []byte(result)})
	if err != nil {
		o.tb.Fatalf("Report(%s): %v", id, err)
	}
	o.commit(ev)
}

func inputsOf(m map[string][]byte) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func TestInputsDAG(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{
		echo("a"), echo("b"), echo("sum", "a", "b"), echo("other", "b"),
	}})
	if got := o.s.Inputs("g.0"); got != nil {
		t.Errorf("Inputs(a) = %v; want nil (no deps)", got)
	}
	if got := inputsOf(o.s.Inputs("g.2")); !reflect.DeepEqual(got, map[string]string{}) {
		t.Errorf("Inputs(sum) before deps ran = %v; want empty", got)
	}
	for _, id := range o.lease(10, "w") {
		o.succeed(id, "w", map[TaskID]string{"g.0": `1`, "g.1": `{"n":2}`}[id])
	}
	want := map[string]string{"a": `1`, "b": `{"n":2}`}
	if got := inputsOf(o.s.Inputs("g.2")); !reflect.DeepEqual(got, want) {
		t.Errorf("Inputs(sum) = %v; want %v", got, want)
	}
	if got := inputsOf(o.s.Inputs("g.3")); !reflect.DeepEqual(got, map[string]string{"b": `{"n":2}`}) {
		t.Errorf("Inputs(other) = %v; want only b", got)
	}
	// The leased task sees the same inputs, and so does a restored replica.
	ids := o.lease(10, "w")
	if len(ids) != 2 {
		t.Fatalf("leased %v; want sum and other", ids)
	}
	replica, _ := New(DefaultConfig())
	if err := replica.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got := inputsOf(replica.Inputs("g.2")); !reflect.DeepEqual(got, want) {
		t.Errorf("restored Inputs(sum) = %v; want %v", got, want)
	}
	if got := o.s.Inputs("nope.0"); got != nil {
		t.Errorf("Inputs(unknown) = %v; want nil", got)
	}
}

func TestInputsPipeline(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "p", Mode: ModePipeline, Tasks: []TaskSpec{
		{Name: "x", Handler: "echo", Stage: 0}, {Handler: "echo", Stage: 0},
		{Name: "y", Handler: "echo", Stage: 1}, {Name: "z", Handler: "echo", Stage: 2},
	}})
	for _, id := range o.lease(10, "w") {
		o.succeed(id, "w", `"`+string(id)+`"`)
	}
	// Stage 1 gets every task of stage 0, the unnamed one by its id.
	want := map[string]string{"x": `"p.0"`, "p.1": `"p.1"`}
	if got := inputsOf(o.s.Inputs("p.2")); !reflect.DeepEqual(got, want) {
		t.Errorf("Inputs(y) = %v; want %v", got, want)
	}
	if ids := o.lease(10, "w"); len(ids) != 1 || ids[0] != "p.2" {
		t.Fatalf("stage 1 leased %v", ids)
	}
	o.succeed("p.2", "w", `42`)
	// Stage 2 gets only the previous stage, not stage 0.
	if got := inputsOf(o.s.Inputs("p.3")); !reflect.DeepEqual(got, map[string]string{"y": `42`}) {
		t.Errorf("Inputs(z) = %v; want only y", got)
	}
	if got := o.s.Inputs("p.0"); got != nil {
		t.Errorf("Inputs(first stage) = %v; want nil", got)
	}
}
