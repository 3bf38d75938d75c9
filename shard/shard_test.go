package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

var t0 = time.Unix(1_700_000_000, 0).UTC()

// owner drives a Shard as a single-replica owner whose proposals commit at
// once, and keeps every applied event for replay checks.
type owner struct {
	tb  testing.TB
	s   *Shard
	now time.Time
	log []Event
}

func newOwner(tb testing.TB) *owner {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.SetLeader(true, t0)
	return &owner{tb: tb, s: s, now: t0}
}

func (o *owner) commit(evs ...Event) {
	o.log = append(o.log, evs...)
	o.s.Apply(evs)
}

func (o *owner) submit(spec GroupSpec) {
	o.tb.Helper()
	ev, exists, err := o.s.Submit(o.now, &spec)
	if err != nil || exists {
		o.tb.Fatalf("Submit(%s) = %v, %v", spec.ID, exists, err)
	}
	o.commit(ev)
}

// lease leases up to n tasks to holder and returns their ids in order.
func (o *owner) lease(n int, holder string) []TaskID {
	evs := o.s.Lease(o.now, n, holder, nil)
	o.commit(evs...)
	ids := make([]TaskID, len(evs))
	for i, e := range evs {
		ids[i] = e.Task
	}
	return ids
}

// died reports that the external worker holding id's lease died (d 0: a
// lease handed back without a death).
func (o *owner) died(id TaskID, holder string, d Death) {
	o.tb.Helper()
	v, err := o.s.Task(id)
	if err != nil {
		o.tb.Fatal(err)
	}
	ev, err := o.s.Report(o.now, Outcome{Task: id, Round: v.Round, Holder: holder, Lost: true, Died: d})
	if err != nil {
		o.tb.Fatal(err)
	}
	o.commit(ev)
}

func (o *owner) report(id TaskID, holder string, ok bool, permanent bool) error {
	v, err := o.s.Task(id)
	if err != nil {
		return err
	}
	ev, err := o.s.Report(o.now, Outcome{Task: id, Round: v.Round, Holder: holder, OK: ok,
		Result: []byte(`"r"`), Error: "boom", Permanent: permanent})
	if err != nil {
		return err
	}
	o.commit(ev)
	return nil
}

func (o *owner) advance(d time.Duration) {
	o.now = o.now.Add(d)
	o.commit(o.s.Due(o.now)...)
}

func (o *owner) state(id TaskID) State {
	o.tb.Helper()
	v, err := o.s.Task(id)
	if err != nil {
		o.tb.Fatalf("Task(%s): %v", id, err)
	}
	return v.State
}

func echo(name string, deps ...string) TaskSpec {
	return TaskSpec{Name: name, Handler: "echo", Deps: deps}
}

func TestDAGOrder(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{
		echo("a"), echo("b", "a"), echo("c", "a"), echo("d", "b", "c"),
	}})
	var order []TaskID
	for range 10 {
		ids := o.lease(10, "w")
		for _, id := range ids {
			order = append(order, id)
			if err := o.report(id, "w", true, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []TaskID{"g.0", "g.1", "g.2", "g.3"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("run order = %v; want %v", order, want)
	}
	if st, _ := o.s.GroupState("g"); st != GroupSucceeded {
		t.Errorf("group state = %v; want SUCCEEDED", st)
	}
}

func TestFailureCancelsDependents(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{
		echo("a"), echo("b", "a"), echo("c", "b"), echo("x"),
	}})
	ids := o.lease(10, "w")
	if len(ids) != 2 {
		t.Fatalf("leased %v; want a and x", ids)
	}
	if err := o.report("g.0", "w", false, true); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[TaskID]State{"g.0": Failed, "g.1": Canceled, "g.2": Canceled, "g.3": Running} {
		if got := o.state(id); got != want {
			t.Errorf("state(%s) = %v; want %v", id, got, want)
		}
	}
	if err := o.report("g.3", "w", true, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := o.s.GroupState("g"); st != GroupFailed {
		t.Errorf("group state = %v; want FAILED", st)
	}
}

func TestRetryBackoff(t *testing.T) {
	o := newOwner(t)
	spec := TaskSpec{Handler: "fail", Retry: Retry{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 4 * time.Second}}
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{spec}})
	for attempt := 1; attempt <= 3; attempt++ {
		ids := o.lease(1, "w")
		if len(ids) != 1 {
			t.Fatalf("attempt %d: leased %v", attempt, ids)
		}
		if err := o.report(ids[0], "w", false, false); err != nil {
			t.Fatal(err)
		}
		if attempt == 3 {
			break
		}
		if got := o.state("g.0"); got != Waiting {
			t.Fatalf("after attempt %d: %v; want WAITING", attempt, got)
		}
		if ids := o.lease(1, "w"); len(ids) != 0 {
			t.Fatalf("leased %v during backoff", ids)
		}
		o.advance(5 * time.Second)
	}
	v, _ := o.s.Task("g.0")
	if v.State != Failed || v.Attempt != 3 {
		t.Errorf("final = %v attempt %d; want FAILED attempt 3", v.State, v.Attempt)
	}
}

