package api

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// testLimits are small limits with a fixed set of handlers.
func testLimits() Limits {
	return Limits{
		MaxBody:    4096,
		MaxTasks:   5,
		MaxPayload: 64,
		HasHandler: func(name string) bool { return name == "echo" || name == "sleep" || name == "fail" },
	}
}

func mustDecodeGroup(tb testing.TB, body string) *shard.GroupSpec {
	tb.Helper()
	spec, err := DecodeGroup(strings.NewReader(body), testLimits())
	if err != nil {
		tb.Fatalf("DecodeGroup(%s) = %v", body, err)
	}
	return spec
}

func TestDecodeGroupDAG(t *testing.T) {
	spec := mustDecodeGroup(t, `{"mode": "dag", "key": "k1", "tasks": [
		{"name": "fetch", "handler": "echo", "payload": { "a" : [1, 2] }},
		{"name": "sum", "handler": "echo", "payload": 2, "deps": ["fetch"], "priority": 7,
		 "timeout": "30s", "delay": "5s", "retry": {"max_attempts": 3, "backoff": "250ms", "max_backoff": "10s"}},
		{"name": "none", "handler": "sleep"}]}`)
	if spec.Mode != shard.ModeDAG || spec.Key != "k1" || spec.ID != "" || len(spec.Tasks) != 3 {
		t.Fatalf("spec = %+v", spec)
	}
	fetch, sum, none := spec.Tasks[0], spec.Tasks[1], spec.Tasks[2]
	if got, want := string(fetch.Payload), `{"a":[1,2]}`; got != want {
		t.Errorf("payload = %s; want %s", got, want)
	}
	if got, want := string(none.Payload), "null"; got != want {
		t.Errorf("absent payload = %s; want %s", got, want)
	}
	wantRetry := shard.Retry{MaxAttempts: 3, Backoff: 250 * time.Millisecond, MaxBackoff: 10 * time.Second}
	if sum.Retry != wantRetry || sum.Timeout != 30*time.Second || sum.Delay != 5*time.Second || sum.Priority != 7 {
		t.Errorf("sum = %+v", sum)
	}
	if len(sum.Deps) != 1 || sum.Deps[0] != "fetch" {
		t.Errorf("sum.Deps = %v; want [fetch]", sum.Deps)
	}
	if got, want := none.Retry, (shard.Retry{MaxAttempts: 1, Backoff: time.Second, MaxBackoff: 2 * time.Minute}); got != want {
		t.Errorf("default retry = %+v; want %+v", got, want)
	}
}

func TestDecodeGroupPipelineAndParallel(t *testing.T) {
	spec := mustDecodeGroup(t, `{"mode": "pipeline", "stages": [[{"handler": "echo"}, {"handler": "echo", "name": "x"}], [{"handler": "echo"}]]}`)
	var got []string
	for _, ts := range spec.Tasks {
		got = append(got, ts.Name+"@"+string(rune('0'+ts.Stage)))
		if ts.Deps != nil {
			t.Errorf("pipeline task %s has deps %v", ts.Name, ts.Deps)
		}
	}
	if want := "s0-0@0 x@0 s1-0@1"; strings.Join(got, " ") != want {
		t.Errorf("pipeline tasks = %v; want %s", got, want)
	}
	spec = mustDecodeGroup(t, `{"mode": "parallel", "tasks": [{"handler": "echo"}, {"handler": "echo", "payload": null}]}`)
	if spec.Mode != shard.ModeParallel || spec.Tasks[0].Name != "t0" || spec.Tasks[1].Name != "t1" || string(spec.Tasks[1].Payload) != "null" {
		t.Errorf("parallel spec = %+v", spec)
	}
	spec = mustDecodeGroup(t, `{"stages": [[{"handler": "echo"}]]}`)
	if spec.Mode != shard.ModePipeline {
		t.Errorf("mode without mode field but with stages = %v; want pipeline", spec.Mode)
	}
	spec = mustDecodeGroup(t, `{"tasks": [{"name": "a", "handler": "echo", "retry": {"backoff": "5m"}}]}`)
	if r := spec.Tasks[0].Retry; spec.Mode != shard.ModeDAG || r.MaxBackoff != 5*time.Minute {
		t.Errorf("mode %v retry %+v; want dag, max_backoff 5m", spec.Mode, r)
	}
}

