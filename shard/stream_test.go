package shard

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// streamSpec returns a streaming pipeline of items through stages named
// s0, s1, ... with the given concurrency each.
func streamSpec(id GroupID, items int, conc ...int) GroupSpec {
	g := GroupSpec{ID: id, Mode: ModeStream}
	for s, c := range conc {
		g.Stages = append(g.Stages, StageSpec{Name: fmt.Sprintf("s%d", s), Concurrency: c})
	}
	for i := range items {
		for s := range conc {
			g.Tasks = append(g.Tasks, TaskSpec{Handler: "h", Item: i, Stage: s, Payload: []byte(fmt.Sprint(i))})
		}
	}
	return g
}

func (o *owner) stageStates(g GroupID, stage int) (live, done int) {
	v, _ := o.s.Group(g)
	for _, tv := range v.Tasks {
		if tv.Stage != stage {
			continue
		}
		switch tv.State {
		case Ready, Running, Waiting:
			live++
		case Succeeded:
			done++
		}
	}
	return live, done
}

// TestStreamFlowsPerItem: item 0 enters stage 1 as soon as it left stage 0,
// while stage 0 still has items to do; and each stage keeps at most its
// concurrency in flight.
func TestStreamFlowsPerItem(t *testing.T) {
	o := newOwner(t)
	o.submit(streamSpec("p", 10, 2, 1))
	if live, _ := o.stageStates("p", 0); live != 2 {
		t.Fatalf("stage 0 live after submit = %d, want 2 (its concurrency)", live)
	}
	ids := o.lease(10, "w")
	if len(ids) != 2 || ids[0] != TaskIDOf("p", 0) || ids[1] != TaskIDOf("p", 2) {
		t.Fatalf("leased %v, want items 0 and 1 of stage 0", ids)
	}
	if err := o.report(ids[0], "w", true, false); err != nil {
		t.Fatal(err)
	}
	// Item 0 is now in stage 1, and item 2 took its room in stage 0.
	if st := o.state(TaskIDOf("p", 1)); st != Ready {
		t.Fatalf("item 0 stage 1 = %v, want READY before stage 0 finished", st)
	}
	if st := o.state(TaskIDOf("p", 4)); st != Ready {
		t.Fatalf("item 2 stage 0 = %v, want READY (room freed)", st)
	}
	if got := string(o.s.Payload(TaskIDOf("p", 1))); got != `"r"` {
		t.Fatalf("stage 1 payload = %q, want stage 0's result", got)
	}
	if err := o.report(ids[1], "w", true, false); err != nil {
		t.Fatal(err)
	}
	// Run everything to the end, checking the bounds at every step.
	for steps := 0; ; steps++ {
		if steps > 1000 {
			t.Fatal("did not finish")
		}
		for s, c := range []int{2, 1} {
			if live, _ := o.stageStates("p", s); live > c {
				t.Fatalf("stage %d has %d in flight, over %d", s, live, c)
			}
		}
		ids := o.lease(3, "w")
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			if err := o.report(id, "w", true, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, _ := o.s.Group("p")
	if v.State != GroupSucceeded || v.Counts[Succeeded] != 20 || v.Items != 10 {
		t.Fatalf("group = %v %v items %d", v.State, v.Counts, v.Items)
	}
}

// TestStreamSkipsFailedItem: an item that fails a stage after its retries
// is skipped with the reason; the others flow on; the group succeeds and
// lists the skipped item.
func TestStreamSkipsFailedItem(t *testing.T) {
	o := newOwner(t)
	spec := streamSpec("p", 3, 0, 0, 0)
	o.submit(spec)
	for steps := 0; ; steps++ {
		ids := o.lease(10, "w")
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			_, i, _ := id.Split()
			fail := i == 4 // item 1, stage 1
			if err := o.report(id, "w", !fail, fail); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, _ := o.s.Group("p")
	if v.State != GroupSucceeded {
		t.Fatalf("state = %v, want SUCCEEDED with a skipped item", v.State)
	}
	if len(v.Skipped) != 1 || v.Skipped[0].Item != 1 || v.Skipped[0].Stage != "s1" || v.Skipped[0].Reason != "boom" {
		t.Fatalf("skipped = %+v", v.Skipped)
	}
	last := v.Tasks[5]
	if last.State != Canceled || !strings.HasPrefix(last.Error, skippedPrefix) || !strings.Contains(last.Error, `"s1"`) {
		t.Fatalf("item 1 stage 2 = %v %q, want CANCELED as skipped", last.State, last.Error)
	}
	if v.Counts[Succeeded] != 7 {
		t.Fatalf("counts = %v", v.Counts)
	}
}

// TestStreamSkipsWholeChain: an item skipped at its first stage of four
// has all three later stages skipped, each with the reason (not "canceled"
// by the stage before: the group then ended CANCELED, as if a client had
// canceled it).
func TestStreamSkipsWholeChain(t *testing.T) {
	o := newOwner(t)
	o.submit(streamSpec("p", 3, 0, 0, 0, 0))
	for {
		ids := o.lease(10, "w")
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			_, i, _ := id.Split()
			fail := i == 4 // item 1, stage 0
			if err := o.report(id, "w", !fail, fail); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, _ := o.s.Group("p")
	if v.State != GroupSucceeded || len(v.Skipped) != 1 || v.Counts[Succeeded] != 8 {
		t.Fatalf("group = %v %v skipped %+v, want SUCCEEDED with item 1 skipped", v.State, v.Counts, v.Skipped)
	}
	for _, tv := range v.Tasks[5:8] {
		if tv.State != Canceled || !strings.HasPrefix(tv.Error, skippedPrefix+` item 1 at stage "s0": boom`) {
			t.Fatalf("item 1 stage %d = %v %q, want CANCELED as skipped at s0", tv.Stage, tv.State, tv.Error)
		}
	}
}

func TestStreamAllSkippedFails(t *testing.T) {
	o := newOwner(t)
	o.submit(streamSpec("p", 2, 1, 1, 1))
	for {
		ids := o.lease(10, "w")
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			_ = o.report(id, "w", false, true)
		}
	}
	if v, _ := o.s.Group("p"); v.State != GroupFailed || len(v.Skipped) != 2 {
		t.Fatalf("group = %v skipped %d, want FAILED with 2", v.State, len(v.Skipped))
	}
}

// TestStreamCancelHeld: canceling the group cancels held items too, and
// the outcome is CANCELED.
func TestStreamCancelHeld(t *testing.T) {
	o := newOwner(t)
	o.submit(streamSpec("p", 5, 1, 1))
	o.lease(1, "w")
	evs, err := o.s.Cancel(o.now, "p", "", "me")
	if err != nil {
		t.Fatal(err)
	}
	o.commit(evs...)
	v, _ := o.s.Group("p")
	if v.State != GroupCanceled || v.Counts[Canceled] != 10 || o.s.ReadyLen() != 0 {
		t.Fatalf("group = %v %v ready %d", v.State, v.Counts, o.s.ReadyLen())
	}
}

// TestStreamReplayAndRestore: random streaming runs give the same state on
// a replica that replays the log and on one restored from a snapshot taken
// midway (the held items and in-flight counts derive from the state).
func TestStreamReplayAndRestore(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 9))
			o := newOwner(t)
			items := 1 + r.IntN(12)
			conc := []int{r.IntN(3), r.IntN(3), r.IntN(3)}[:1+r.IntN(3)]
			spec := streamSpec("p", items, conc...)
			for i := range spec.Tasks {
				spec.Tasks[i].Retry = Retry{MaxAttempts: 2, Backoff: time.Second}
			}
			o.submit(spec)
			var snap []byte
			var snapAt int
			for step := 0; step < 200; step++ {
				if step == 5 {
					snap, snapAt = o.s.Snapshot(), len(o.log)
				}
				for _, id := range o.lease(1+r.IntN(3), "w") {
					_ = o.report(id, "w", r.IntN(5) != 0, false)
				}
				o.advance(time.Duration(r.IntN(2000)) * time.Millisecond)
			}
			assertReplayAndRestore(t, o, snap, snapAt)
		})
	}
}