func TestRetryDelayBounds(t *testing.T) {
	r := Retry{MaxAttempts: 10, Backoff: time.Second, MaxBackoff: 8 * time.Second}
	for n := 1; n <= 8; n++ {
		for _, j := range []float64{0, 0.5, 0.999} {
			d := r.Delay(n, j)
			if d < r.Backoff || d > r.MaxBackoff {
				t.Errorf("Delay(%d, %v) = %v; want within [%v, %v]", n, j, d, r.Backoff, r.MaxBackoff)
			}
		}
	}
	if got, want := r.Delay(3, 0.999), 4*time.Second; got > want || got < 2*time.Second {
		t.Errorf("Delay(3) = %v; want in [2s, 4s]", got)
	}
}

func TestPriorityOrder(t *testing.T) {
	o := newOwner(t)
	tasks := []TaskSpec{
		{Name: "low", Handler: "echo", Priority: 0},
		{Name: "high", Handler: "echo", Priority: 9},
		{Name: "mid", Handler: "echo", Priority: 5},
		{Name: "high2", Handler: "echo", Priority: 9},
	}
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: tasks})
	got := o.lease(4, "w")
	want := []TaskID{"g.1", "g.3", "g.2", "g.0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lease order = %v; want %v", got, want)
	}
}

func TestDelay(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo", Delay: 300 * time.Millisecond}}})
	if got := o.state("g.0"); got != Waiting {
		t.Fatalf("state = %v; want WAITING", got)
	}
	o.advance(290 * time.Millisecond)
	if got := o.state("g.0"); got != Waiting {
		t.Fatalf("at 290ms state = %v; want WAITING", got)
	}
	o.advance(20 * time.Millisecond)
	if got := o.state("g.0"); got != Ready {
		t.Fatalf("at 310ms state = %v; want READY", got)
	}
}

func TestFencing(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo", Timeout: time.Second}}})
	o.lease(1, "thief")
	o.advance(12 * time.Second) // timeout + grace: the lease expires
	if got := o.state("g.0"); got != Ready {
		t.Fatalf("after expiry state = %v; want READY", got)
	}
	o.lease(1, "owner")
	// The thief's late outcome is for round 1; the task is at round 2.
	ev, err := o.s.Report(o.now, Outcome{Task: "g.0", Round: 1, Holder: "thief", OK: true})
	if !errors.Is(err, ErrStaleRound) {
		t.Fatalf("Report(stale) = %v, %v; want ErrStaleRound", ev, err)
	}
	// A stale event that was proposed before the expiry committed is a no-op.
	o.commit(Event{Type: EvSucceeded, At: o.now, Group: "g", Task: "g.0", Round: 1, Holder: "thief"})
	if got := o.state("g.0"); got != Running {
		t.Fatalf("after stale commit state = %v; want RUNNING", got)
	}
	if err := o.report("g.0", "owner", true, false); err != nil {
		t.Fatal(err)
	}
	if err := o.report("g.0", "owner", true, false); !errors.Is(err, ErrStaleRound) {
		t.Errorf("duplicate outcome: %v; want ErrStaleRound", err)
	}
}

