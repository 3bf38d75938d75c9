package shard

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// everyNext is a Config.Next for tests: Every ticks aligned to multiples of
// the interval; cron "hourly" ticks on the hour.
func everyNext(sp *ScheduleSpec, after time.Time) (time.Time, error) {
	if sp.Every > 0 {
		return after.Truncate(sp.Every).Add(sp.Every), nil
	}
	return after.Truncate(time.Hour).Add(time.Hour), nil
}

func newSchedOwner(tb testing.TB) *owner {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	cfg.Next = everyNext
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.SetLeader(true, t0)
	return &owner{tb: tb, s: s, now: t0}
}

func testSchedule(id ScheduleID, every time.Duration, ov Overlap, mf Misfire) ScheduleSpec {
	return ScheduleSpec{ID: id, Name: "n", Every: every, Overlap: ov, Misfire: mf,
		Group: GroupSpec{Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}}}
}

func (o *owner) setSchedule(sp ScheduleSpec) {
	o.tb.Helper()
	ev, exists, err := o.s.SetSchedule(o.now, &sp, "alice")
	if err != nil || exists {
		o.tb.Fatalf("SetSchedule = %v, %v", exists, err)
	}
	o.commit(ev)
}

// tick advances the owner's clock to at and commits what Due proposes.
func (o *owner) tick(at time.Time) []Event {
	o.now = at
	evs := o.s.Due(at)
	o.commit(evs...)
	return evs
}

func TestScheduleFires(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	v, _ := o.s.Schedule("s1")
	if want := t0.Add(10 * time.Second); !v.Next.Equal(want) {
		t.Fatalf("next = %v, want %v", v.Next, want)
	}
	if evs := o.tick(t0.Add(5 * time.Second)); len(evs) != 0 {
		t.Fatalf("early Due = %v", evs)
	}
	evs := o.tick(t0.Add(10 * time.Second))
	if len(evs) != 2 || evs[0].Type != EvScheduleFired || evs[1].Type != EvSubmitted {
		t.Fatalf("Due = %+v", evs)
	}
	gid := FiringGroupID("s1", t0.Add(10*time.Second))
	if evs[1].Group != gid || !o.s.HasGroup(gid) {
		t.Fatalf("firing group %s missing (event %s)", gid, evs[1].Group)
	}
	o.tick(t0.Add(20 * time.Second))
	v, _ = o.s.Schedule("s1")
	if len(v.Firings) != 2 || v.Firings[1].Group != FiringGroupID("s1", t0.Add(20*time.Second)) || !v.Firings[0].Exists {
		t.Fatalf("firings = %+v", v.Firings)
	}
	if !v.Next.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("next = %v", v.Next)
	}
	if o.s.Len() != 2 {
		t.Fatalf("groups = %d, want 2", o.s.Len())
	}
}

func TestScheduleDuplicateFiredIsNoop(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	evs := o.tick(t0.Add(10 * time.Second))
	before := o.s.Snapshot()
	// The same firing again (another leader's proposal of the same tick).
	o.commit(evs...)
	if after := o.s.Snapshot(); !bytes.Equal(before, after) {
		t.Fatal("a duplicate firing changed the state")
	}
	// A stale firing of another tick does not create its group either.
	stale := FiringGroupID("s1", t0.Add(5*time.Second))
	o.commit(Event{Type: EvScheduleFired, At: o.now, Group: stale, NotBefore: t0.Add(5 * time.Second), Expiry: t0.Add(time.Hour)},
		Event{Type: EvSubmitted, At: o.now, Group: stale, Spec: &GroupSpec{ID: stale, Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}}})
	if o.s.HasGroup(stale) {
		t.Fatal("a fenced firing created its group")
	}
	v, _ := o.s.Schedule("s1")
	if len(v.Firings) != 1 || !v.Next.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("schedule moved: %+v", v)
	}
}

func TestScheduleOverlapSkip(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapSkip, MisfireOnce))
	o.tick(t0.Add(10 * time.Second))
	o.lease(1, "p#1") // the first firing's task runs
	evs := o.tick(t0.Add(20 * time.Second))
	if len(evs) != 1 || evs[0].Type != EvScheduleFired || evs[0].By != firedSkipped {
		t.Fatalf("Due while running = %+v", evs)
	}
	v, _ := o.s.Schedule("s1")
	if len(v.Firings) != 2 || !v.Firings[1].Skipped || v.Firings[1].Group != "" {
		t.Fatalf("firings = %+v", v.Firings)
	}
	// Once the group finished, the next tick fires.
	first := FiringGroupID("s1", t0.Add(10*time.Second))
	if err := o.report(TaskIDOf(first, 0), "p#1", true, false); err != nil {
		t.Fatal(err)
	}
	if evs := o.tick(t0.Add(30 * time.Second)); len(evs) != 2 {
		t.Fatalf("Due after finish = %+v", evs)
	}
}