func TestDecodeTask(t *testing.T) {
	spec, err := DecodeTask(strings.NewReader(`{"handler": "echo", "payload": {"any": "json"}, "key": "k", "timeout": "1m"}`), testLimits())
	if err != nil {
		t.Fatal(err)
	}
	if spec.Mode != shard.ModeSingle || spec.Key != "k" || len(spec.Tasks) != 1 || spec.Tasks[0].Name != "" || spec.Tasks[0].Timeout != time.Minute {
		t.Errorf("spec = %+v", spec)
	}
	for body, field := range map[string]string{
		`{"handler": "echo", "name": "x"}`:       "name",
		`{"handler": "echo", "deps": []}`:        "deps",
		`{"handler": "nope"}`:                    "handler",
		`{"handler": "echo", "timeout": "-1s"}`:  "timeout",
		`{"handler": "echo", "timeout": "1ns"}`:  "timeout",
		`{"handler": "echo", "timeout": "9ms"}`:  "timeout",
		`{"handler": "echo", "retry": {"x": 1}}`: "retry.x",
		`{}`:                                     "handler",
		`null`:                                   "handler",
	} {
		_, err := DecodeTask(strings.NewReader(body), testLimits())
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("DecodeTask(%s) = %v; want a field error naming %q", body, err, field)
		}
	}
}