// An outcome for the round after a READY task's last is ErrNotLeased (a
// lease of that round to its holder may still apply), not a plain stale
// one; once that lease applies it is the lease's outcome.
func TestReportNotLeasedYet(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo", Timeout: time.Second}}})
	early := Outcome{Task: "g.0", Round: 1, Holder: "thief", OK: true}
	if _, err := o.s.Report(o.now, early); !errors.Is(err, ErrNotLeased) || !errors.Is(err, ErrStaleRound) {
		t.Fatalf("Report before the lease = %v; want ErrNotLeased (an ErrStaleRound)", err)
	}
	if _, err := o.s.Report(o.now, Outcome{Task: "g.0", Round: 2, Holder: "thief", OK: true}); errors.Is(err, ErrNotLeased) || !errors.Is(err, ErrStaleRound) {
		t.Fatalf("Report two rounds ahead = %v; want a plain ErrStaleRound", err)
	}
	o.lease(1, "thief")
	ev, err := o.s.Report(o.now, early)
	if err != nil || ev.Type != EvSucceeded {
		t.Fatalf("Report once leased = %v, %v; want succeeded", ev, err)
	}
}

func TestCancelRunningAborts(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModePipeline, Tasks: []TaskSpec{
		{Handler: "echo", Stage: 0}, {Handler: "echo", Stage: 1},
	}})
	o.lease(5, "w")
	o.s.TakeChanges()
	evs, err := o.s.Cancel(o.now, "g", "", "test")
	if err != nil {
		t.Fatal(err)
	}
	o.commit(evs...)
	ch := o.s.TakeChanges()
	if len(ch) != 2 || !ch[0].Abort || ch[0].Holder != "w" || !ch[1].GroupDone {
		t.Errorf("changes = %+v; want an abort of g.0 then g.1 canceled with the group", ch)
	}
}

func TestPipelineBarrier(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "p", Mode: ModePipeline, Tasks: []TaskSpec{
		{Handler: "echo", Stage: 0}, {Handler: "echo", Stage: 0}, {Handler: "echo", Stage: 1},
	}})
	ids := o.lease(10, "w")
	if len(ids) != 2 {
		t.Fatalf("stage 0 leased %v; want 2 tasks", ids)
	}
	if err := o.report(ids[0], "w", true, false); err != nil {
		t.Fatal(err)
	}
	if got := o.lease(10, "w"); len(got) != 0 {
		t.Fatalf("stage 1 started before stage 0 finished: %v", got)
	}
	if err := o.report(ids[1], "w", true, false); err != nil {
		t.Fatal(err)
	}
	if got := o.lease(10, "w"); len(got) != 1 || got[0] != "p.2" {
		t.Fatalf("stage 1 leased %v; want [p.2]", got)
	}
}

func TestRetentionRemoves(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}})
	o.lease(1, "w")
	if err := o.report("g.0", "w", true, false); err != nil {
		t.Fatal(err)
	}
	o.advance(24 * time.Hour)
	if !o.s.HasGroup("g") {
		t.Fatal("group removed before retention")
	}
	o.advance(7 * 24 * time.Hour)
	if o.s.HasGroup("g") {
		t.Fatal("group kept after retention")
	}
}

func TestExpireHolders(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{{Handler: "echo"}, {Handler: "echo"}}})
	o.lease(1, "dead")
	o.lease(1, "alive")
	o.commit(o.s.ExpireHolders(o.now, func(h string) bool { return h == "dead" })...)
	if got := o.state("g.0"); got != Ready {
		t.Errorf("dead holder's task = %v; want READY", got)
	}
	if got := o.state("g.1"); got != Running {
		t.Errorf("live holder's task = %v; want RUNNING", got)
	}
	if v, _ := o.s.Task("g.0"); v.Round != 1 {
		t.Errorf("round = %d; want 1 (the next lease makes it 2)", v.Round)
	}
}

