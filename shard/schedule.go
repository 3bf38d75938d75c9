package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Schedules
//
// A schedule lives in the partition of its id, like a group, and every
// firing's group id is "<schedule id>~<fire time in unix seconds>": RouteKey
// maps both to the same partition, so a firing is one Raft entry holding the
// EvScheduleFired and the EvSubmitted of its group, applied atomically.
//
// Apply never parses cron expressions nor loads time zones: the owner
// computes every next fire time (Config.Next) when it proposes, and the
// event carries it (Expiry). EvScheduleFired is fenced by the schedule's
// current next time (NotBefore): a duplicate firing of the same tick, from
// another leader or a retried proposal, changes nothing, and the group of a
// firing that did not take effect is not created.

// ScheduleID names a schedule: "s" + 24 hex.
type ScheduleID string

// RouteKey returns the part of an id that decides its partition: the part
// before the first '~' (a schedule's firing groups route with their
// schedule), or the whole id.
func RouteKey(id string) string {
	if i := strings.IndexByte(id, '~'); i >= 0 {
		return id[:i]
	}
	return id
}

// FiringGroupID returns the group id of a schedule's firing at fire.
func FiringGroupID(id ScheduleID, fire time.Time) GroupID {
	return GroupID(string(id) + "~" + strconv.FormatInt(fire.Unix(), 10))
}

// ParseFiringGroupID splits a firing group id into its schedule and fire
// time; ok is false for any other group id.
func ParseFiringGroupID(g GroupID) (ScheduleID, time.Time, bool) {
	s := string(g)
	i := strings.IndexByte(s, '~')
	if i <= 0 {
		return "", time.Time{}, false
	}
	sec, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return ScheduleID(s[:i]), time.Unix(sec, 0).UTC(), true
}

// Overlap says what a firing does while the previous firing's group runs.
type Overlap uint8

const (
	OverlapSkip  Overlap = iota + 1 // no new firing while the previous group is not terminal
	OverlapAllow                    // fire regardless
)

// Misfire says what happens to ticks missed while no owner ran (downtime).
type Misfire uint8

const (
	MisfireOnce Misfire = iota + 1 // fire once for the latest missed tick
	MisfireSkip                    // fire none of them
)

var overlapNames = [...]string{"", "skip", "allow"}
var misfireNames = [...]string{"", "once", "skip"}

func (o Overlap) String() string {
	if int(o) < len(overlapNames) && o != 0 {
		return overlapNames[o]
	}
	return "Overlap(" + strconv.Itoa(int(o)) + ")"
}

func (m Misfire) String() string {
	if int(m) < len(misfireNames) && m != 0 {
		return misfireNames[m]
	}
	return "Misfire(" + strconv.Itoa(int(m)) + ")"
}

// ParseOverlap parses "skip" or "allow".
func ParseOverlap(s string) (Overlap, bool) {
	for i, n := range overlapNames {
		if i > 0 && n == s {
			return Overlap(i), true
		}
	}
	return 0, false
}

// ParseMisfire parses "once" or "skip".
func ParseMisfire(s string) (Misfire, bool) {
	for i, n := range misfireNames {
		if i > 0 && n == s {
			return Misfire(i), true
		}
	}
	return 0, false
}

// ScheduleSpec is a schedule as submitted. Exactly one of Cron and Every is
// set. Group is the template of every firing's group (its ID is empty).
type ScheduleSpec struct {
	ID      ScheduleID
	Name    string
	Cron    string        // 5 fields, or 6 with seconds first, or a descriptor (@daily)
	Every   time.Duration // fixed interval, ticks aligned to multiples of it (cron.Next)
	TZ      string        // IANA time zone of Cron; "" = UTC
	Overlap Overlap
	Misfire Misfire
	Group   GroupSpec
	Paused  bool
}

// Validate checks the structure of a schedule (not its cron syntax nor its
// time zone: Config.Next does that) and the bounds of its durations (Every
// at most MaxEvery, the group template's as GroupSpec.Validate).
func (sp *ScheduleSpec) Validate() error {
	if sp.Every > MaxEvery {
		return &FieldError{Task: -1, Field: "every", Message: fmt.Sprintf("%v is over the maximum of %v", sp.Every, MaxEvery)}
	}
	return sp.validate(false)
}

