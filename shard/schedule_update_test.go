package shard

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func (o *owner) update(sp ScheduleSpec, base uint64) []Event {
	o.tb.Helper()
	evs, err := o.s.UpdateSchedule(o.now, &sp, base, "token:ops")
	if err != nil {
		o.tb.Fatalf("UpdateSchedule = %v", err)
	}
	o.commit(evs...)
	return evs
}

// An update changes the settings in place: the id, creation time, firings
// and pause state stay; the next tick is recomputed from the new settings;
// the audit trail names who changed what; replicas and snapshots agree.
func TestScheduleUpdate(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	o.tick(t0.Add(10 * time.Second))
	o.tick(t0.Add(20 * time.Second))
	before, _ := o.s.Schedule("s1")
	rev := ScheduleRevision(&before.Spec)

	o.now = t0.Add(25 * time.Second)
	sp := before.Spec
	sp.Name, sp.Every, sp.Misfire = "renamed", time.Minute, MisfireSkip
	sp.Group.Tasks = []TaskSpec{{Handler: "other"}}
	evs := o.update(sp, rev)
	if len(evs) != 1 || evs[0].Type != EvScheduleUpdated {
		t.Fatalf("events = %+v", evs)
	}
	v, _ := o.s.Schedule("s1")
	if v.Spec.Name != "renamed" || v.Spec.Every != time.Minute || v.Spec.Misfire != MisfireSkip || v.Spec.Group.Tasks[0].Handler != "other" {
		t.Fatalf("spec not updated: %+v", v.Spec)
	}
	if want, _ := everyNext(&v.Spec, o.now); !v.Next.Equal(want) {
		t.Fatalf("next = %v, want %v (recomputed from the new interval)", v.Next, want)
	}
	if !reflect.DeepEqual(v.Firings, before.Firings) || !v.CreatedAt.Equal(before.CreatedAt) || v.Paused {
		t.Fatalf("history or state lost:\n%+v\nwas\n%+v", v, before)
	}
	if ScheduleRevision(&v.Spec) == rev {
		t.Fatal("revision unchanged")
	}
	a := o.s.Audit()
	if last := a[len(a)-1]; last.Type != EvScheduleUpdated || last.Subject != "s1" || last.By != "token:ops" || last.Fields != "name,every,misfire,group" {
		t.Fatalf("audit = %+v", last)
	}
	// The next firing follows the new settings.
	fired := o.tick(v.Next)
	if len(fired) != 2 || fired[1].Spec.Tasks[0].Handler != "other" {
		t.Fatalf("firing after the update = %+v", fired)
	}

	// A replica replaying the log, and a restored snapshot (version 7:
	// the audit entry's fields), hold the same state.
	snap := o.s.Snapshot()
	if snap[0] != 7 {
		t.Fatalf("snapshot version %d, want 7", snap[0])
	}
	rep, _ := New(o.s.Config())
	rep.Apply(o.log)
	if !bytes.Equal(rep.Snapshot(), snap) {
		t.Fatal("replay differs")
	}
	r, _ := New(o.s.Config())
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) || !reflect.DeepEqual(r.Audit(), o.s.Audit()) || !reflect.DeepEqual(r.Schedules(), o.s.Schedules()) {
		t.Fatal("snapshot round trip differs")
	}
}

func TestScheduleUpdateKeepsPause(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	evs, _ := o.s.PauseSchedule(o.now, "s1", true, "alice")
	o.commit(evs...)
	sp := testSchedule("s1", time.Hour, OverlapAllow, MisfireOnce)
	sp.Paused = false // ignored: an update does not resume
	o.update(sp, 0)
	v, _ := o.s.Schedule("s1")
	if !v.Paused || !v.Next.IsZero() || v.Spec.Every != time.Hour {
		t.Fatalf("after an update of a paused schedule: %+v", v)
	}
	if evs := o.tick(t0.Add(2 * time.Hour)); len(evs) != 0 {
		t.Fatalf("a paused schedule fired after its update: %+v", evs)
	}
	o.now = t0.Add(2*time.Hour + time.Minute)
	evs, _ = o.s.PauseSchedule(o.now, "s1", false, "alice")
	o.commit(evs...)
	v, _ = o.s.Schedule("s1")
	if want := t0.Add(3 * time.Hour).Truncate(time.Hour); v.Paused || !v.Next.Equal(want) {
		t.Fatalf("resumed: next %v, want %v (the new interval)", v.Next, want)
	}
}

