package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func (o *owner) retry(g GroupID, task TaskID, key string) error {
	o.tb.Helper()
	evs, err := o.s.Retry(o.now, g, task, "op", key)
	if err == nil {
		o.commit(evs...)
	}
	return err
}

// runAll leases and reports every runnable task until none is left; fail
// decides each outcome.
func (o *owner) runAll(fail func(TaskID) bool) {
	o.tb.Helper()
	for range 100 {
		ids := o.lease(100, "w")
		if len(ids) == 0 {
			return
		}
		for _, id := range ids {
			if err := o.report(id, "w", !fail(id), true); err != nil {
				o.tb.Fatal(err)
			}
		}
	}
}

func TestRetryRearmsDependents(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "a"), echo("c", "b"), echo("x")}})
	o.runAll(func(id TaskID) bool { return id == "g.0" })
	if st, _ := o.s.GroupState("g"); st != GroupFailed || o.state("g.1") != Canceled {
		t.Fatalf("before retry: group %v, b %v", st, o.state("g.1"))
	}
	if err := o.retry("g", "g.0", ""); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[TaskID]State{"g.0": Ready, "g.1": Pending, "g.2": Pending, "g.3": Succeeded} {
		if got := o.state(id); got != want {
			t.Errorf("after retry: %s is %v; want %v", id, got, want)
		}
	}
	if st, _ := o.s.GroupState("g"); st != GroupRunning {
		t.Errorf("group after retry = %v; want RUNNING", st)
	}
	o.runAll(func(TaskID) bool { return false })
	if st, _ := o.s.GroupState("g"); st != GroupSucceeded {
		t.Errorf("group after the rerun = %v; want SUCCEEDED", st)
	}
	if v, _ := o.s.Task("g.0"); v.Attempt != 2 || v.Error != "" {
		t.Errorf("a after the rerun: attempt %d error %q; want 2, none", v.Attempt, v.Error)
	}
	if evs, _ := o.s.TaskEvents("g.0"); !containsType(evs, EvRetried) {
		t.Errorf("history %v has no retried event", evs)
	}
	if a := o.s.Audit(); len(a) == 0 || a[len(a)-1].Type != EvRetried || a[len(a)-1].Subject != "g.0" {
		t.Errorf("audit = %+v; want the retry last", a)
	}
}

func containsType(evs []TaskEvent, ty EventType) bool {
	for _, e := range evs {
		if e.Type == ty {
			return true
		}
	}
	return false
}

func TestRetryRefusals(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "a"), echo("c")}})
	o.runAll(func(id TaskID) bool { return id == "g.0" })
	o.submit(GroupSpec{ID: "r", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}})
	for _, tt := range []struct {
		g    GroupID
		task TaskID
		want error
		says string
	}{
		{"g", "g.2", ErrNotRetryable, "SUCCEEDED"},
		{"r", "r.0", ErrNotRetryable, "READY"},
		{"r", "", ErrNotRetryable, "RUNNING"},
		{"g", "g.1", ErrNotRetryable, "depends on g.0"},
		{"g", "g.9", ErrNotFound, ""},
		{"nope", "", ErrNotFound, ""},
	} {
		err := o.retry(tt.g, tt.task, "")
		if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.says) {
			t.Errorf("Retry(%s, %s) = %v; want %v saying %q", tt.g, tt.task, err, tt.want, tt.says)
		}
	}
}