// ValidateStored checks what every committed schedule must satisfy to be
// applied and restored (see GroupSpec.ValidateStored).
func (sp *ScheduleSpec) ValidateStored() error { return sp.validate(true) }

func (sp *ScheduleSpec) validate(stored bool) error {
	switch {
	case sp.ID == "" || strings.IndexByte(string(sp.ID), '~') >= 0:
		return &FieldError{Task: -1, Field: "id", Message: fmt.Sprintf("invalid schedule id %q", sp.ID)}
	case (sp.Cron == "") == (sp.Every == 0):
		return &FieldError{Task: -1, Field: "cron", Message: "exactly one of cron and every is required"}
	case sp.Every < 0:
		return &FieldError{Task: -1, Field: "every", Message: "must not be negative"}
	case sp.Overlap != OverlapSkip && sp.Overlap != OverlapAllow:
		return &FieldError{Task: -1, Field: "overlap", Message: fmt.Sprintf("unknown overlap %d", sp.Overlap)}
	case sp.Misfire != MisfireOnce && sp.Misfire != MisfireSkip:
		return &FieldError{Task: -1, Field: "misfire", Message: fmt.Sprintf("unknown misfire %d", sp.Misfire)}
	}
	g := sp.Group
	g.ID = FiringGroupID(sp.ID, time.Unix(0, 0))
	if g.Mode == ModeBroadcast {
		// A template, expanded at each firing: validate one copy of it.
		if len(g.Tasks) != 1 {
			return &FieldError{Task: -1, Field: "group.tasks", Message: fmt.Sprintf("a broadcast takes one task template, not %d", len(g.Tasks))}
		}
		if t := g.Tasks[0]; t.Pin != "" || (t.Name != "" && t.Name != WorkersTemplate) {
			return &FieldError{Task: -1, Field: "group.tasks[0].pin", Message: "a scheduled broadcast's copies are named by and pinned to the peers matching at each firing"}
		}
		g.Tasks = []TaskSpec{g.Tasks[0]}
		g.Tasks[0].Pin, g.Tasks[0].Name = "template", "template"
	}
	validate := g.Validate
	if stored {
		validate = g.ValidateStored
	}
	if err := validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			c := *fe
			if c.Task >= 0 {
				c.Field = fmt.Sprintf("tasks[%d].%s", c.Task, c.Field)
			}
			c.Task, c.Field = -1, "group."+c.Field
			return &c
		}
		return err
	}
	return nil
}

// WorkersTemplate is the name of a scheduled broadcast's template that
// goes to external workers (the API's "to": "workers"): each firing
// expands it into one copy per live worker of its handler (Config.Expand),
// where a template to peers has no name. A name, not a field, so that the
// log and snapshot layouts do not change; a submitted broadcast's template
// never has a name.
const WorkersTemplate = "*workers"

// ToWorkers reports whether a schedule's broadcast template goes to
// external workers.
func ToWorkers(g *GroupSpec) bool {
	return g.Mode == ModeBroadcast && len(g.Tasks) == 1 && g.Tasks[0].Pin == "" && g.Tasks[0].Name == WorkersTemplate
}

// Firing is one recorded firing of a schedule.
type Firing struct {
	At      time.Time // the tick
	Group   GroupID   // the group it created; "" when skipped
	Skipped bool      // overlap skip (the previous group was still running), or a broadcast no live peer matched
	State   GroupState
	Exists  bool // the group is still held (not removed by retention)
	Manual  bool // fired by hand (TriggerSchedule): At is when it was asked
}

// ScheduleView is a read-only copy of a schedule's state.
type ScheduleView struct {
	Spec      ScheduleSpec
	Next      time.Time // zero when paused or when the cron never fires again
	Paused    bool
	CreatedAt time.Time
	Firings   []Firing // most recent last
}

// maxFirings bounds the firings kept per schedule.
const maxFirings = 20

// A tick handled late by no more than its miss tolerance counts as on
// time (it fires, whatever the misfire policy); later, it is downtime and
// the misfire policy applies. The tolerance is half the tick's period,
// at least minMissTolerance, so that an owner's failover (a few seconds
// under load) loses no tick of a misfire: skip schedule, and at most
// maxMissTolerance (Quartz's default misfire threshold).
const (
	minMissTolerance = time.Second
	maxMissTolerance = time.Minute
)