// badGroups are invalid group bodies and the field each error must name.
var badGroups = []struct {
	name, body, field, msg string
	tooLarge               bool
}{
	{"unknown field", `{"mode": "dag", "tasks": [{"name": "a", "handler": "echo"}], "extra": 1}`, "extra", "unknown field", false},
	{"unknown task field", `{"tasks": [{"name": "a", "handler": "echo", "retries": 3}]}`, "tasks[0].retries", "unknown field", false},
	{"unknown retry field", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"attempts": 3}}]}`, "tasks[0].retry.attempts", "unknown field", false},
	{"cycle", `{"tasks": [{"name": "a", "handler": "echo", "deps": ["c"]}, {"name": "b", "handler": "echo", "deps": ["a"]}, {"name": "c", "handler": "echo", "deps": ["b"]}]}`, "tasks[0].deps", "cycle", false},
	{"cycle behind a chain", `{"tasks": [{"name": "x", "handler": "echo", "deps": ["b"]}, {"name": "a", "handler": "echo", "deps": ["b"]}, {"name": "b", "handler": "echo", "deps": ["a"]}]}`, "tasks[2].deps", `"b" -> "a" -> "b"`, false},
	{"self dep", `{"tasks": [{"name": "a", "handler": "echo", "deps": ["a"]}]}`, "tasks[0].deps", "itself", false},
	{"unknown dep", `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo"}, {"name": "d", "handler": "echo"}, {"name": "e", "handler": "echo", "deps": ["a", "c"]}]}`, "tasks[3].deps", `unknown task "c"`, false},
	{"duplicate dep", `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo", "deps": ["a", "a"]}]}`, "tasks[1].deps", "duplicate dep", false},
	{"duplicate name", `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "a", "handler": "echo"}]}`, "tasks[1].name", "duplicate name", false},
	{"concurrency over int32", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "concurrency": 2147483648}], "items": [1]}`, "stages[0].concurrency", "maximum", false},
	{"delay overflows", `{"tasks": [{"name": "a", "handler": "echo", "delay": "2562047h"}]}`, "tasks[0].delay", "maximum", false},
	{"timeout over a year", `{"tasks": [{"name": "a", "handler": "echo", "timeout": "9000h"}]}`, "tasks[0].timeout", "maximum", false},
	{"backoff over a day", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"backoff": "25h"}}]}`, "tasks[0].retry.backoff", "maximum", false},
	{"max_backoff over a day", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"max_backoff": "2562047h"}}]}`, "tasks[0].retry.max_backoff", "maximum", false},
	{"duplicate name across stages", `{"mode": "pipeline", "stages": [[{"name": "a", "handler": "echo"}], [{"handler": "echo"}, {"name": "a", "handler": "echo"}]]}`, "stages[1][1].name", "stages[0][0]", false},
	{"missing name in dag", `{"mode": "dag", "tasks": [{"handler": "echo"}]}`, "tasks[0].name", "required", false},
	{"bad duration", `{"tasks": [{"name": "a", "handler": "echo", "timeout": "soon"}]}`, "tasks[0].timeout", "invalid duration", false},
	{"negative timeout", `{"tasks": [{"name": "a", "handler": "echo", "timeout": "-5s"}]}`, "tasks[0].timeout", "negative", false},
	{"timeout under the timers' resolution", `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo"}, {"name": "c", "handler": "echo"}, {"name": "d", "handler": "echo", "timeout": "1ns"}]}`, "tasks[3].timeout", "under the minimum of 10ms", false},
	{"timeout under the minimum in stage", `{"mode": "pipeline", "stages": [[{"handler": "echo"}], [{"handler": "echo", "timeout": "999us"}]]}`, "stages[1][0].timeout", "under the minimum", false},
	{"stream timeout under the minimum", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "timeout": "5ms"}], "items": [1]}`, "stages[0].timeout", "under the minimum", false},
	{"negative delay in stage", `{"mode": "pipeline", "stages": [[{"handler": "echo"}], [{"handler": "echo", "delay": "-1ms"}]]}`, "stages[1][0].delay", "negative", false},
	{"bad backoff", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"backoff": "1 s"}}]}`, "tasks[0].retry.backoff", "invalid duration", false},
	{"max_backoff below backoff", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"backoff": "10s", "max_backoff": "1s"}}]}`, "tasks[0].retry.max_backoff", "below", false},
	{"zero attempts", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"max_attempts": 0}}]}`, "tasks[0].retry.max_attempts", "out of range", false},
	{"unknown handler", `{"tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "rm -rf"}]}`, "tasks[1].handler", "unknown handler", false},
	{"missing handler", `{"tasks": [{"name": "a"}]}`, "tasks[0].handler", "required", false},
	{"too many tasks", `{"mode": "parallel", "tasks": [{"handler": "echo"}, {"handler": "echo"}, {"handler": "echo"}, {"handler": "echo"}, {"handler": "echo"}, {"handler": "echo"}]}`, "tasks", "limit", false},
	{"too many tasks in stages", `{"mode": "pipeline", "stages": [[{"handler": "echo"}, {"handler": "echo"}, {"handler": "echo"}], [{"handler": "echo"}, {"handler": "echo"}, {"handler": "echo"}]]}`, "stages", "limit", false},
	{"no tasks", `{"mode": "dag", "tasks": []}`, "tasks", "at least one", false},
	{"no stages", `{"mode": "pipeline", "stages": []}`, "stages", "at least one", false},
	{"empty stage", `{"mode": "pipeline", "stages": [[{"handler": "echo"}], []]}`, "stages[1]", "empty stage", false},
	{"tasks in pipeline", `{"mode": "pipeline", "tasks": [{"handler": "echo"}]}`, "tasks", "not allowed", false},
	{"stages in dag", `{"mode": "dag", "stages": [[{"handler": "echo"}]]}`, "stages", "only allowed", false},
	{"deps in parallel", `{"mode": "parallel", "tasks": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo", "deps": ["a"]}]}`, "tasks[1].deps", "not allowed in parallel", false},
	{"deps in pipeline", `{"mode": "pipeline", "stages": [[{"name": "a", "handler": "echo"}], [{"handler": "echo", "deps": ["a"]}]]}`, "stages[1][0].deps", "not allowed in staged", false},
	{"stream without items", `{"mode": "pipeline", "stages": [{"name": "parse", "handler": "echo"}]}`, "items", "at least one item", false},
	{"stream without stages", `{"mode": "pipeline", "stages": [], "items": [1]}`, "stages", "at least one", false},
	{"stream stage without name", `{"mode": "pipeline", "stages": [{"handler": "echo"}], "items": [1]}`, "stages[0].name", "required", false},
	{"stream duplicate stage", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo"}, {"name": "a", "handler": "echo"}], "items": [1]}`, "stages[1].name", `duplicate stage name "a" (also stages[0])`, false}, // not the core's "a/0" and tasks[0] (audit s77, F2)
	// A task field a stage does not take says why, not "unknown field"
	// (a stage is a task template whose payloads are the items).
	{"stream stage payload", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "payload": 1}], "items": [1]}`, "stages[0].payload", "the items are the payloads", false},
	{"stream stage deps", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo", "deps": ["a"]}], "items": [1]}`, "stages[1].deps", "the previous stage's result", false},
	{"stream stage pin", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "pin": "x"}], "items": [1]}`, "stages[0].pin", "name, handler, priority, timeout, retry, concurrency", false},
	{"stream stage unknown", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "color": 1}], "items": [1]}`, "stages[0].color", "unknown field", false},
	{"stream negative concurrency", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "concurrency": -1}], "items": [1]}`, "stages[0].concurrency", ">= 0", false},
	{"stream bad timeout", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "timeout": "x"}], "items": [1]}`, "stages[0].timeout", "invalid duration", false},
	{"stream too many", `{"mode": "pipeline", "stages": [{"name": "a", "handler": "echo"}, {"name": "b", "handler": "echo"}], "items": [1, 2, 3]}`, "items", "limit", false},
	{"items in dag", `{"mode": "dag", "tasks": [{"name": "a", "handler": "echo"}], "items": [1]}`, "items", "only allowed in pipeline", false},
	{"items in staged", `{"mode": "staged", "stages": [[{"handler": "echo"}]], "items": [1]}`, "items", "only for a pipeline of stage objects", false},
	{"bad mode", `{"mode": "mapreduce", "tasks": [{"name": "a", "handler": "echo"}]}`, "mode", "unknown mode", false},
	{"single mode", `{"mode": "single", "tasks": [{"name": "a", "handler": "echo"}]}`, "mode", "unknown mode", false},
	{"mode is a number", `{"mode": 1, "tasks": []}`, "mode", "want a string", false},
	{"tasks is an object", `{"tasks": {"a": {}}}`, "tasks", "want an array", false},
	{"task is a string", `{"tasks": ["a"]}`, "tasks[0]", "want an object", false},
	{"priority is a string", `{"tasks": [{"name": "a", "handler": "echo", "priority": "high"}]}`, "tasks[0].priority", "want an integer", false},
	{"priority overflows int32", `{"tasks": [{"name": "a", "handler": "echo", "priority": 3000000000}]}`, "tasks[0].priority", "want an integer", false},
	{"deps is a string", `{"tasks": [{"name": "a", "handler": "echo", "deps": "b"}]}`, "tasks[0].deps", "want an array", false},
	{"max_attempts is a float", `{"tasks": [{"name": "a", "handler": "echo", "retry": {"max_attempts": 1.5}}]}`, "tasks[0].retry.max_attempts", "want an integer", false},
	{"body is an array", `[]`, "", "want an object", false},
	{"malformed JSON", `{"tasks": [`, "", "malformed JSON", false},
	{"empty body", ``, "", "empty body", false},
	{"trailing data", `{"tasks": [{"name": "a", "handler": "echo"}]} {}`, "", "unexpected data", false},
	{"key too long", `{"key": "` + strings.Repeat("k", 600) + `", "tasks": [{"name": "a", "handler": "echo"}]}`, "key", "longer", false},
	{"payload too large", `{"tasks": [{"name": "a", "handler": "echo", "payload": "` + strings.Repeat("p", 100) + `"}]}`, "tasks[0].payload", "exceed", true},
	{"body too large", `{"tasks": [{"name": "a", "handler": "echo"}], "key": "` + strings.Repeat("b", 5000) + `"}`, "", "request body exceeds", true},
}