// TestExpiredKeepsItsPlace: a task whose lease ended without an attempt
// (a dead holder) goes back to its place in the queue, before the tasks
// that were READY behind it, on a replica restored from a snapshot too.
func TestExpiredKeepsItsPlace(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{{Handler: "echo"}, {Handler: "echo"}, {Handler: "echo"}}})
	if got := o.lease(1, "dead"); len(got) != 1 || got[0] != "g.0" {
		t.Fatalf("leased %v; want [g.0]", got)
	}
	o.commit(o.s.ExpireHolders(o.now, func(h string) bool { return h == "dead" })...)
	snap := o.s.Snapshot()
	restored, _ := New(DefaultConfig())
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	restored.SetLeader(true, o.now)
	if got := o.lease(1, "alive"); len(got) != 1 || got[0] != "g.0" {
		t.Errorf("leased %v after the expiry; want [g.0], the task that was first", got)
	}
	evs := restored.Lease(o.now, 1, "alive", nil)
	if len(evs) != 1 || evs[0].Task != "g.0" {
		t.Errorf("restored replica leased %v; want g.0", evs)
	}
}

// TestReplayDeterministic runs a random workload and checks that a replica
// applying the same log ends in the same state.
func TestReplayDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			o := newOwner(t)
			runRandom(o, rand.New(rand.NewPCG(seed, 0)), 30)
			cfg := DefaultConfig()
			replica, _ := New(cfg)
			replica.Apply(o.log)
			assertSameState(t, o.s, replica)
		})
	}
}

func runRandom(o *owner, r *rand.Rand, groups int) {
	for g := range groups {
		n := 1 + r.IntN(6)
		spec := GroupSpec{ID: GroupID(fmt.Sprintf("g%d-%d", len(o.log), g)), Mode: ModeDAG}
		for i := range n {
			ts := TaskSpec{Name: fmt.Sprint(i), Handler: "h", Priority: int32(r.IntN(3)),
				Retry: Retry{MaxAttempts: 1 + r.IntN(3), Backoff: time.Second}}
			if i > 0 && r.IntN(2) == 0 {
				ts.Deps = []string{fmt.Sprint(r.IntN(i))}
			}
			spec.Tasks = append(spec.Tasks, ts)
		}
		o.submit(spec)
		for range 3 {
			for _, id := range o.lease(1+r.IntN(4), "w") {
				switch r.IntN(5) {
				case 4: // its external worker died
					o.died(id, "w", Death(r.IntN(3)))
				case 0:
					_ = o.report(id, "w", false, r.IntN(2) == 0)
				case 1:
					evs, _ := o.s.Cancel(o.now, id.Group(), id, "t")
					o.commit(evs...)
				default:
					_ = o.report(id, "w", true, false)
				}
			}
			o.advance(time.Duration(r.IntN(3000)) * time.Millisecond)
		}
	}
}