func TestScheduleMisfire(t *testing.T) {
	for _, mf := range []Misfire{MisfireOnce, MisfireSkip} {
		t.Run(mf.String(), func(t *testing.T) {
			o := newSchedOwner(t)
			o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, mf))
			now := t0.Add(time.Hour + 5*time.Second) // down for an hour
			evs := o.tick(now)
			v, _ := o.s.Schedule("s1")
			if !v.Next.Equal(t0.Add(time.Hour + 10*time.Second)) {
				t.Fatalf("next = %v", v.Next)
			}
			switch mf {
			case MisfireOnce:
				latest := FiringGroupID("s1", t0.Add(time.Hour))
				if len(evs) != 2 || evs[1].Group != latest || len(v.Firings) != 1 || o.s.Len() != 1 {
					t.Fatalf("Due = %+v firings %+v", evs, v.Firings)
				}
			case MisfireSkip:
				if len(evs) != 1 || len(v.Firings) != 0 || o.s.Len() != 0 {
					t.Fatalf("Due = %+v firings %+v", evs, v.Firings)
				}
			}
		})
	}
}

// A tick handled a few seconds late (an owner's failover) is not
// downtime: it fires, even under misfire: skip. Late by more than half the
// period (at least 1 s, at most 1 min) it is downtime, and skip fires none.
func TestScheduleMisfireTolerance(t *testing.T) {
	for _, c := range []struct {
		every, late time.Duration
		fires       bool
	}{
		{10 * time.Second, 3 * time.Second, true},  // a failover
		{10 * time.Second, 5 * time.Second, true},  // half the period
		{10 * time.Second, 6 * time.Second, false}, // past half the period
		{time.Second, time.Second, true},           // at least 1 s
		{time.Second, 1100 * time.Millisecond, false},
		{time.Hour, 59 * time.Second, true}, // at most a minute
		{time.Hour, 61 * time.Second, false},
	} {
		o := newSchedOwner(t)
		o.setSchedule(testSchedule("s1", c.every, OverlapAllow, MisfireSkip))
		v, _ := o.s.Schedule("s1")
		due := v.Next
		evs := o.tick(due.Add(c.late))
		if fired := len(evs) == 2 && evs[1].Group == FiringGroupID("s1", due); fired != c.fires {
			t.Errorf("every %v handled %v late: fired %v (%+v); want %v", c.every, c.late, fired, evs, c.fires)
		}
	}
	// A cron schedule's period is the time to its next tick (the test's
	// cron is hourly: a minute's tolerance).
	o := newSchedOwner(t)
	sp := testSchedule("c1", 0, OverlapAllow, MisfireSkip)
	sp.Cron, sp.TZ = "hourly", "UTC"
	o.setSchedule(sp)
	v, _ := o.s.Schedule("c1")
	if evs := o.tick(v.Next.Add(59 * time.Second)); len(evs) != 2 {
		t.Errorf("cron tick 59 s late = %+v; want it fired", evs)
	}
	v, _ = o.s.Schedule("c1")
	if evs := o.tick(v.Next.Add(61 * time.Second)); len(evs) != 1 {
		t.Errorf("cron tick 61 s late = %+v; want it missed", evs)
	}
}

func TestSchedulePauseResumeDelete(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	evs, err := o.s.PauseSchedule(o.now, "s1", true, "me")
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	o.commit(evs...)
	if evs := o.tick(t0.Add(time.Minute)); len(evs) != 0 {
		t.Fatalf("Due while paused = %+v", evs)
	}
	evs, _ = o.s.PauseSchedule(o.now, "s1", false, "me")
	o.commit(evs...)
	v, _ := o.s.Schedule("s1")
	if v.Paused || !v.Next.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("resumed = %+v", v)
	}
	if evs := o.tick(t0.Add(70 * time.Second)); len(evs) != 2 {
		t.Fatalf("Due after resume = %+v", evs)
	}
	ev, err := o.s.DeleteSchedule(o.now, "s1", "me")
	if err != nil {
		t.Fatal(err)
	}
	o.commit(ev)
	if o.s.HasSchedule("s1") || len(o.tick(t0.Add(80*time.Second))) != 0 {
		t.Fatal("deleted schedule still fires")
	}
	if _, err := o.s.DeleteSchedule(o.now, "s1", "me"); err != ErrNotFound {
		t.Fatalf("delete again = %v", err)
	}
}