func TestDecodeGroupErrors(t *testing.T) {
	for _, tt := range badGroups {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := DecodeGroup(strings.NewReader(tt.body), testLimits())
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("DecodeGroup = %+v, %v; want a *FieldError", spec, err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Message, tt.msg) {
				t.Errorf("DecodeGroup = %q (field %q); want field %q, message containing %q", err, fe.Field, tt.field, tt.msg)
			}
			if got := errors.Is(err, ErrPayloadTooLarge); got != tt.tooLarge {
				t.Errorf("errors.Is(%v, ErrPayloadTooLarge) = %v; want %v", err, got, tt.tooLarge)
			}
		})
	}
}

func TestCorePath(t *testing.T) {
	pipe := &shard.GroupSpec{Mode: shard.ModePipeline, Tasks: []shard.TaskSpec{{Stage: 0}, {Stage: 1}, {Stage: 1}, {Stage: 2}}}
	dag := &shard.GroupSpec{Mode: shard.ModeDAG, Tasks: make([]shard.TaskSpec, 4)}
	single := &shard.GroupSpec{Mode: shard.ModeSingle, Tasks: make([]shard.TaskSpec, 1)}
	tests := []struct {
		spec *shard.GroupSpec
		fe   shard.FieldError
		want string
	}{
		{pipe, shard.FieldError{Task: 2, Field: "timeout"}, "stages[1][1].timeout"},
		{pipe, shard.FieldError{Task: 3, Field: "name"}, "stages[2][0].name"},
		{dag, shard.FieldError{Task: 3, Field: "deps"}, "tasks[3].deps"},
		{dag, shard.FieldError{Task: -1, Field: "mode"}, "mode"},
		{single, shard.FieldError{Task: 0, Field: "handler"}, "handler"},
	}
	for _, tt := range tests {
		if got := CorePath(tt.spec, &tt.fe); got != tt.want {
			t.Errorf("CorePath(%v, %+v) = %q; want %q", tt.spec.Mode, tt.fe, got, tt.want)
		}
	}
}