func assertSameState(t *testing.T, a, b *Shard) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("groups: %d vs %d", a.Len(), b.Len())
	}
	for _, id := range sortedGroupIDs(a.groups) {
		ga, _ := a.Group(id)
		gb, err := b.Group(id)
		if err != nil || !reflect.DeepEqual(ga, gb) {
			t.Fatalf("group %s differs:\n%+v\n%+v", id, ga, gb)
		}
		for _, tv := range ga.Tasks {
			if da, db := a.Deaths(tv.ID), b.Deaths(tv.ID); da != db {
				t.Fatalf("deaths of %s: %+v vs %+v", tv.ID, da, db)
			}
			ha, _ := a.TaskEvents(tv.ID)
			hb, _ := b.TaskEvents(tv.ID)
			if !reflect.DeepEqual(ha, hb) {
				t.Fatalf("history of %s differs", tv.ID)
			}
		}
	}
	if a.ReadyLen() != b.ReadyLen() {
		t.Fatalf("ready: %d vs %d", a.ReadyLen(), b.ReadyLen())
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		spec  GroupSpec
		task  int
		field string
	}{
		{"no tasks", GroupSpec{ID: "g", Mode: ModeDAG}, -1, "tasks"},
		{"bad mode", GroupSpec{ID: "g", Mode: 9, Tasks: []TaskSpec{echo("a")}}, -1, "mode"},
		{"no handler", GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{{Name: "a"}}}, 0, "handler"},
		{"dup name", GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("a")}}, 1, "name"},
		{"unknown dep", GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "c")}}, 1, "deps"},
		{"cycle", GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a", "c"), echo("b", "a"), echo("c", "b")}}, 0, "deps"},
		{"self dep", GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a", "a")}}, 0, "deps"},
		{"deps in parallel", GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{echo("a"), echo("b", "a")}}, 1, "deps"},
		{"two singles", GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{echo(""), echo("")}}, -1, "tasks"},
		{"stage gap", GroupSpec{ID: "g", Mode: ModePipeline, Tasks: []TaskSpec{{Handler: "h"}, {Handler: "h", Stage: 2}, {Handler: "h", Stage: 2}}}, -1, "stages[1]"},
		{"negative timeout", GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h", Timeout: -1}}}, 0, "timeout"},
		{"timeout under the timers' resolution", GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{{Handler: "h"}, {Handler: "h", Timeout: MinTimeout - 1}}}, 1, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Task != tt.task || fe.Field != tt.field {
				t.Errorf("Validate() = %v; want field %q of task %d", err, tt.field, tt.task)
			}
		})
	}
	ok := GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "a"), echo("c", "a", "b")}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid dag: %v", err)
	}
	minimum := GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h", Timeout: MinTimeout}}}
	if err := minimum.Validate(); err != nil {
		t.Errorf("timeout of MinTimeout: %v", err)
	}
}

// TestSnapshotRestore checks that a snapshot taken mid-run restores the same
// state, and that the restored replica stays equal while the log goes on.
func TestSnapshotRestore(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		o := newOwner(t)
		runRandom(o, rand.New(rand.NewPCG(seed, 1)), 20)
		mid := len(o.log)
		snap := o.s.Snapshot()
		replica, _ := New(DefaultConfig())
		if err := replica.Restore(snap); err != nil {
			t.Fatalf("seed %d: Restore: %v", seed, err)
		}
		assertSameState(t, o.s, replica)
		if again := replica.Snapshot(); !reflect.DeepEqual(again, snap) {
			t.Fatalf("seed %d: snapshot of the restored state differs", seed)
		}
		for _, grown := range []int{0, 1, len(snap), 1 << 20} { // only the buffer differs
			if again := o.s.SnapshotGrown(grown); !reflect.DeepEqual(again, snap) {
				t.Fatalf("seed %d: SnapshotGrown(%d) differs from Snapshot", seed, grown)
			}
		}
		runRandom(o, rand.New(rand.NewPCG(seed, 2)), 10)
		replica.Apply(o.log[mid:])
		assertSameState(t, o.s, replica)
	}
}

// TestDecodeThenInstall: a snapshot decoded ahead (DecodeSnapshot) and
// installed later gives the state Restore gives, whatever is applied to the
// installing shard in between; the decoded state is spent by its Install,
// and the bytes it came from can change without changing it.
func TestDecodeThenInstall(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		o := newOwner(t)
		runRandom(o, rand.New(rand.NewPCG(seed, 1)), 20)
		snap := o.s.Snapshot()
		r, err := DecodeSnapshot(snap)
		if err != nil {
			t.Fatalf("seed %d: DecodeSnapshot: %v", seed, err)
		}
		clear(snap) // the decoded state shares nothing with its bytes
		replica, _ := New(DefaultConfig())
		replica.Apply(o.log[:len(o.log)/2]) // state the install replaces
		replica.Install(r)
		assertSameState(t, o.s, replica)
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("seed %d: a second Install of the same decoded snapshot did not panic", seed)
				}
			}()
			replica.Install(r)
		}()
	}
	for cut := range 12 {
		o := newOwner(t)
		runRandom(o, rand.New(rand.NewPCG(3, 3)), 5)
		snap := o.s.Snapshot()
		if r, err := DecodeSnapshot(snap[:cut*len(snap)/12]); err == nil || r != nil {
			t.Fatalf("DecodeSnapshot of %d/%d bytes: %v, %v", cut*len(snap)/12, len(snap), r, err)
		}
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	o := newOwner(t)
	runRandom(o, rand.New(rand.NewPCG(3, 3)), 5)
	snap := o.s.Snapshot()
	for cut := 0; cut < len(snap); cut += 1 + len(snap)/50 {
		s, _ := New(DefaultConfig())
		if err := s.Restore(snap[:cut]); err == nil {
			t.Fatalf("Restore of %d/%d bytes succeeded", cut, len(snap))
		}
	}
}