func TestScheduleValidate(t *testing.T) {
	o := newSchedOwner(t)
	bad := testSchedule("s1", 0, OverlapAllow, MisfireOnce)
	if _, _, err := o.s.SetSchedule(o.now, &bad, ""); err == nil {
		t.Fatal("no cron nor every accepted")
	}
	bad = testSchedule("s1", time.Second, OverlapAllow, MisfireOnce)
	bad.Group.Tasks[0].Handler = ""
	_, _, err := o.s.SetSchedule(o.now, &bad, "")
	if fe, ok := err.(*FieldError); !ok || fe.Field != "group.tasks[0].handler" {
		t.Fatalf("err = %v", err)
	}
}

func TestScheduleSnapshotAndReplay(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapSkip, MisfireOnce))
	sp := testSchedule("s2", 0, OverlapAllow, MisfireSkip)
	sp.Cron, sp.TZ = "hourly", "UTC"
	o.setSchedule(sp)
	for i := 1; i <= 30; i++ {
		o.tick(t0.Add(time.Duration(i) * 5 * time.Minute))
	}
	snap := o.s.Snapshot()
	r, _ := New(o.s.Config())
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) || !reflect.DeepEqual(r.Schedules(), o.s.Schedules()) {
		t.Fatal("snapshot round trip differs")
	}
	// Replay of the log on a fresh replica gives the same state.
	rep, _ := New(o.s.Config())
	rep.Apply(o.log)
	if !bytes.Equal(rep.Snapshot(), snap) {
		t.Fatal("replay differs")
	}
	// The restored leader keeps firing on time.
	r.SetLeader(true, o.now)
	if evs := r.Due(o.now.Add(time.Hour)); len(evs) == 0 {
		t.Fatal("restored schedules do not fire")
	}
	// Version 1 (no schedules) and 2 (no audit trail) snapshots still
	// restore: an empty state ends with the schedule and audit counts.
	e, _ := New(DefaultConfig())
	v3 := e.Snapshot()
	v1 := append([]byte{1}, v3[1:len(v3)-2]...)
	if err := r.Restore(v1); err != nil || r.ScheduleLen() != 0 {
		t.Fatalf("restore v1 = %v (%d schedules)", err, r.ScheduleLen())
	}
	v2 := append([]byte{2}, v3[1:len(v3)-1]...)
	if err := r.Restore(v2); err != nil || r.ScheduleLen() != 0 {
		t.Fatalf("restore v2 = %v (%d schedules)", err, r.ScheduleLen())
	}
}

// A resume proposed on a clock behind the last fired tick (another owner's
// clock, or one back from a restart) must not fire that tick again. Found
// by the simulator: needle simulate --seed 201 --peers 3 --tasks 40
// --workload mixed (and seeds 268; 68 with --peers 5).
func TestScheduleResumeBehindLastTick(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", time.Second, OverlapAllow, MisfireOnce))
	if evs := o.tick(t0.Add(5 * time.Second)); len(evs) != 2 {
		t.Fatalf("Due = %+v", evs)
	}
	evs, _ := o.s.PauseSchedule(o.now, "s1", true, "me")
	o.commit(evs...)
	// The next owner's clock is 2 s behind.
	o.s.SetLeader(false, o.now)
	o.now = t0.Add(3 * time.Second)
	o.s.SetLeader(true, o.now)
	evs, err := o.s.PauseSchedule(o.now, "s1", false, "me")
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	o.commit(evs...)
	for sec := 3; sec <= 8; sec++ {
		o.tick(t0.Add(time.Duration(sec) * time.Second))
	}
	v, _ := o.s.Schedule("s1")
	seen := map[time.Time]bool{}
	for _, f := range v.Firings {
		if seen[f.At] {
			t.Fatalf("tick %v fired twice: %+v", f.At, v.Firings)
		}
		seen[f.At] = true
	}
	if len(v.Firings) < 3 {
		t.Fatalf("firings = %+v", v.Firings)
	}
}

