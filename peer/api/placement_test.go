package api

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

func TestDecodePlacement(t *testing.T) {
	spec := mustDecodeGroup(t, `{"mode": "parallel", "tasks": [
		{"handler": "echo", "require": ["zone=a", "gpu=true", "zone=a"]},
		{"handler": "echo", "pin": "12D3KooWabc"},
		{"handler": "echo"}]}`)
	if got, want := spec.Tasks[0].Require, []string{"gpu=true", "zone=a"}; !slices.Equal(got, want) {
		t.Errorf("require = %v; want %v (sorted, deduplicated)", got, want)
	}
	if spec.Tasks[1].Pin != "12D3KooWabc" || spec.Tasks[2].Constrained() {
		t.Errorf("tasks = %+v", spec.Tasks)
	}
	one, err := DecodeTask(strings.NewReader(`{"handler": "echo", "require": ["gpu=true"], "pin": "p1"}`), testLimits())
	if err != nil || !slices.Equal(one.Tasks[0].Require, []string{"gpu=true"}) || one.Tasks[0].Pin != "p1" {
		t.Errorf("DecodeTask = %+v, %v", one, err)
	}
	b := mustDecodeGroup(t, `{"mode": "broadcast", "tasks": [{"handler": "echo", "payload": 1, "require": ["zone=b"]}]}`)
	if b.Mode != shard.ModeBroadcast || len(b.Tasks) != 1 || b.Tasks[0].Pin != "" || !slices.Equal(b.Tasks[0].Require, []string{"zone=b"}) {
		t.Errorf("broadcast = %+v", b)
	}
}

func TestDecodePlacementErrors(t *testing.T) {
	for _, tt := range []struct{ name, body, field, msg string }{
		{"not key=value", `{"mode": "parallel", "tasks": [{"handler": "echo"}, {"handler": "echo", "require": ["gpu=true", "gpu"]}]}`, "tasks[1].require[1]", "not key=value"},
		{"empty value", `{"mode": "parallel", "tasks": [{"handler": "echo", "require": ["zone="]}]}`, "tasks[0].require[0]", "must not be empty"},
		{"two values", `{"mode": "parallel", "tasks": [{"handler": "echo", "require": ["zone=a", "zone=b"]}]}`, "tasks[0].require[1]", "no peer can match"},
		{"require not a list", `{"mode": "parallel", "tasks": [{"handler": "echo", "require": "gpu=true"}]}`, "tasks[0].require", "want an array"},
		{"bad pin", `{"mode": "parallel", "tasks": [{"handler": "echo", "pin": "a b"}]}`, "tasks[0].pin", "not a peer id"},
		{"stage require", `{"mode": "staged", "stages": [[{"handler": "echo"}], [{"handler": "echo", "require": ["x"]}]]}`, "stages[1][0].require[0]", "not key=value"},
		{"broadcast of two", `{"mode": "broadcast", "tasks": [{"handler": "echo"}, {"handler": "echo"}]}`, "tasks", "one task template"},
		{"broadcast pinned", `{"mode": "broadcast", "tasks": [{"handler": "echo", "pin": "p"}]}`, "tasks[0].pin", "not allowed in a broadcast"},
		{"broadcast named", `{"mode": "broadcast", "tasks": [{"name": "x", "handler": "echo"}]}`, "tasks[0].name", "named by its peer id"},
		{"broadcast bad require", `{"mode": "broadcast", "tasks": [{"handler": "echo", "require": ["gpu"]}]}`, "tasks[0].require[0]", "not key=value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := DecodeGroup(strings.NewReader(tt.body), testLimits())
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Message, tt.msg) {
				t.Errorf("DecodeGroup = %+v, %v; want field %q, message containing %q", spec, err, tt.field, tt.msg)
			}
		})
	}
	_, err := DecodeTask(strings.NewReader(`{"handler": "echo", "require": ["=x"]}`), testLimits())
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "require[0]" {
		t.Errorf("DecodeTask(require =x) = %v; want a field error on require[0]", err)
	}
}

func TestCorePathBroadcast(t *testing.T) {
	spec := &shard.GroupSpec{Mode: shard.ModeBroadcast, Tasks: []shard.TaskSpec{{Pin: "a"}, {Pin: "b"}}}
	if got := CorePath(spec, &shard.FieldError{Task: 1, Field: "require"}); got != "tasks[0].require" {
		t.Errorf("CorePath = %q; want tasks[0].require (the one template)", got)
	}
}