func FuzzRestore(f *testing.F) {
	o := newOwner(f)
	runRandom(o, rand.New(rand.NewPCG(4, 4)), 3)
	f.Add(o.s.Snapshot())
	f.Fuzz(func(t *testing.T, p []byte) {
		s, _ := New(DefaultConfig())
		if err := s.Restore(p); err != nil {
			return
		}
		s2, _ := New(DefaultConfig())
		if err := s2.Restore(s.Snapshot()); err != nil {
			t.Fatalf("re-restore: %v", err)
		}
	})
}

// TestRestoreThenReleaseDependents catches a restore that miscounts unmet
// dependencies: after a snapshot taken while a dependency runs, its success
// must release the dependent on the restored replica too.
func TestRestoreThenReleaseDependents(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{echo("a"), echo("b", "a")}})
	o.lease(1, "w")
	mid := len(o.log)
	replica, _ := New(DefaultConfig())
	if err := replica.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := o.report("g.0", "w", true, false); err != nil {
		t.Fatal(err)
	}
	replica.Apply(o.log[mid:])
	v, _ := replica.Task("g.1")
	if v.State != Ready {
		t.Fatalf("dependent on the restored replica = %v; want READY", v.State)
	}
}

func TestInitialLeases(t *testing.T) {
	o := newOwner(t)
	spec := GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{
		echo("a"), {Name: "b", Handler: "echo", Priority: 5}, echo("c", "a"), {Name: "d", Handler: "echo", Delay: time.Second},
	}}
	ev, _, err := o.s.Submit(o.now, &spec)
	if err != nil {
		t.Fatal(err)
	}
	leases := InitialLeases(o.now, &spec, 5, "w", time.Minute, time.Second)
	if len(leases) != 2 || leases[0].Task != "g.1" || leases[1].Task != "g.0" {
		t.Fatalf("InitialLeases = %+v; want g.1 (priority 5) then g.0", leases)
	}
	o.commit(append([]Event{ev}, leases...)...)
	for id, want := range map[TaskID]State{"g.0": Running, "g.1": Running, "g.2": Pending, "g.3": Waiting} {
		if got := o.state(id); got != want {
			t.Errorf("%s = %v; want %v", id, got, want)
		}
	}
	if o.s.ReadyLen() != 0 {
		t.Errorf("ready queue holds %d; want 0", o.s.ReadyLen())
	}
}

func TestAuditTrail(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{echo("a"), echo("b")}})
	evs, _ := o.s.Cancel(o.now, "g", "g.0", "alice")
	o.commit(evs...)
	evs, _ = o.s.Cancel(o.now, "g", "", "bob")
	o.commit(evs...)
	got := o.s.Audit()
	if len(got) != 2 || got[0].Subject != "g.0" || got[0].By != "alice" || got[1].Subject != "g" || got[1].By != "bob" {
		t.Fatalf("Audit() = %+v; want alice canceling g.0, then bob canceling g", got)
	}
	r, _ := New(DefaultConfig())
	if err := r.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Audit(), got) {
		t.Fatalf("restored audit = %+v; want %+v", r.Audit(), got)
	}
}