func TestDecodeGroupStream(t *testing.T) {
	spec := mustDecodeGroup(t, `{"mode": "pipeline", "stages": [
		{"name": "parse", "handler": "echo", "concurrency": 4, "timeout": "5s"},
		{"name": "load", "handler": "sleep", "retry": {"max_attempts": 2}}],
		"items": [{"n": 1}, 2]}`)
	if spec.Mode != shard.ModeStream || len(spec.Tasks) != 4 {
		t.Fatalf("spec = %+v", spec)
	}
	if want := []shard.StageSpec{{Name: "parse", Concurrency: 4}, {Name: "load"}}; len(spec.Stages) != 2 || spec.Stages[0] != want[0] || spec.Stages[1] != want[1] {
		t.Errorf("stages = %+v; want %+v", spec.Stages, want)
	}
	for i, ts := range spec.Tasks {
		if ts.Item != i/2 || ts.Stage != i%2 {
			t.Errorf("task %d is item %d stage %d", i, ts.Item, ts.Stage)
		}
	}
	if got := string(spec.Tasks[0].Payload); got != `{"n":1}` || spec.Tasks[1].Payload != nil || string(spec.Tasks[2].Payload) != "2" {
		t.Errorf("payloads %q %q %q: stage 0 carries the item, later stages the previous result", spec.Tasks[0].Payload, spec.Tasks[1].Payload, spec.Tasks[2].Payload)
	}
	if spec.Tasks[0].Name != "parse/0" || spec.Tasks[3].Name != "load/1" {
		t.Errorf("names %q, %q; want <stage>/<item>", spec.Tasks[0].Name, spec.Tasks[3].Name)
	}
	if spec.Tasks[0].Timeout != 5*time.Second || spec.Tasks[1].Handler != "sleep" || spec.Tasks[3].Retry.MaxAttempts != 2 {
		t.Errorf("stage templates not applied: %+v", spec.Tasks)
	}
	spec = mustDecodeGroup(t, `{"mode": "staged", "stages": [[{"handler": "echo"}], [{"handler": "echo"}]]}`)
	if spec.Mode != shard.ModePipeline || len(spec.Tasks) != 2 {
		t.Errorf("staged spec = %+v", spec)
	}
}

// TestReadBodySized: a body read by the length its request announced is
// the body whatever the length says (right, short, long, absent), and one
// over the limit is refused as one read without it.
func TestReadBodySized(t *testing.T) {
	body := []byte(strings.Repeat("0123456789", 300)) // 3,000 bytes
	for _, announced := range []int64{-1, 0, 1, 100, 2999, 3000, 3001, 1 << 30} {
		got, err := readBody(sizedBody{bytes.NewReader(body), announced}, 10000)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("announced %d: read %d bytes, %v; want the %d of the body", announced, len(got), err, len(body))
		}
		_, err = readBody(sizedBody{bytes.NewReader(body), announced}, 2999)
		if !errors.Is(err, ErrPayloadTooLarge) {
			t.Fatalf("announced %d, limit 2999: %v; want ErrPayloadTooLarge", announced, err)
		}
	}
}