// missTolerance is how late the tick at fire may be handled and still
// count as on time: half the time to the tick after it, within
// [minMissTolerance, maxMissTolerance].
func (s *Shard) missTolerance(sc *schedule, fire time.Time) time.Duration {
	period := sc.spec.Every
	if period <= 0 {
		n, err := s.next(&sc.spec, fire)
		if err != nil || n.IsZero() {
			return maxMissTolerance // the last tick: no later one to run into
		}
		period = n.Sub(fire)
	}
	return min(max(period/2, minMissTolerance), maxMissTolerance)
}

// firedSkipped and firedMissed mark EvScheduleFired events (By) that create
// no group: an overlap skip (recorded) and a misfire skip (not recorded).
const (
	firedSkipped = "skipped"
	firedMissed  = "missed"
)

type schedule struct {
	spec    ScheduleSpec
	next    time.Time
	created time.Time
	firings []firing
}

type firing struct {
	at      time.Time
	group   GroupID
	skipped bool
}

// NextFunc computes the first fire time of spec strictly after after; the
// zero time when it never fires again.
type NextFunc func(spec *ScheduleSpec, after time.Time) (time.Time, error)

// ErrNoNext is returned by schedule commands when the shard has no
// Config.Next.
var ErrNoNext = errors.New("shard: schedules need Config.Next")

func (s *Shard) next(sp *ScheduleSpec, after time.Time) (time.Time, error) {
	if s.cfg.Next == nil {
		return time.Time{}, ErrNoNext
	}
	t, err := s.cfg.Next(sp, after)
	if err != nil {
		return time.Time{}, err
	}
	if !t.IsZero() && !t.After(after) {
		return time.Time{}, fmt.Errorf("shard: schedule %s: next %v is not after %v", sp.ID, t, after)
	}
	return t, nil
}

// SetSchedule checks spec and returns the event creating it. exists is
// true when a schedule with this id is already there (an idempotent
// repeat): then no event is returned.
//
// by names who asked, for the audit trail ("" = not recorded).
func (s *Shard) SetSchedule(now time.Time, spec *ScheduleSpec, by string) (ev Event, exists bool, err error) {
	if err := spec.Validate(); err != nil {
		return Event{}, false, err
	}
	if cur := s.schedules[spec.ID]; cur != nil {
		// A repeat of the request that created it (its key, from which
		// its id derives) is answered with it; another request with the
		// same key is a conflict, as for groups (CheckRepeat).
		if scheduleFingerprint(&cur.spec) != scheduleFingerprint(spec) {
			return Event{}, true, &ConflictError{Field: "key", Message: fmt.Sprintf(
				"the key was first used for a different schedule (%s); send that request again, or use a new key", spec.ID)}
		}
		return Event{}, true, nil
	}
	var next time.Time
	if !spec.Paused {
		if next, err = s.next(spec, now); err != nil {
			return Event{}, false, err
		}
	}
	cp := *spec
	cp.Group.ID = ""
	return Event{Type: EvScheduleSet, At: now, Group: GroupID(spec.ID), Sched: &cp, Expiry: next, By: by}, false, nil
}

// scheduleFingerprint identifies the request that created a schedule:
// its encoding, less what changes after (pausing, resuming) or is set by
// the owner (the group template's id).
func scheduleFingerprint(sp *ScheduleSpec) [sha256.Size]byte {
	c := *sp
	c.Paused, c.Group.ID = false, ""
	return sha256.Sum256(AppendScheduleSpec(nil, &c))
}

// ErrRevision is returned by UpdateSchedule when the schedule is not at the
// revision the update was based on: it changed in between.
var ErrRevision = errors.New("shard: the schedule changed since the revision given")

// ScheduleRevision identifies the settings of a schedule (what
// UpdateSchedule changes; not its pause state nor its firings): never 0,
// equal for equal settings.
func ScheduleRevision(sp *ScheduleSpec) uint64 {
	h := scheduleFingerprint(sp)
	return binary.BigEndian.Uint64(h[:8]) | 1
}