// A drain or a forget of a peer goes into the audit trail, naming the
// peer, through the codec and a snapshot, and changes nothing else (a
// group that happens to bear the peer's id is not touched).
func TestAuditPeerActions(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "n2", Mode: ModeSingle, Tasks: []TaskSpec{echo("a")}})
	evs := []Event{{Type: EvPeerDrained, At: t0, Group: "n2", By: "token:ops"}, {Type: EvPeerForgotten, At: t0, Group: "n3", By: "10.0.0.1:5"}}
	b, err := DecodeBatch(AppendBatch(nil, &Batch{Events: evs}))
	if err != nil || len(b.Events) != 2 || b.Events[0].Type != EvPeerDrained || b.Events[1].Group != "n3" {
		t.Fatalf("decoded %+v, %v", b.Events, err)
	}
	o.commit(b.Events...)
	got := o.s.Audit()
	if len(got) != 2 || got[0].Type.String() != "peer_drained" || got[0].Subject != "n2" || got[0].By != "token:ops" ||
		got[1].Type.String() != "peer_forgotten" || got[1].Subject != "n3" {
		t.Fatalf("Audit() = %+v; want the drain of n2, then the forget of n3", got)
	}
	if v, _ := o.s.Group("n2"); v.State != GroupRunning || v.Counts[Ready] != 1 {
		t.Fatalf("group n2 after the peer actions = %v %v; want untouched", v.State, v.Counts)
	}
	r, _ := New(DefaultConfig())
	if err := r.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Audit(), got) {
		t.Fatalf("restored audit = %+v; want %+v", r.Audit(), got)
	}
}

// TestRetentionReplicasAgree: removals change the finish list on every
// replica alike, so the owner's snapshot and a replica's are the same
// bytes; a dropped removal proposal is proposed again, not forgotten.
func TestRetentionReplicasAgree(t *testing.T) {
	o := newOwner(t)
	for i := range 5 {
		id := GroupID(fmt.Sprintf("g%d", i))
		o.submit(GroupSpec{ID: id, Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}})
		o.lease(1, "w")
		if err := o.report(TaskIDOf(id, 0), "w", true, false); err != nil {
			t.Fatal(err)
		}
		o.now = o.now.Add(time.Hour)
	}
	o.now = o.now.Add(7*24*time.Hour - 3*time.Hour)
	dropped := o.s.Due(o.now) // g0..g2 are due; the proposal is lost
	if len(dropped) != 3 {
		t.Fatalf("due removals = %d, want 3", len(dropped))
	}
	if again := o.s.Due(o.now); len(again) != 0 {
		t.Fatalf("removals in flight proposed twice: %v", again)
	}
	o.s.Unlease(dropped)
	o.advance(0) // proposes g0..g2 again, and they apply
	if o.s.HasGroup("g0") || o.s.HasGroup("g2") || !o.s.HasGroup("g3") {
		t.Fatal("wrong groups removed")
	}
	replica, _ := New(DefaultConfig())
	replica.Apply(o.log)
	if a, b := o.s.Snapshot(), replica.Snapshot(); !bytes.Equal(a, b) {
		t.Fatalf("owner and replica snapshots differ after removals (%d vs %d bytes)", len(a), len(b))
	}
	o.advance(7 * 24 * time.Hour)
	replica.Apply(o.log[len(o.log)-2:])
	if o.s.Len() != 0 || replica.Len() != 0 || !bytes.Equal(o.s.Snapshot(), replica.Snapshot()) {
		t.Fatalf("after every removal: owner %d groups, replica %d", o.s.Len(), replica.Len())
	}
}