// A tick of the old settings due now and not fired yet is dropped, as is
// one of the new settings due exactly now; a firing in flight when the
// update commits is fenced.
func TestScheduleUpdateDueNow(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	v, _ := o.s.Schedule("s1")
	due := v.Next
	o.now = due
	inflight := o.s.Due(due) // proposed, not committed yet
	if len(inflight) != 2 {
		t.Fatalf("Due = %+v", inflight)
	}
	sp := testSchedule("s1", 5*time.Second, OverlapAllow, MisfireOnce) // ticks at due too
	o.update(sp, 0)
	o.commit(inflight...)
	if o.s.HasGroup(inflight[1].Group) {
		t.Fatal("the firing in flight across the update created its group")
	}
	v, _ = o.s.Schedule("s1")
	if !v.Next.Equal(due.Add(5*time.Second)) || len(v.Firings) != 0 {
		t.Fatalf("next %v (want %v), firings %+v", v.Next, due.Add(5*time.Second), v.Firings)
	}
	// The leader's new timer fires the new tick.
	if evs := o.tick(v.Next); len(evs) != 2 {
		t.Fatalf("Due at the new tick = %+v", evs)
	}
}

// The next tick is after the last fired one: a new setting whose tick
// falls on a second that already fired would name the same group.
func TestScheduleUpdateAfterLastFiring(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	v, _ := o.s.Schedule("s1")
	last := v.Next
	o.tick(last)
	o.now = last.Add(-time.Second) // another owner's clock, behind
	o.update(testSchedule("s1", 5*time.Second, OverlapAllow, MisfireOnce), 0)
	v, _ = o.s.Schedule("s1")
	if !v.Next.After(last) {
		t.Fatalf("next %v is not after the last firing %v", v.Next, last)
	}
}

func TestScheduleUpdateRefused(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	cur, _ := o.s.Schedule("s1")
	rev := ScheduleRevision(&cur.Spec)
	sp := testSchedule("s1", time.Minute, OverlapAllow, MisfireOnce)
	if _, err := o.s.UpdateSchedule(o.now, &sp, rev^2, "x"); !errors.Is(err, ErrRevision) {
		t.Fatalf("stale revision: %v", err)
	}
	missing := testSchedule("s2", time.Minute, OverlapAllow, MisfireOnce)
	if _, err := o.s.UpdateSchedule(o.now, &missing, 0, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
	bad := sp
	bad.Overlap = 9
	var fe *FieldError
	if _, err := o.s.UpdateSchedule(o.now, &bad, 0, "x"); !errors.As(err, &fe) || fe.Field != "overlap" {
		t.Fatalf("invalid spec: %v", err)
	}
	same := cur.Spec
	if evs, err := o.s.UpdateSchedule(o.now, &same, rev, "x"); err != nil || len(evs) != 0 {
		t.Fatalf("no change = %v, %v; want no event", evs, err)
	}
	// Two updates proposed from one revision: the second is fenced at
	// apply (the first changed the revision).
	a, _ := o.s.UpdateSchedule(o.now, &sp, rev, "x")
	sp2 := testSchedule("s1", 2*time.Minute, OverlapAllow, MisfireOnce)
	b, _ := o.s.UpdateSchedule(o.now, &sp2, rev, "y")
	o.commit(a...)
	o.commit(b...)
	if v, _ := o.s.Schedule("s1"); v.Spec.Every != time.Minute {
		t.Fatalf("the fenced update applied: every %v", v.Spec.Every)
	}
	// Both requests are in the audit trail; only the one that took
	// effect names fields.
	trail := o.s.Audit()
	if n := len(trail); n < 2 || trail[n-2].By != "x" || trail[n-2].Fields != "every" || trail[n-1].By != "y" || trail[n-1].Fields != "" {
		t.Fatalf("audit = %+v", trail)
	}
}

func TestChangedFields(t *testing.T) {
	a := testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce)
	b := a
	b.Every, b.Cron, b.TZ, b.Overlap = 0, "@daily", "Europe/Paris", OverlapSkip
	b.Paused = true
	b.Group.ID = "ignored"
	if got := ChangedFields(&a, &b); !reflect.DeepEqual(got, []string{"cron", "every", "timezone", "overlap"}) {
		t.Fatalf("ChangedFields = %v", got)
	}
	if got := ChangedFields(&a, &a); len(got) != 0 {
		t.Fatalf("ChangedFields of equal specs = %v", got)
	}
}