// assertReplayAndRestore checks that a replica replaying o's log, and one
// restored from snap (taken when the log was snapAt events long) that
// applies the rest, both reach o's state.
func assertReplayAndRestore(t *testing.T, o *owner, snap []byte, snapAt int) {
	t.Helper()
	replica, _ := New(DefaultConfig())
	replica.Apply(o.log)
	assertSameState(t, o.s, replica)
	restored, _ := New(DefaultConfig())
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	restored.Apply(o.log[snapAt:])
	assertSameState(t, o.s, restored)
}

func TestStreamValidate(t *testing.T) {
	ok := streamSpec("p", 2, 1, 1)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*GroupSpec){
		"stages[0].name":        func(g *GroupSpec) { g.Stages[0].Name = "" },
		"stages[1].name":        func(g *GroupSpec) { g.Stages[1].Name = "s0" },
		"stages[0].concurrency": func(g *GroupSpec) { g.Stages[0].Concurrency = -1 },
		"stages":                func(g *GroupSpec) { g.Stages = nil },
		"items":                 func(g *GroupSpec) { g.Tasks = g.Tasks[:3] },
		"tasks[1].stage":        func(g *GroupSpec) { g.Tasks[1].Stage = 0 },
		"tasks[0].require[0]":   func(g *GroupSpec) { g.Tasks[0].Require = []string{"zone"} },
		"tasks[0].require":      func(g *GroupSpec) { g.Tasks[0].Require = []string{"b=1", "a=1"} },
	} {
		g := streamSpec("p", 2, 1, 1)
		mut(&g)
		err := g.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), name) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	b := GroupSpec{ID: "b", Mode: ModeBroadcast, Tasks: []TaskSpec{{Handler: "h", Pin: "p1"}, {Handler: "h", Pin: "p1"}}}
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "pin") {
		t.Errorf("broadcast with a peer twice: %v", err)
	}
	// To workers: two workers may poll one peer; the kinds do not mix.
	w := GroupSpec{ID: "w", Mode: ModeBroadcast, Tasks: []TaskSpec{{Name: "w1", Handler: "h", Pin: "p1"}, {Name: "w2", Handler: "h", Pin: "p1"}}}
	if err := w.Validate(); err != nil {
		t.Errorf("broadcast to two workers of one peer: %v", err)
	}
	w.Tasks = append(w.Tasks, TaskSpec{Name: "p2", Handler: "h", Pin: "p2"})
	if err := w.Validate(); err == nil || !strings.HasPrefix(err.Error(), "tasks[2].name") {
		t.Errorf("broadcast to workers and a peer: %v", err)
	}
}