func TestRetryBudgetAndKey(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h", Retry: Retry{MaxAttempts: 2, Backoff: time.Second}}}})
	failOnce := func() {
		t.Helper()
		ids := o.lease(1, "w")
		if len(ids) != 1 || o.report(ids[0], "w", false, false) != nil {
			t.Fatalf("leased %v", ids)
		}
	}
	failOnce()
	o.advance(2 * time.Second)
	failOnce()
	if o.state("g.0") != Failed {
		t.Fatalf("after 2 of 2 attempts: %v", o.state("g.0"))
	}
	if err := o.retry("g", "", "k1"); err != nil {
		t.Fatal(err)
	}
	failOnce()
	if got := o.state("g.0"); got != Waiting {
		t.Fatalf("first failure after a retry: %v; want WAITING (a fresh budget)", got)
	}
	o.advance(2 * time.Second)
	failOnce()
	if evs, err := o.s.Retry(o.now, "g", "", "op", "k1"); err != nil || len(evs) != 0 {
		t.Fatalf("repeated key: %v, %v; want nothing to do", evs, err)
	}
	if o.state("g.0") != Failed {
		t.Fatalf("state = %v; want FAILED", o.state("g.0"))
	}
	// The same key committed twice (a retried proposal) retries once.
	evs, _ := o.s.Retry(o.now, "g", "", "op", "k2")
	o.commit(evs...)
	o.commit(evs...)
	if h, _ := o.s.TaskEvents("g.0"); countType(h, EvRetried) != 2 {
		t.Fatalf("retried events in history = %d; want 2", countType(h, EvRetried))
	}
	assertSnapshotRoundTrip(t, o.s)
}

func countType(evs []TaskEvent, ty EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == ty {
			n++
		}
	}
	return n
}

func assertSnapshotRoundTrip(t *testing.T, s *Shard) {
	t.Helper()
	snap := s.Snapshot()
	r, _ := New(DefaultConfig())
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) {
		t.Fatal("snapshot of the restored state differs")
	}
	assertSameState(t, s, r)
}

func TestRetryStreamSkippedItem(t *testing.T) {
	o := newOwner(t)
	o.submit(streamSpec("p", 3, 1, 0, 0))
	o.runAll(func(id TaskID) bool { return id == "p.4" }) // item 1, stage 1
	v, _ := o.s.Group("p")
	if len(v.Skipped) != 1 || v.State != GroupSucceeded {
		t.Fatalf("before: %v skipped %+v", v.State, v.Skipped)
	}
	if err := o.retry("p", "p.4", ""); err != nil {
		t.Fatal(err)
	}
	if o.state("p.4") != Ready || o.state("p.5") != Pending {
		t.Fatalf("after retry: stage 1 %v, stage 2 %v; want READY, PENDING", o.state("p.4"), o.state("p.5"))
	}
	o.runAll(func(TaskID) bool { return false })
	v, _ = o.s.Group("p")
	if len(v.Skipped) != 0 || v.State != GroupSucceeded || v.Counts[Succeeded] != 9 {
		t.Fatalf("after: %v skipped %+v counts %v", v.State, v.Skipped, v.Counts)
	}
}

func TestRetryGroupRerunsCanceled(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{echo("a"), echo("b"), echo("c")}})
	o.runAll(func(id TaskID) bool { return id == "g.0" })
	o.submit(GroupSpec{ID: "h", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "a")}})
	evs, _ := o.s.Cancel(o.now, "h", "", "op")
	o.commit(evs...)
	for _, g := range []GroupID{"g", "h"} {
		if err := o.retry(g, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	o.runAll(func(TaskID) bool { return false })
	for _, g := range []GroupID{"g", "h"} {
		if st, _ := o.s.GroupState(g); st != GroupSucceeded {
			t.Errorf("group %s after a group retry = %v; want SUCCEEDED", g, st)
		}
	}
}

// TestRetryReplayProperty: random runs with retries mixed in; a replica
// applying the same log holds the same state (snapshots equal), and a
// terminal state changes only in an entry holding a retried event.
func TestRetryReplayProperty(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		o := newOwner(t)
		r := rand.New(rand.NewPCG(seed, 9))
		seen := map[TaskID]State{}
		for round := range 12 {
			runRandom(o, r, 2)
			for _, id := range sortedGroupIDs(o.s.groups) {
				retried := false
				if r.IntN(3) == 0 {
					retried = o.retry(id, "", fmt.Sprint(r.IntN(4))) == nil
				}
				checkTerminalStable(t, o.s, id, seen, retried, round)
			}
		}
		replica, _ := New(DefaultConfig())
		replica.Apply(o.log)
		assertSameState(t, o.s, replica)
		if !bytes.Equal(o.s.Snapshot(), replica.Snapshot()) {
			t.Fatalf("seed %d: replica snapshot differs", seed)
		}
		assertSnapshotRoundTrip(t, o.s)
	}
}

