package shard

import (
	"errors"
	"testing"
)

func TestCheckRepeat(t *testing.T) {
	o := newOwner(t)
	first := GroupSpec{ID: "k1", Mode: ModeParallel, Key: "key", Trace: "aa",
		Tasks: []TaskSpec{{Name: "t0", Handler: "echo", Payload: []byte(`1`)}}}
	o.submit(first)
	bcast := GroupSpec{ID: "k2", Mode: ModeBroadcast, Key: "b", Tasks: []TaskSpec{
		{Name: "p1", Pin: "p1", Handler: "echo", Require: []string{"zone=a"}},
		{Name: "p2", Pin: "p2", Handler: "echo", Require: []string{"zone=a"}}}}
	o.submit(bcast)

	same := first
	same.Trace = "bb" // a new request's trace
	otherPayload := first
	otherPayload.Tasks = []TaskSpec{{Name: "t0", Handler: "echo", Payload: []byte(`2`)}}
	moreTasks := first
	moreTasks.Tasks = append([]TaskSpec{}, first.Tasks[0], TaskSpec{Name: "t1", Handler: "echo"})
	otherPeers := bcast
	otherPeers.Tasks = []TaskSpec{{Name: "p3", Pin: "p3", Handler: "echo", Require: []string{"zone=a"}}}
	otherLabels := bcast
	otherLabels.Tasks = []TaskSpec{{Name: "p1", Pin: "p1", Handler: "echo", Require: []string{"zone=b"}}}
	toWorkers := bcast
	toWorkers.Tasks = []TaskSpec{{Name: "w1", Pin: "p1", Handler: "echo", Require: []string{"zone=a"}}}
	fresh := first
	fresh.ID = "k3"
	for _, tt := range []struct {
		name     string
		spec     GroupSpec
		conflict bool
	}{
		{"same request, new trace", same, false},
		{"other payload", otherPayload, true},
		{"more tasks", moreTasks, true},
		{"broadcast over other peers", otherPeers, false},
		{"broadcast to other labels", otherLabels, true},
		{"broadcast to workers, not peers", toWorkers, true},
		{"unused key", fresh, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := o.s.CheckRepeat(&tt.spec)
			var ce *ConflictError
			if got := errors.As(err, &ce); got != tt.conflict || (got && ce.Field != "key") {
				t.Errorf("CheckRepeat = %v; want conflict %v naming key", err, tt.conflict)
			}
			_, exists, serr := o.s.Submit(o.now, &tt.spec)
			if exists != (tt.spec.ID != "k3") || (serr != nil) != tt.conflict {
				t.Errorf("Submit = exists %v, %v; want the conflict there too", exists, serr)
			}
		})
	}
}