// TestScheduledBroadcast: a broadcast template is accepted as a schedule's
// group (one unpinned task), and each firing expands it through
// Config.Expand to the peers matching then, in the firing's own entry;
// a firing no peer matches is recorded as skipped, and a manual trigger
// says why.
func TestScheduledBroadcast(t *testing.T) {
	o := newSchedOwner(t)
	peers := []string{"a", "b"}
	o.s.cfg.Expand = func(g *GroupSpec) error {
		if len(peers) == 0 {
			return &FieldError{Task: 0, Field: "require", Message: "no live peer"}
		}
		tmpl := g.Tasks[0]
		g.Tasks = nil
		for _, p := range peers {
			ts := tmpl
			ts.Name, ts.Pin = p, p
			g.Tasks = append(g.Tasks, ts)
		}
		return nil
	}
	sp := testSchedule("b1", 10*time.Second, OverlapAllow, MisfireOnce)
	sp.Group.Mode = ModeBroadcast
	for _, bad := range []TaskSpec{{Handler: "echo", Pin: "a"}, {Handler: "echo", Name: "x"}} {
		b := sp
		b.Group.Tasks = []TaskSpec{bad}
		if _, _, err := o.s.SetSchedule(o.now, &b, "alice"); err == nil {
			t.Errorf("template %+v accepted", bad)
		}
	}
	two := sp
	two.Group.Tasks = []TaskSpec{{Handler: "echo"}, {Handler: "echo"}}
	if _, _, err := o.s.SetSchedule(o.now, &two, "alice"); err == nil {
		t.Error("a broadcast schedule of two templates accepted")
	}
	o.setSchedule(sp)
	evs := o.tick(t0.Add(10 * time.Second))
	if len(evs) != 2 || evs[1].Type != EvSubmitted || len(evs[1].Spec.Tasks) != 2 || evs[1].Spec.Tasks[1].Pin != "b" {
		t.Fatalf("firing = %+v", evs)
	}
	g, err := o.s.Group(evs[1].Group)
	if err != nil || len(g.Tasks) != 2 || g.Tasks[0].Pin != "a" {
		t.Fatalf("fired group = %+v, %v", g, err)
	}
	peers = nil
	evs = o.tick(t0.Add(20 * time.Second))
	if len(evs) != 1 || evs[0].Type != EvScheduleFired || evs[0].By != firedSkipped {
		t.Fatalf("firing with no peer = %+v; want one skipped firing", evs)
	}
	if _, _, err := o.s.TriggerSchedule(o.now, "b1", "k1", "alice"); err == nil || !strings.Contains(err.Error(), "no live peer") {
		t.Fatalf("trigger with no peer: %v", err)
	}
	v, _ := o.s.Schedule("b1")
	if n := len(v.Firings); n != 2 || !v.Firings[1].Skipped {
		t.Fatalf("firings = %+v", v.Firings)
	}
	// Replicas apply the firings' entries: no Expand needed there.
	rep, _ := New(DefaultConfig())
	rep.Apply(o.log)
	if !bytes.Equal(rep.Snapshot(), o.s.Snapshot()) {
		t.Fatal("a replica replaying the log differs")
	}
}

// TestScheduleSkippedWithoutNewWork: while the owner takes no new work
// (short of disk or memory), a due firing is recorded skipped and creates
// nothing; the next tick after it takes work again fires.
func TestScheduleSkippedWithoutNewWork(t *testing.T) {
	o := newSchedOwner(t)
	admit := false
	o.s.cfg.Admit = func() bool { return admit }
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	evs := o.tick(t0.Add(10 * time.Second))
	if len(evs) != 1 || evs[0].Type != EvScheduleFired || evs[0].By != firedSkipped {
		t.Fatalf("firing without new work = %+v; want one skipped firing", evs)
	}
	admit = true
	evs = o.tick(t0.Add(20 * time.Second))
	if len(evs) != 2 || evs[1].Type != EvSubmitted {
		t.Fatalf("firing with work taken again = %+v; want a firing and its group", evs)
	}
	v, _ := o.s.Schedule("s1")
	if n := len(v.Firings); n != 2 || !v.Firings[0].Skipped || v.Firings[1].Skipped {
		t.Fatalf("firings = %+v", v.Firings)
	}
}

// A schedule's key (its id derives from it) answers a repeat of the request
// that created it with the schedule, paused or resumed since, here and on
// a replica restored from a snapshot; another request with the same key is
// a conflict naming key, as for groups.
func TestScheduleKeyRepeatAndConflict(t *testing.T) {
	o := newSchedOwner(t)
	sp := testSchedule("s1", 10*time.Second, OverlapSkip, MisfireOnce)
	sp.Paused = true
	o.setSchedule(sp)
	evs, _ := o.s.PauseSchedule(o.now, "s1", false, "me") // resumed since
	o.commit(evs...)
	r, _ := New(o.s.Config())
	if err := r.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Shard{"owner": o.s, "restored": r} {
		again := sp
		if _, exists, err := s.SetSchedule(o.now, &again, "bob"); !exists || err != nil {
			t.Errorf("%s: the same request = %v, %v; want the schedule, no error", name, exists, err)
		}
		other := sp
		other.Every, other.Name = time.Hour, "other"
		_, _, err := s.SetSchedule(o.now, &other, "bob")
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Field != "key" {
			t.Errorf("%s: another request, same key = %v; want a conflict naming key", name, err)
		}
	}
}