// checkTerminalStable fails when a task of group id left a terminal state
// it was seen in, unless the group was just retried.
func checkTerminalStable(t *testing.T, s *Shard, id GroupID, seen map[TaskID]State, retried bool, round int) {
	t.Helper()
	g, err := s.Group(id)
	if err != nil {
		return
	}
	for _, tv := range g.Tasks {
		if was, ok := seen[tv.ID]; ok && was != tv.State && !retried {
			t.Fatalf("round %d: %s went %v -> %v without a retry", round, tv.ID, was, tv.State)
		}
		delete(seen, tv.ID)
		if tv.State.Terminal() {
			seen[tv.ID] = tv.State
		}
	}
}

// A retry reports every task it re-arms (Change.Retried, with the task's
// new state), and every change carries the retries the task had: the
// outcomes of one task's runs are told apart by it.
func TestRetryChangesCountRetries(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "a")}})
	o.runAll(func(id TaskID) bool { return id == "g.0" })
	type key struct {
		task    TaskID
		state   State
		retried bool
		retries int
	}
	got := func() []key {
		var out []key
		for _, c := range o.s.TakeChanges() {
			out = append(out, key{c.Task, c.State, c.Retried, c.Retries})
		}
		return out
	}
	if ch := got(); !slices.Equal(ch, []key{{"g.0", Failed, false, 0}, {"g.1", Canceled, false, 0}}) {
		t.Fatalf("changes of the first run: %v", ch)
	}
	for round := 1; round <= 2; round++ {
		if err := o.retry("g", "", ""); err != nil {
			t.Fatal(err)
		}
		if ch := got(); !slices.Equal(ch, []key{{"g.0", Ready, true, round}, {"g.1", Pending, true, round}}) {
			t.Fatalf("changes of retry %d: %v", round, ch)
		}
		if v, _ := o.s.Task("g.1"); v.Retries != round {
			t.Fatalf("view after retry %d: Retries %d", round, v.Retries)
		}
		o.runAll(func(id TaskID) bool { return id == "g.0" && round == 1 })
		want := []key{{"g.0", Failed, false, 1}, {"g.1", Canceled, false, 1}}
		if round == 2 {
			want = []key{{"g.0", Succeeded, false, 2}, {"g.1", Succeeded, false, 2}}
		}
		if ch := got(); !slices.Equal(ch, want) {
			t.Fatalf("changes of the run after retry %d: %v", round, ch)
		}
	}
}

// A task retried by hand gets a fresh budget counted from the retry, so the
// MaxAttempts an external worker is told (RunInfo) counts from it too: with
// max_attempts 2, failed twice and retried, attempts 3 and 4 run and 4 is
// the last (it said 2, and a worker checking attempt == max_attempts never
// knew its last attempt).
func TestRetryRunInfoCountsTheFreshBudget(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h", Retry: Retry{MaxAttempts: 2, Backoff: time.Second}}}})
	if got := o.s.RunInfo("g.0").MaxAttempts; got != 2 {
		t.Fatalf("MaxAttempts before any run = %d; want 2", got)
	}
	for i := range 2 {
		ids := o.lease(1, "w")
		if len(ids) != 1 || o.report(ids[0], "w", false, false) != nil {
			t.Fatalf("run %d leased %v", i+1, ids)
		}
		o.advance(2 * time.Second)
	}
	if err := o.retry("g", "g.0", ""); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		v, _ := o.s.Task("g.0")
		if got, want := o.s.RunInfo("g.0").MaxAttempts, 4; got != want || v.Attempt != 2+i {
			t.Fatalf("retried, attempt %d of %d; want attempt %d of %d", v.Attempt+1, got, 3+i, want)
		}
		ids := o.lease(1, "w")
		if len(ids) != 1 || o.report(ids[0], "w", false, false) != nil {
			t.Fatalf("run %d after the retry leased %v", i+1, ids)
		}
		o.advance(2 * time.Second)
	}
	if o.state("g.0") != Failed {
		t.Fatalf("state = %v; want FAILED after attempt 4 of 4", o.state("g.0"))
	}
}
