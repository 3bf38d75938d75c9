package node

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

func TestGrantInputsRoundTrip(t *testing.T) {
	m := Message{Type: MsgGrant, From: "victim", Load: Load{Ready: 3, Running: 1, Slots: 4}, Grants: []Grant{
		{Task: "g.0", Round: 2, Expiry: time.Unix(1_700_000_000, 5).UTC(), Handler: "echo", Payload: []byte(`1`), Timeout: time.Second},
		{Task: "g.2", Round: 1, Expiry: time.Unix(1_700_000_001, 0).UTC(), Handler: "sum", Payload: []byte(`{"k":2}`), Timeout: time.Minute,
			Inputs: map[string]json.RawMessage{"b": json.RawMessage(`[1,2]`), "a": json.RawMessage(`"x"`), "c": json.RawMessage(`null`)}},
	}}
	b, err := AppendMessage(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMessage(b)
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	// The encoding is deterministic (inputs sorted by name).
	for range 10 {
		again, _ := AppendMessage(nil, &m)
		if string(again) != string(b) {
			t.Fatal("encoding of the same grant differs")
		}
	}
	// Every strict prefix is refused, never a panic, but the ones without
	// the traces, without the attempts and traces, or without the (empty)
	// holder, the attempts and traces: grants from older peers.
	noInfos := len(b) - len(grantInfos(m.Grants))
	noTasks := noInfos - len(grantTasks(m.Grants))
	noMarks := noTasks - len(grantDeaths(m.Grants))
	noWorkers := noMarks - len(grantWorkers(m.Grants))
	noRequires := noWorkers - len(grantRequires(m.Grants))
	noShards := noRequires - len(grantShards(m.Grants))
	noTraces := noShards - len(grantTraces(m.Grants))
	old := noTraces - len(grantAttempts(m.Grants))
	for i := range old - 1 {
		if _, err := DecodeMessage(b[:i]); err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded", i, len(b))
		}
	}
	for i := old + 1; i < len(b); i++ {
		if _, err := DecodeMessage(b[:i]); err == nil && i != noTraces && i != noShards && i != noRequires && i != noWorkers && i != noMarks && i != noTasks && i != noInfos {
			t.Fatalf("prefix of %d/%d bytes decoded", i, len(b))
		}
	}
	for _, cut := range []int{old - 1, old, noTraces, noShards, noRequires, noWorkers, noMarks, noTasks, noInfos} {
		if got, err := DecodeMessage(b[:cut]); err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("the grant cut to %d/%d bytes = %+v, %v; want it as sent", cut, len(b), got, err)
		}
	}
}

func TestGrantDuplicateInputRefused(t *testing.T) {
	m := Message{Type: MsgGrant, From: "v", Grants: []Grant{{Task: "g.0", Round: 1, Handler: "h", Timeout: 1,
		Inputs: map[string]json.RawMessage{"a": json.RawMessage(`1`)}}}}
	b, _ := AppendMessage(nil, &m)
	b = b[:len(b)-len(grantAttempts(m.Grants))-len(grantTraces(m.Grants))-len(grantShards(m.Grants))-len(grantRequires(m.Grants))-len(grantWorkers(m.Grants))-len(grantDeaths(m.Grants))-len(grantTasks(m.Grants))-len(grantInfos(m.Grants))] // as an older peer sends it
	// The grant ends with: count 1, "a", `1`, then the empty holder.
	// Rewrite to count 2 with "a" twice.
	tail := []byte{1, 1, 'a', 1, '1', 0}
	if string(b[len(b)-len(tail):]) != string(tail) {
		t.Fatalf("unexpected encoding tail %q", b[len(b)-len(tail):])
	}
	b = append(b[:len(b)-len(tail)], 2, 1, 'a', 1, '1', 1, 'a', 1, '2', 0)
	if _, err := DecodeMessage(b); err == nil {
		t.Fatal("a grant with a duplicate input name decoded")
	}
}

// Stolen tasks get their inputs through the grant (and replicas that start
// a stolen lease from the committed entry get the same).
func TestMeshStolenTasksGetInputs(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(15 * time.Second)
	var bad []string
	seen, foreign := 0, 0
	var owner string
	c.check = func() {
		for id, runs := range c.runs {
			for _, r := range runs {
				_, i, _ := r.Task.Split()
				if i == 0 {
					if r.Inputs != nil {
						bad = append(bad, fmt.Sprintf("%s on %s: root got inputs %v", r.Task, id, r.Inputs))
					}
					continue
				}
				seen++
				if id != owner {
					foreign++
				}
				if len(r.Inputs) != 1 || string(r.Inputs["root"]) != `"root"` {
					bad = append(bad, fmt.Sprintf("%s on %s: inputs %v", r.Task, id, r.Inputs))
				}
			}
		}
	}
	tasks := []shard.TaskSpec{{Name: "root", Handler: "echo", Payload: []byte(`"root"`)}}
	for i := range 60 {
		tasks = append(tasks, shard.TaskSpec{Name: fmt.Sprint("k", i), Handler: "echo", Payload: []byte(fmt.Sprint(i)), Deps: []string{"root"}})
	}
	g := groupIn(t, c.nodes[0].n, 0)
	for _, cn := range c.nodes {
		if cn.n.Serving(g) {
			owner = cn.id
		}
	}
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeDAG, Tasks: tasks}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for range 500 {
		c.step(10 * time.Millisecond)
		if c.groupState(g) == shard.GroupSucceeded {
			break
		}
	}
	if st := c.groupState(g); st != shard.GroupSucceeded {
		t.Fatalf("group state = %v; want SUCCEEDED", st)
	}
	for _, b := range bad {
		t.Error(b)
	}
	granted := 0
	for _, cn := range c.nodes {
		granted += cn.n.stats.StealsGranted
	}
	t.Logf("owner %s; %d dependent runs, %d on other peers, %d started from grants", owner, seen, foreign, granted)
	if granted == 0 {
		t.Error("no task was started from a grant: the test did not exercise stealing")
	}
}