// ChangedFields names, in the API's vocabulary, the settings that differ
// between two schedules: name, cron, every, timezone, overlap, misfire,
// group.
func ChangedFields(old, cur *ScheduleSpec) []string {
	var out []string
	add := func(changed bool, name string) {
		if changed {
			out = append(out, name)
		}
	}
	add(old.Name != cur.Name, "name")
	add(old.Cron != cur.Cron, "cron")
	add(old.Every != cur.Every, "every")
	add(old.TZ != cur.TZ, "timezone")
	add(old.Overlap != cur.Overlap, "overlap")
	add(old.Misfire != cur.Misfire, "misfire")
	og, cg := old.Group, cur.Group
	og.ID, cg.ID = "", ""
	add(string(AppendGroupSpec(nil, &og)) != string(AppendGroupSpec(nil, &cg)), "group")
	return out
}

// UpdateSchedule checks spec, the new settings of schedule spec.ID, and
// returns the event that changes them in place: its id, pause state and
// firings stay. base, when not 0, is the ScheduleRevision the change was
// made from: another revision is ErrRevision (and the event is fenced on
// it again at apply). No event is returned when nothing changes.
//
// The next tick is recomputed from the new settings: the first strictly
// after now and after the last tick that fired (a firing group of that
// second exists already). A tick of the old settings not fired yet is
// dropped, as is one of the new settings due exactly now.
func (s *Shard) UpdateSchedule(now time.Time, spec *ScheduleSpec, base uint64, by string) ([]Event, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	sc := s.schedules[spec.ID]
	if sc == nil {
		return nil, ErrNotFound
	}
	if base != 0 && ScheduleRevision(&sc.spec) != base {
		return nil, ErrRevision
	}
	cp := *spec
	cp.Group.ID = ""
	cp.Paused = sc.spec.Paused
	if len(ChangedFields(&sc.spec, &cp)) == 0 {
		return nil, nil
	}
	after := now
	for i := len(sc.firings) - 1; i >= 0; i-- {
		if _, _, _, manual := ParseTriggeredGroupID(sc.firings[i].group); !manual {
			after = maxTime(after, sc.firings[i].at)
			break
		}
	}
	next, err := s.next(&cp, after)
	if err != nil {
		return nil, err
	}
	return []Event{{Type: EvScheduleUpdated, At: now, Group: GroupID(spec.ID), Sched: &cp, Expiry: next, Round: Round(ScheduleRevision(&sc.spec)), By: by}}, nil
}

// DeleteSchedule returns the event deleting schedule id. Its firings'
// groups stay.
func (s *Shard) DeleteSchedule(now time.Time, id ScheduleID, by string) (Event, error) {
	if s.schedules[id] == nil {
		return Event{}, ErrNotFound
	}
	return Event{Type: EvScheduleDeleted, At: now, Group: GroupID(id), By: by}, nil
}

// PauseSchedule returns the event pausing (pause) or resuming schedule id,
// or none when it already is in that state. Resuming computes the next
// tick after now: ticks missed while paused do not fire.
func (s *Shard) PauseSchedule(now time.Time, id ScheduleID, pause bool, by string) ([]Event, error) {
	sc := s.schedules[id]
	if sc == nil {
		return nil, ErrNotFound
	}
	if sc.spec.Paused == pause {
		return nil, nil
	}
	if pause {
		return []Event{{Type: EvSchedulePaused, At: now, Group: GroupID(id), By: by}}, nil
	}
	// Ticks before sc.next were handled before the pause: resuming on a
	// clock behind them (another owner's, or one that came back from a
	// restart behind) must not fire them again.
	after := now
	if t := sc.next.Add(-time.Nanosecond); !sc.next.IsZero() && t.After(after) {
		after = t
	}
	next, err := s.next(&sc.spec, after)
	if err != nil {
		return nil, err
	}
	return []Event{{Type: EvScheduleResumed, At: now, Group: GroupID(id), By: by, Expiry: next}}, nil
}

// HasSchedule reports whether schedule id exists.
func (s *Shard) HasSchedule(id ScheduleID) bool { return s.schedules[id] != nil }

// Schedule returns a view of schedule id.
func (s *Shard) Schedule(id ScheduleID) (ScheduleView, error) {
	sc := s.schedules[id]
	if sc == nil {
		return ScheduleView{}, ErrNotFound
	}
	return s.scheduleView(sc), nil
}