func TestBroadcastWorker(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "w", Mode: ModeBroadcast, Tasks: []TaskSpec{{Name: "w1", Handler: "h", Pin: "p1"}, {Name: "w2", Handler: "h", Pin: "p1"}}})
	o.submit(GroupSpec{ID: "p", Mode: ModeBroadcast, Tasks: []TaskSpec{{Name: "p1", Handler: "h", Pin: "p1"}}})
	o.submit(GroupSpec{ID: "d", Mode: ModeDAG, Tasks: []TaskSpec{{Name: "fetch", Handler: "h", Pin: "p1"}}})
	for id, want := range map[TaskID]string{"w.0": "w1", "w.1": "w2", "p.0": "", "d.0": "", "x.0": ""} {
		if got := o.s.BroadcastWorker(id); got != want {
			t.Errorf("BroadcastWorker(%s) = %q; want %q", id, got, want)
		}
	}
	if i, n := o.s.BroadcastShard("w.1"); i != 1 || n != 2 {
		t.Errorf("BroadcastShard(w.1) = %d, %d; want 1, 2", i, n)
	}
}

func TestMatches(t *testing.T) {
	labels := map[string]string{"zone": "a", "gpu": "true"}
	for _, tt := range []struct {
		ts   TaskSpec
		peer string
		want bool
	}{
		{TaskSpec{}, "p1", true},
		{TaskSpec{Require: []string{"gpu=true"}}, "p1", true},
		{TaskSpec{Require: []string{"gpu=true", "zone=b"}}, "p1", false},
		{TaskSpec{Require: []string{"disk=ssd"}}, "p1", false},
		{TaskSpec{Pin: "p1"}, "p1", true},
		{TaskSpec{Pin: "p2"}, "p1", false},
		{TaskSpec{Pin: "p1", Require: []string{"zone=a"}}, "p1", true},
	} {
		if got := tt.ts.Matches(tt.peer, labels); got != tt.want {
			t.Errorf("%+v.Matches(%s) = %v", tt.ts, tt.peer, got)
		}
	}
}

