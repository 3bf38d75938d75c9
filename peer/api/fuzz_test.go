package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

func FuzzDecodeGroup(f *testing.F) {
	for _, tt := range badGroups {
		f.Add([]byte(tt.body))
	}
	for _, s := range []string{
		`{"mode": "dag", "tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo", "deps": ["a"]}]}`,
		`{"mode": "parallel", "tasks": [{"handler": "echo", "payload": {"x": [1, 2, null]}}, {"name": "t0", "handler": "echo"}]}`,
		`{"mode": "pipeline", "key": "k", "stages": [[{"handler": "echo"}], [{"handler": "sleep", "retry": {"max_attempts": 2}}]]}`,
		`{"tasks": [{"name": "a", "handler": "echo", "deps": ["b"]}, {"name": "b", "handler": "echo", "deps": ["c"]}, {"name": "c", "handler": "echo"}]}`,
		`{"mode": "pipeline", "stages": [{"name": "p", "handler": "echo", "concurrency": 2}, {"name": "q", "handler": "sleep", "timeout": "1s"}], "items": [1, {"a": 2}]}`,
		`{"mode": "staged", "stages": [[{"handler": "echo", "require": ["zone=a"]}], [{"handler": "echo", "pin": "p1"}]]}`,
		`{"mode": "broadcast", "notify": "http://h/x", "tasks": [{"handler": "echo", "require": ["gpu=true"]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := DecodeGroup(bytes.NewReader(body), testLimits())
		// Parsed in one pass or task by task, a body decodes the same.
		slow, slowTo, slowErr := decodeGroupData(body, testLimits().withDefaults(), false)
		fast, fastTo, fastErr := decodeGroupData(body, testLimits().withDefaults(), true)
		if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) || fastTo != slowTo || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("one pass: %+v, %q, %v; task by task: %+v, %q, %v", fast, fastTo, fastErr, slow, slowTo, slowErr)
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("DecodeGroup error %T %v; want a *FieldError", err, err)
			}
			return
		}
		checkSpec(t, spec)
	})
}

// checkSpec checks the invariants of a decoded group: unique names, deps
// that exist, no cycle, payloads that are JSON.
func checkSpec(t *testing.T, spec *shard.GroupSpec) {
	t.Helper()
	if len(spec.Tasks) == 0 || len(spec.Tasks) > testLimits().MaxTasks {
		t.Fatalf("%d tasks", len(spec.Tasks))
	}
	switch spec.Mode {
	case shard.ModeStream:
		checkStream(t, spec)
		return
	case shard.ModeBroadcast:
		if len(spec.Tasks) != 1 {
			t.Fatalf("a broadcast decodes to its one template, got %d tasks", len(spec.Tasks))
		}
		return // expanded over the live peers by the peer (not here)
	}
	index := map[string]int{}
	for i, ts := range spec.Tasks {
		if _, dup := index[ts.Name]; dup || ts.Name == "" {
			t.Fatalf("task %d: name %q empty or duplicate", i, ts.Name)
		}
		index[ts.Name] = i
		if ts.Handler == "" || ts.Timeout < 0 || ts.Delay < 0 || ts.Retry.MaxAttempts < 1 || ts.Retry.MaxBackoff < ts.Retry.Backoff {
			t.Fatalf("task %d: bad fields %+v", i, ts)
		}
		if !validJSON(ts.Payload) {
			t.Fatalf("task %d: payload %q is not JSON", i, ts.Payload)
		}
		if len(ts.Deps) > 0 && spec.Mode != shard.ModeDAG {
			t.Fatalf("task %d: deps in mode %v", i, spec.Mode)
		}
	}
	// Acyclic: a topological order exists (repeatedly drop tasks whose deps
	// are all dropped; a naive reference to findCycle).
	done := map[string]bool{}
	for progress := true; progress; {
		progress = false
		for _, ts := range spec.Tasks {
			if done[ts.Name] {
				continue
			}
			ok := true
			for _, d := range ts.Deps {
				if _, exists := index[d]; !exists {
					t.Fatalf("task %q: unknown dep %q", ts.Name, d)
				}
				ok = ok && done[d]
			}
			if ok {
				done[ts.Name], progress = true, true
			}
		}
	}
	if len(done) != len(spec.Tasks) {
		t.Fatalf("cycle among %d of %d tasks", len(spec.Tasks)-len(done), len(spec.Tasks))
	}
	cp := *spec
	cp.ID = "g"
	if err := cp.Validate(); err != nil {
		t.Fatalf("shard rejects a spec the edge accepted: %v", err)
	}
}

func validJSON(b []byte) bool { return len(b) > 0 && json.Valid(b) }

// checkStream checks a decoded streaming pipeline: item-major layout, the
// item as stage 0's payload and none on later stages, and shard's
// validation.
func checkStream(t *testing.T, spec *shard.GroupSpec) {
	t.Helper()
	ns := len(spec.Stages)
	if ns == 0 || len(spec.Tasks)%ns != 0 {
		t.Fatalf("%d tasks over %d stages", len(spec.Tasks), ns)
	}
	for i, ts := range spec.Tasks {
		if ts.Item != i/ns || ts.Stage != i%ns || ts.Handler == "" || ts.Retry.MaxAttempts < 1 {
			t.Fatalf("task %d: %+v", i, ts)
		}
		if (ts.Stage == 0) != validJSON(ts.Payload) {
			t.Fatalf("task %d (stage %d): payload %q", i, ts.Stage, ts.Payload)
		}
	}
	cp := *spec
	cp.ID = "g"
	if err := cp.Validate(); err != nil {
		t.Fatalf("shard rejects a pipeline the edge accepted: %v", err)
	}
}