// A pin that no peer id could be (Limits.ValidPeer, the node's check of
// a member's id) is a 400 naming it wherever a task is made: a task, a
// group's task, a pipeline's, a schedule's template, its replacement.
func TestDecodePinNotPeer(t *testing.T) {
	lim := testLimits()
	lim.ValidPeer = func(id string) bool { return strings.HasPrefix(id, "12D3KooW") }
	const good = `{"handler": "echo", "pin": "12D3KooWgood"}`
	forEachPinPlace(t, lim, good, `{"handler": "echo", "pin": "web-3"}`, `"web-3" is not a peer id`)
	if _, err := DecodeGroup(strings.NewReader(`{"mode": "parallel", "tasks": [`+good+`]}`), lim); err != nil {
		t.Errorf("a peer id pin: %v", err)
	}
}

// forEachPinPlace decodes the task bad in every place a pin enters (good
// stands for the others) and wants a field error naming it that says msg.
func forEachPinPlace(t *testing.T, lim Limits, good, bad, msg string) {
	t.Helper()
	for _, tt := range []struct {
		name, field string
		decode      func() error
	}{
		{"task", "pin", func() error { _, err := DecodeTask(strings.NewReader(bad), lim); return err }},
		{"group", "tasks[3].pin", func() error {
			_, err := DecodeGroup(strings.NewReader(`{"mode": "parallel", "tasks": [`+good+`,`+good+`,`+good+`,`+bad+`]}`), lim)
			return err
		}},
		{"dag", "tasks[0].pin", func() error {
			_, err := DecodeGroup(strings.NewReader(`{"mode": "dag", "tasks": [{"name": "a", `+bad[1:]+`]}`), lim)
			return err
		}},
		{"pipeline", "stages[1][0].pin", func() error {
			_, err := DecodeGroup(strings.NewReader(`{"mode": "staged", "stages": [[`+good+`], [`+bad+`]]}`), lim)
			return err
		}},
		{"schedule", "group.tasks[0].pin", func() error {
			_, _, err := DecodeSchedule(strings.NewReader(`{"name": "s", "every": "1m", "group": {"mode": "parallel", "tasks": [`+bad+`]}}`), lim)
			return err
		}},
		{"schedule change", "group.tasks[0].pin", func() error {
			cur, _, err := DecodeSchedule(strings.NewReader(`{"name": "s", "every": "1m", "group": {"mode": "parallel", "tasks": [`+good+`]}}`), lim)
			if err != nil {
				return err
			}
			u, err := DecodeScheduleUpdate(strings.NewReader(`{"group": {"mode": "parallel", "tasks": [`+bad+`]}}`), lim)
			if err != nil {
				return err
			}
			_, err = u.Merge(cur, lim)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var fe *FieldError
			if err := tt.decode(); !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Message, msg) {
				t.Errorf("decode = %v; want a field error on %s saying %s", err, tt.field, msg)
			}
		})
	}
}

// A pin to a peer forgotten for good (Limits.Forgotten, the node's set) is
// a 400 naming it wherever a task is made, where it was accepted and then
// failed by the owner (or waited, where no owner had learnt of the
// forget); a well-formed id that is not a member yet stays accepted.
func TestDecodePinForgotten(t *testing.T) {
	lim := testLimits()
	var asked [][]string
	lim.Forgotten = func(ids []string) []string {
		asked = append(asked, ids)
		return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id != "12D3KooWgone" })
	}
	const good = `{"handler": "echo", "pin": "12D3KooWlater"}`
	forEachPinPlace(t, lim, good, `{"handler": "echo", "pin": "12D3KooWgone"}`, `peer "12D3KooWgone" was forgotten`)
	asked = nil
	if _, err := DecodeGroup(strings.NewReader(`{"mode": "parallel", "tasks": [`+good+`,`+good+`, {"handler": "echo"}]}`), lim); err != nil {
		t.Errorf("a pin to a peer not yet a member: %v", err)
	}
	if len(asked) != 1 || !slices.Equal(asked[0], []string{"12D3KooWlater"}) {
		t.Errorf("Forgotten asked %q; want one call with the distinct pins", asked)
	}
}
