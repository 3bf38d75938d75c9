package shard

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func (o *owner) trigger(id ScheduleID, tag string) ([]Event, GroupID) {
	o.tb.Helper()
	evs, g, err := o.s.TriggerSchedule(o.now, id, tag, "alice")
	if err != nil {
		o.tb.Fatalf("TriggerSchedule(%s, %s) = %v", id, tag, err)
	}
	return evs, g
}

// A manual firing creates its group now, with an id no regular tick can
// have, records who asked, and leaves the next regular tick where it was.
func TestTriggerFiresNowKeepsNextTick(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapAllow, MisfireOnce))
	o.now = t0.Add(3 * time.Second)
	evs, gid := o.trigger("s1", "k1")
	if len(evs) != 2 || evs[0].Type != EvScheduleTriggered || evs[1].Type != EvSubmitted || evs[1].Group != gid {
		t.Fatalf("TriggerSchedule = %+v", evs)
	}
	if want := TriggeredGroupID("s1", o.now, "k1"); gid != want || gid == FiringGroupID("s1", o.now) {
		t.Fatalf("group id = %s; want %s", gid, want)
	}
	o.commit(evs...)
	if !o.s.HasGroup(gid) {
		t.Fatal("the triggered group does not exist")
	}
	v, _ := o.s.Schedule("s1")
	if want := t0.Add(10 * time.Second); !v.Next.Equal(want) {
		t.Fatalf("next = %v after a trigger; want %v", v.Next, want)
	}
	if len(v.Firings) != 1 || v.Firings[0].Group != gid || !v.Firings[0].Manual || !v.Firings[0].At.Equal(o.now) {
		t.Fatalf("firings = %+v", v.Firings)
	}
	audit := o.s.Audit()
	if n := len(audit); n == 0 || audit[n-1].Type != EvScheduleTriggered || audit[n-1].By != "alice" || audit[n-1].Subject != string(gid) {
		t.Fatalf("audit = %+v", audit)
	}
	// The regular tick still fires, with its own group.
	evs = o.tick(t0.Add(10 * time.Second))
	if len(evs) != 2 || evs[1].Group != FiringGroupID("s1", t0.Add(10*time.Second)) || !o.s.HasGroup(evs[1].Group) {
		t.Fatalf("regular tick after a trigger = %+v", evs)
	}
}

// The same tag again (a retried request) creates nothing: on the owner it
// finds the earlier firing, and a second proposal that raced the first is
// fenced at apply, its group included.
func TestTriggerRepeatCreatesNothing(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", time.Hour, OverlapAllow, MisfireOnce))
	first, gid := o.trigger("s1", "k1")
	o.now = o.now.Add(2 * time.Second)
	raced, raceGid := o.trigger("s1", "k1") // proposed before the first applied
	if raceGid == gid {
		t.Fatal("a later trigger of the same tag got the same id: the apply fence is not exercised")
	}
	o.commit(first...)
	o.commit(raced...)
	if o.s.HasGroup(raceGid) {
		t.Fatalf("the raced repeat created %s", raceGid)
	}
	evs, again := o.trigger("s1", "k1")
	if len(evs) != 0 || again != gid {
		t.Fatalf("repeat = %+v, %s; want no events and %s", evs, again, gid)
	}
	v, _ := o.s.Schedule("s1")
	if len(v.Firings) != 1 {
		t.Fatalf("firings = %+v", v.Firings)
	}
	// Another tag fires again.
	o.now = o.now.Add(time.Second)
	evs, other := o.trigger("s1", "k2")
	o.commit(evs...)
	if other == gid || !o.s.HasGroup(other) {
		t.Fatalf("second trigger: %s exists=%v", other, o.s.HasGroup(other))
	}
}