// A snapshot's holders are interned while it decodes (a few peers' runs
// hold every task), up to maxHolders distinct ones at a time (a holderSet,
// as the shard's own). Either way the restored state is the owner's,
// histories plain or not.
func TestDecodeInternsHolders(t *testing.T) {
	o := newOwner(t)
	tasks := make([]TaskSpec, maxHolders+1000)
	for i := range tasks {
		tasks[i] = echo(fmt.Sprint("t", i))
	}
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: tasks})
	for i := range tasks {
		holder := fmt.Sprintf("peer-%d#1", i%(maxHolders+500))
		for _, id := range o.lease(1, holder) {
			if err := o.report(id, holder, i%7 != 0, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	replica, _ := New(DefaultConfig())
	if err := replica.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	assertSameState(t, o.s, replica)
	same, shared := 0, 0
	seen := map[string]*byte{}
	for _, g := range replica.groups {
		for _, tk := range g.tasks {
			for _, e := range tk.history {
				if e.holder == "" {
					continue
				}
				if p, ok := seen[e.holder]; ok {
					same++
					if p == unsafe.StringData(e.holder) {
						shared++
					}
				} else {
					seen[e.holder] = unsafe.StringData(e.holder)
				}
			}
		}
	}
	if same == 0 || shared == 0 {
		t.Fatalf("%d repeated holders in kept histories, %d of them shared", same, shared)
	}
}

// ReadyAtSubmit counts what a submission makes READY, in every mode: the
// node holds a creation back only when its leases take all of those.
func TestReadyAtSubmit(t *testing.T) {
	for _, spec := range specsCases() {
		o := newOwner(t)
		want := ReadyAtSubmit(&spec)
		o.submit(spec)
		if got := o.s.ReadyLen(); got != want {
			t.Errorf("%s (%v): %d READY after its submission; ReadyAtSubmit = %d", spec.ID, spec.Mode, got, want)
		}
	}
}

// A task counts the external workers that died holding its lease, those
// that held it alone apart; an outcome clears the count, and a snapshot
// carries it (as version 6; as 5, which older peers read, while no task
// has any).
func TestWorkerDeathMarks(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{{Handler: "h"}}})
	check := func(want Deaths) {
		t.Helper()
		if got := o.s.Deaths("g.0"); got != want {
			t.Fatalf("Deaths = %+v; want %+v", got, want)
		}
		snap := o.s.Snapshot()
		version := byte(5)
		if want.Total() > 0 {
			version = 6
		}
		if snap[0] != version {
			t.Fatalf("snapshot version %d; want %d", snap[0], version)
		}
		replica, _ := New(DefaultConfig())
		if err := replica.Restore(snap); err != nil {
			t.Fatal(err)
		}
		assertSameState(t, o.s, replica)
	}
	lease := func() {
		t.Helper()
		if got := o.lease(1, "w"); len(got) != 1 || got[0] != "g.0" {
			t.Fatalf("leased %v; want g.0", got)
		}
	}
	check(Deaths{})
	lease()
	o.died("g.0", "w", DiedWithOthers)
	check(Deaths{Shared: 1})
	lease()
	o.died("g.0", "w", DiedAlone)
	check(Deaths{Shared: 1, Alone: 1})
	lease()
	o.died("g.0", "w", 0) // handed back, no death: no change
	check(Deaths{Shared: 1, Alone: 1})
	lease()
	o.died("g.0", "w", DiedAlone)
	check(Deaths{Shared: 1, Alone: 2})
	lease()
	if err := o.report("g.0", "w", false, true); err != nil {
		t.Fatal(err)
	}
	check(Deaths{})
	o.submit(GroupSpec{ID: "s", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}})
	id := TaskID("s.0")
	for i := range 2*maxAlone + 6 {
		if got := o.lease(1, "w"); len(got) != 1 || got[0] != id {
			t.Fatalf("leased %v", got)
		}
		o.died(id, "w", Death(1+i%2))
	}
	if got := o.s.Deaths(id); got != (Deaths{Shared: maxShared, Alone: maxAlone}) {
		t.Errorf("after many deaths: %+v; want both counts saturated", got)
	}
	for _, d := range []Deaths{{}, {Shared: 3}, {Alone: 63}, {Shared: 2, Alone: 5}} {
		if got := DeathsOf(d.Mark()); got != d {
			t.Errorf("DeathsOf(%+v.Mark()) = %+v", d, got)
		}
	}
}