// TestNotifyDelivery: a finished group's webhook is handed out once until
// its attempt applies, retried after a backoff, and recorded; delivery
// state survives a snapshot.
func TestNotifyDelivery(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Notify: "http://hook", Tasks: []TaskSpec{{Handler: "h"}}})
	if jobs := o.s.NotifyDue(o.now, 10); len(jobs) != 0 {
		t.Fatalf("due before the group finished: %v", jobs)
	}
	id := o.lease(1, "w")[0]
	_ = o.report(id, "w", true, false)
	jobs := o.s.NotifyDue(o.now, 10)
	if len(jobs) != 1 || jobs[0].Attempt != 1 || jobs[0].URL != "http://hook" {
		t.Fatalf("jobs = %+v", jobs)
	}
	if again := o.s.NotifyDue(o.now, 10); len(again) != 0 {
		t.Fatalf("in-flight delivery handed out twice: %v", again)
	}
	fail := o.s.Notified(o.now, jobs[0], "503 Service Unavailable")
	o.commit(fail, fail) // a duplicate of the same attempt changes nothing
	v, _ := o.s.Group("g")
	if v.Notify.State != "pending" || v.Notify.Attempts != 1 || v.Notify.LastError == "" {
		t.Fatalf("notify = %+v", v.Notify)
	}
	if jobs := o.s.NotifyDue(o.now, 10); len(jobs) != 0 {
		t.Fatalf("retry before its backoff: %v", jobs)
	}
	o.now = v.Notify.Next
	jobs = o.s.NotifyDue(o.now, 10)
	if len(jobs) != 1 || jobs[0].Attempt != 2 {
		t.Fatalf("retry jobs = %+v", jobs)
	}
	o.commit(o.s.Notified(o.now, jobs[0], ""))
	v, _ = o.s.Group("g")
	if v.Notify.State != "delivered" || v.Notify.Attempts != 2 || o.s.NotifyPending() != 0 {
		t.Fatalf("notify = %+v pending %d", v.Notify, o.s.NotifyPending())
	}
	hist, _ := o.s.TaskEvents(id)
	if n := len(hist); hist[n-1].Type != EvNotified || hist[n-2].Type != EvNotified || hist[n-2].Error == "" {
		t.Fatalf("history = %+v", hist)
	}
	restored, _ := New(DefaultConfig())
	if err := restored.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	assertSameState(t, o.s, restored)
}

func TestNotifyGivesUp(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Notify: "http://hook", Tasks: []TaskSpec{{Handler: "h"}, {Handler: "h"}}})
	for _, id := range o.lease(2, "w") {
		_ = o.report(id, "w", false, true)
	}
	// A replica restored before the deliveries picks them up as pending.
	restored, _ := New(DefaultConfig())
	if err := restored.Restore(o.s.Snapshot()); err != nil || restored.NotifyPending() != 1 {
		t.Fatalf("restored pending = %d, %v", restored.NotifyPending(), err)
	}
	for a := 1; a <= NotifyMaxAttempts; a++ {
		jobs := o.s.NotifyDue(o.now.Add(time.Hour), 1)
		if len(jobs) != 1 || jobs[0].Attempt != a {
			t.Fatalf("attempt %d: jobs %+v", a, jobs)
		}
		o.now = o.now.Add(time.Hour)
		o.commit(o.s.Notified(o.now, jobs[0], "refused"))
	}
	v, _ := o.s.Group("g")
	if v.State != GroupFailed || v.Notify.State != "failed" || o.s.NotifyPending() != 0 {
		t.Fatalf("group %v notify %+v", v.State, v.Notify)
	}
}

// TestGroupSummary: the summary is the full view without the task list.
func TestGroupSummary(t *testing.T) {
	o := newOwner(t)
	o.submit(streamSpec("p", 3, 0, 0))
	for _, id := range o.lease(2, "w") {
		_ = o.report(id, "w", id != TaskIDOf("p", 2), true)
	}
	full, _ := o.s.Group("p")
	sum, err := o.s.GroupSummary("p")
	if err != nil || sum.Tasks != nil || sum.Total != 6 {
		t.Fatalf("summary = %+v, %v", sum, err)
	}
	full.Tasks = nil
	if !reflect.DeepEqual(full, sum) {
		t.Fatalf("summary differs from the view:\n%+v\n%+v", sum, full)
	}
	if sum.StageDone[0] != 1 || len(sum.Skipped) != 1 || sum.Skipped[0].Item != 1 {
		t.Fatalf("stage done %v skipped %+v", sum.StageDone, sum.Skipped)
	}
}