// Schedules returns a view of every schedule, sorted by id.
func (s *Shard) Schedules() []ScheduleView {
	out := make([]ScheduleView, 0, len(s.schedules))
	for _, id := range slices.Sorted(maps.Keys(s.schedules)) {
		out = append(out, s.scheduleView(s.schedules[id]))
	}
	return out
}

// ScheduleLen returns the number of schedules held.
func (s *Shard) ScheduleLen() int { return len(s.schedules) }

func (s *Shard) scheduleView(sc *schedule) ScheduleView {
	v := ScheduleView{Spec: sc.spec, Next: sc.next, Paused: sc.spec.Paused, CreatedAt: sc.created}
	v.Spec.Group.Tasks = slices.Clone(sc.spec.Group.Tasks)
	if sc.spec.Paused {
		v.Next = time.Time{}
	}
	v.Firings = make([]Firing, len(sc.firings))
	for i, f := range sc.firings {
		v.Firings[i] = Firing{At: f.at, Group: f.group, Skipped: f.skipped}
		_, _, _, v.Firings[i].Manual = ParseTriggeredGroupID(f.group)
		if g := s.groups[f.group]; g != nil && f.group != "" {
			v.Firings[i].State, v.Firings[i].Exists = g.state, true
		}
	}
	return v
}

// applySchedule folds a schedule event.
func (s *Shard) applySchedule(e *Event) {
	id := ScheduleID(RouteKey(string(e.Group)))
	if e.Type == EvScheduleSet {
		if e.Sched == nil || s.schedules[id] != nil || e.Sched.ID != id {
			return
		}
		if e.Sched.ValidateStored() != nil {
			s.rejected++ // malformed: it could not be restored (see applySubmitted)
			return
		}
		sc := &schedule{spec: *e.Sched, next: e.Expiry, created: e.At}
		s.schedules[id] = sc
		s.armSchedule(sc)
		return
	}
	sc := s.schedules[id]
	if sc == nil {
		return
	}
	switch e.Type {
	case EvScheduleDeleted:
		delete(s.schedules, id)
		if s.leader {
			delete(s.schedInflight, id)
		}
	case EvSchedulePaused:
		sc.spec.Paused = true
		if s.leader {
			delete(s.schedInflight, id)
		}
	case EvScheduleResumed:
		if !sc.spec.Paused {
			return
		}
		sc.spec.Paused = false
		sc.next = e.Expiry
		s.armSchedule(sc)
	case EvScheduleFired:
		if s.leader && s.schedInflight[id].Equal(e.NotBefore) {
			delete(s.schedInflight, id)
		}
		if sc.spec.Paused || sc.next.IsZero() || !sc.next.Equal(e.NotBefore) {
			return // a duplicate or stale firing: fenced
		}
		sc.next = e.Expiry
		switch e.By {
		case "":
			_, at, ok := ParseFiringGroupID(e.Group)
			if ok {
				sc.record(firing{at: at, group: e.Group})
				s.firedOK = e.Group
			}
		case firedSkipped:
			_, at, _ := ParseFiringGroupID(e.Group)
			sc.record(firing{at: at, skipped: true})
		}
		s.armSchedule(sc)
	case EvScheduleTriggered:
		s.applyTriggered(sc, e)
	case EvScheduleUpdated:
		if e.Sched == nil || e.Sched.ID != id || (e.Round != 0 && uint64(e.Round) != ScheduleRevision(&sc.spec)) {
			return // fenced: the schedule changed since the update was proposed
		}
		if e.Sched.ValidateStored() != nil {
			s.rejected++
			return
		}
		paused := sc.spec.Paused
		sc.spec = *e.Sched
		sc.spec.Paused = paused
		sc.next = e.Expiry
		if s.leader {
			delete(s.schedInflight, id)
		}
		s.armSchedule(sc)
	}
}

func (sc *schedule) record(f firing) {
	if len(sc.firings) >= maxFirings {
		sc.firings = append(sc.firings[:0], sc.firings[len(sc.firings)-maxFirings+1:]...)
	}
	sc.firings = append(sc.firings, f)
}