// A triggered group's EvSubmitted alone (without its trigger in front)
// creates nothing; an unknown or deleted schedule is not found; a paused
// schedule may be triggered and stays paused.
func TestTriggerFencing(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", time.Hour, OverlapAllow, MisfireOnce))
	evs, gid := o.trigger("s1", "k1")
	o.commit(evs[1])
	if o.s.HasGroup(gid) {
		t.Fatal("a triggered group was created without its EvScheduleTriggered")
	}
	if _, _, err := o.s.TriggerSchedule(o.now, "nope", "k", "me"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
	if _, _, err := o.s.TriggerSchedule(o.now, "s1", "bad~tag", "me"); err == nil {
		t.Fatal("a tag with '~' was accepted")
	}
	p, _ := o.s.PauseSchedule(o.now, "s1", true, "me")
	o.commit(p...)
	evs, gid = o.trigger("s1", "k2")
	o.commit(evs...)
	if v, _ := o.s.Schedule("s1"); !o.s.HasGroup(gid) || !v.Paused {
		t.Fatalf("paused trigger: group %v paused %v", o.s.HasGroup(gid), v.Paused)
	}
	d, _ := o.s.DeleteSchedule(o.now, "s1", "me")
	o.commit(d)
	if _, _, err := o.s.TriggerSchedule(o.now, "s1", "k3", "me"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted schedule: %v", err)
	}
	// A trigger proposed before the deletion applied after it: fenced.
	o2 := newSchedOwner(t)
	o2.setSchedule(testSchedule("s1", time.Hour, OverlapAllow, MisfireOnce))
	evs, gid = o2.trigger("s1", "k1")
	d, _ = o2.s.DeleteSchedule(o2.now, "s1", "me")
	o2.commit(d)
	o2.commit(evs...)
	if o2.s.HasGroup(gid) {
		t.Fatal("a trigger applied after its schedule's deletion created its group")
	}
}

// Manual firings survive a snapshot, and the tag still dedupes after a
// restore; a replay of the log gives the same state.
func TestTriggerSnapshot(t *testing.T) {
	o := newSchedOwner(t)
	o.setSchedule(testSchedule("s1", 10*time.Second, OverlapSkip, MisfireOnce))
	o.now = t0.Add(time.Second)
	evs, gid := o.trigger("s1", "k1")
	o.commit(evs...)
	o.tick(t0.Add(10 * time.Second)) // the manual group still runs: overlap skip
	v, _ := o.s.Schedule("s1")
	if n := len(v.Firings); n != 2 || !v.Firings[1].Skipped {
		t.Fatalf("firings = %+v; want the regular tick skipped behind the running manual one", v.Firings)
	}
	snap := o.s.Snapshot()
	r, _ := New(o.s.Config())
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) {
		t.Fatal("snapshot round trip differs")
	}
	r.SetLeader(true, o.now)
	if evs, g, err := r.TriggerSchedule(o.now.Add(time.Minute), "s1", "k1", "me"); err != nil || len(evs) != 0 || g != gid {
		t.Fatalf("restored repeat = %+v, %s, %v", evs, g, err)
	}
	rep, _ := New(o.s.Config())
	rep.Apply(o.log)
	if !bytes.Equal(rep.Snapshot(), snap) {
		t.Fatal("replay differs")
	}
}

func TestParseTriggeredGroupID(t *testing.T) {
	at := time.Unix(1_700_000_123, 0).UTC()
	id, got, tag, ok := ParseTriggeredGroupID(TriggeredGroupID("sab", at, "x-1"))
	if !ok || id != "sab" || !got.Equal(at) || tag != "x-1" {
		t.Fatalf("parse = %s %v %s %v", id, got, tag, ok)
	}
	for _, g := range []GroupID{FiringGroupID("sab", at), "sab", "sab~1~", "sab~x~t", "~1~t", "sab~1~a~b"} {
		if _, _, _, ok := ParseTriggeredGroupID(g); ok {
			t.Errorf("ParseTriggeredGroupID(%s) ok", g)
		}
	}
	if _, _, ok := ParseFiringGroupID(TriggeredGroupID("sab", at, "t")); ok {
		t.Error("a manual firing parses as a regular one")
	}
}
