package shard

import (
	"strconv"
	"strings"
	"time"
)

// Manual firings ("trigger")
//
// TriggerSchedule fires a schedule now, by hand, without moving its next
// regular tick. The firing's group id is
//
//	<schedule id>~<unix seconds of the trigger>~<tag>
//
// A regular tick's group id has no second '~', so the two never collide,
// whatever the clock. The tag names the request (an idempotency key's hash,
// or a nonce the edge draws once per request): a trigger whose tag is
// already among the schedule's recorded firings is a repeat and creates
// nothing, on the owner (TriggerSchedule answers with the earlier group)
// and again at apply (two proposals of the same tag race only there). Like
// a regular firing, the EvScheduleTriggered and the EvSubmitted of its
// group are one entry; the group is created only when the trigger applied
// (firedOK). A paused schedule may be triggered (an operator's manual run);
// the pause stays. A manual firing counts as the previous firing for
// overlap=skip.

// MaxTriggerTag bounds a trigger's tag.
const MaxTriggerTag = 64

// TriggeredGroupID returns the group id of a manual firing of schedule id
// at at with tag.
func TriggeredGroupID(id ScheduleID, at time.Time, tag string) GroupID {
	return GroupID(string(id) + "~" + strconv.FormatInt(at.Unix(), 10) + "~" + tag)
}

// ParseTriggeredGroupID splits a manual firing's group id; ok is false for
// any other group id (a regular firing's included).
func ParseTriggeredGroupID(g GroupID) (id ScheduleID, at time.Time, tag string, ok bool) {
	s := string(g)
	i := strings.IndexByte(s, '~')
	if i <= 0 {
		return "", time.Time{}, "", false
	}
	j := strings.IndexByte(s[i+1:], '~')
	if j < 0 {
		return "", time.Time{}, "", false
	}
	sec, err := strconv.ParseInt(s[i+1:i+1+j], 10, 64)
	tag = s[i+2+j:]
	if err != nil || !validTag(tag) {
		return "", time.Time{}, "", false
	}
	return ScheduleID(s[:i]), time.Unix(sec, 0).UTC(), tag, true
}

// validTag reports whether tag may end a manual firing's group id: 1 to
// MaxTriggerTag letters, digits, '-' or '_'.
func validTag(tag string) bool {
	if tag == "" || len(tag) > MaxTriggerTag {
		return false
	}
	for _, c := range []byte(tag) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// isFiringGroup reports whether g is the group of a schedule's firing,
// regular or manual: such a group is created only by the entry that fires
// it (apply checks firedOK).
func isFiringGroup(g GroupID) bool {
	if _, _, ok := ParseFiringGroupID(g); ok {
		return true
	}
	_, _, _, ok := ParseTriggeredGroupID(g)
	return ok
}

// TriggerSchedule returns the events firing schedule id now, by hand, for
// the request named by tag; by names who asked (audit). When a firing with
// this tag is already recorded it returns no events and that firing's
// group (a repeated request). Unknown schedule: ErrNotFound.
func (s *Shard) TriggerSchedule(now time.Time, id ScheduleID, tag, by string) ([]Event, GroupID, error) {
	sc := s.schedules[id]
	if sc == nil {
		return nil, "", ErrNotFound
	}
	if !validTag(tag) {
		return nil, "", &FieldError{Task: -1, Field: "key", Message: "invalid trigger tag " + strconv.Quote(tag)}
	}
	if g, ok := sc.triggered(tag); ok {
		return nil, g, nil
	}
	gid := TriggeredGroupID(id, now, tag)
	if s.groups[gid] != nil {
		return nil, gid, nil
	}
	g, err := s.firingSpec(sc, gid)
	if err != nil {
		return nil, "", err
	}
	return []Event{
		{Type: EvScheduleTriggered, At: now, Group: gid, By: by},
		{Type: EvSubmitted, At: now, Group: gid, Spec: &g},
	}, gid, nil
}

// triggered returns the recorded manual firing with tag, if any.
func (sc *schedule) triggered(tag string) (GroupID, bool) {
	for _, f := range sc.firings {
		if _, _, t, ok := ParseTriggeredGroupID(f.group); ok && t == tag {
			return f.group, true
		}
	}
	return "", false
}

// applyTriggered folds an EvScheduleTriggered: the firing is recorded and
// its group (the next event of the entry) may be created, unless a firing
// with the same tag was recorded before (a repeat: fenced).
func (s *Shard) applyTriggered(sc *schedule, e *Event) {
	sid, _, tag, ok := ParseTriggeredGroupID(e.Group)
	if !ok || sid != sc.spec.ID {
		return
	}
	if _, dup := sc.triggered(tag); dup || s.groups[e.Group] != nil {
		return
	}
	sc.record(firing{at: e.At, group: e.Group})
	s.firedOK = e.Group
}