// armSchedule sets the leader's timer for the schedule's next tick.
func (s *Shard) armSchedule(sc *schedule) {
	if s.leader && !sc.spec.Paused && !sc.next.IsZero() {
		s.wheel.add(timer{at: sc.next.UnixNano(), kind: timerSchedule, sched: sc})
		s.dueMaybe()
	}
}

// dueSchedule returns the events of a schedule timer that fired at now.
func (s *Shard) dueSchedule(now time.Time, tm timer, evs []Event) []Event {
	sc := tm.sched
	id := sc.spec.ID
	if s.schedules[id] != sc || sc.spec.Paused || sc.next.IsZero() || sc.next.UnixNano() != tm.at {
		return evs // deleted, paused or moved on: a stale timer
	}
	if _, ok := s.schedInflight[id]; ok {
		return evs
	}
	fire := sc.next
	late := now.Sub(fire) > s.missTolerance(sc, fire)
	if late {
		// Downtime: the latest tick at or before now.
		fire = s.latestTick(sc, now)
	}
	next, err := s.next(&sc.spec, maxTime(now, fire))
	if err != nil {
		return evs // cannot happen for a spec that was accepted; the timer is dropped
	}
	ev := Event{Type: EvScheduleFired, At: now, Group: FiringGroupID(id, fire), NotBefore: sc.next, Expiry: next}
	switch {
	case late && sc.spec.Misfire == MisfireSkip:
		ev.By = firedMissed
	case sc.spec.Overlap == OverlapSkip && s.lastRunning(sc):
		ev.By = firedSkipped
	case s.cfg.Admit != nil && !s.cfg.Admit():
		ev.By = firedSkipped // the owner takes no new work: short of disk or memory
	}
	var g GroupSpec
	if ev.By == "" {
		var err error
		if g, err = s.firingSpec(sc, ev.Group); err != nil {
			ev.By = firedSkipped // a broadcast no live peer matches now
		}
	}
	s.schedInflight[id] = sc.next
	evs = append(evs, ev)
	if ev.By != "" {
		return evs
	}
	return append(evs, Event{Type: EvSubmitted, At: now, Group: g.ID, Spec: &g})
}

// firingSpec is the group a firing of sc creates, named gid: the
// schedule's template, a broadcast expanded to the peers matching now.
func (s *Shard) firingSpec(sc *schedule, gid GroupID) (GroupSpec, error) {
	g := sc.spec.Group
	g.ID = gid
	g.Key = ""
	if g.Trace == "" {
		g.Trace = string(gid)
	}
	g.Tasks = slices.Clone(g.Tasks)
	if g.Mode == ModeBroadcast {
		if s.cfg.Expand == nil {
			return GroupSpec{}, &FieldError{Task: -1, Field: "group.mode", Message: "this peer cannot expand a broadcast"}
		}
		if err := s.cfg.Expand(&g); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) && fe.Task >= 0 {
				// The request at fault is the schedule's template.
				c := *fe
				c.Task, c.Field = -1, fmt.Sprintf("group.tasks[%d].%s", fe.Task, fe.Field)
				return GroupSpec{}, &c
			}
			return GroupSpec{}, err
		}
	}
	return g, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// latestTick returns the last tick of sc at or before now (at least
// sc.next), stepping through at most 100,000 ticks.
func (s *Shard) latestTick(sc *schedule, now time.Time) time.Time {
	t := sc.next
	if e := sc.spec.Every; e > 0 {
		k := now.Sub(t) / e
		return t.Add(k * e)
	}
	for range 100_000 {
		n, err := s.next(&sc.spec, t)
		if err != nil || n.IsZero() || n.After(now) {
			break
		}
		t = n
	}
	return t
}

// lastRunning reports whether the last firing's group is still held and
// not terminal.
func (s *Shard) lastRunning(sc *schedule) bool {
	for i := len(sc.firings) - 1; i >= 0; i-- {
		f := sc.firings[i]
		if f.group == "" {
			continue
		}
		g := s.groups[f.group]
		return g != nil && !g.state.Terminal()
	}
	return false
}

// armSchedules sets a timer for every schedule (on becoming leader).
func (s *Shard) armSchedules() {
	s.schedInflight = make(map[ScheduleID]time.Time)
	for _, id := range slices.Sorted(maps.Keys(s.schedules)) {
		s.armSchedule(s.schedules[id])
	}
}
