// Package cron computes schedule ticks: the shard.Config.Next that the
// daemon and the simulator give every partition, and the checks the HTTP
// API runs on a new schedule. It is the one place cron expressions are
// parsed (robfig/cron v3: 5 fields with an optional leading seconds field,
// and descriptors such as @daily) and "every" intervals are aligned.
//
// It is pure in the core's sense (no network, no goroutines, no wall
// clock, no global randomness): the time is an argument. The one read it
// makes is the time-zone database, through time.LoadLocation, the first
// time a zone is named; zones are cached for the life of the process.
// Only the owner of a partition calls Next, and the events carry its
// answers to the replicas, so two peers with different tz databases never
// disagree on a committed tick.
package cron

import (
	"errors"
	"fmt"
	"sync"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/needle-mesh/needle/shard"
)

// Sentinel errors, wrapped by Next and Parse.
var (
	// ErrZone is an unknown time zone.
	ErrZone = errors.New("unknown time zone")
	// ErrExpr is an expression robfig/cron does not parse.
	ErrExpr = errors.New("invalid cron expression")
)

// parser reads standard 5-field cron expressions, an optional leading
// seconds field, and descriptors (@daily, @hourly, ...). robfig/cron is a
// well-kept parser with time-zone-aware Next; we use only its parser.
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

var locations sync.Map // name -> *time.Location

// LoadLocation loads an IANA time zone ("" = UTC), cached.
func LoadLocation(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrZone, name, err)
	}
	locations.Store(name, l)
	return l, nil
}

// Parse reports whether expr is a cron expression Next accepts.
func Parse(expr string) error {
	if _, err := parser.Parse(expr); err != nil {
		return fmt.Errorf("%w %q: %v", ErrExpr, expr, err)
	}
	return nil
}

// Next is the shard's Config.Next: the first tick of sp strictly
// after after, in UTC; the zero time when the cron expression never fires
// again. Every ticks are aligned to multiples of the interval counted from
// time.Time's zero instant (January 1, year 1, UTC: time.Truncate), so
// every owner computes the same ticks; an interval that divides a day is
// thereby aligned to the Unix epoch too. A cron expression is
// matched against wall-clock times of its time zone (see nextWall): a
// wall time that does not exist (spring forward) fires once, at the first
// valid instant after it; one that exists twice (fall back) fires once, at
// its first occurrence.
func Next(sp *shard.ScheduleSpec, after time.Time) (time.Time, error) {
	if sp.Every > 0 {
		return after.UTC().Truncate(sp.Every).Add(sp.Every), nil
	}
	loc, err := LoadLocation(sp.TZ)
	if err != nil {
		return time.Time{}, err
	}
	s, err := parser.Parse(sp.Cron)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w %q: %v", ErrExpr, sp.Cron, err)
	}
	spec, ok := s.(*robfig.SpecSchedule)
	if !ok { // @every: a constant delay, no wall clock involved
		return s.Next(after.In(loc)).UTC(), nil
	}
	if spec.Location != time.Local { // a CRON_TZ= prefix names its own zone
		loc = spec.Location
	}
	return nextWall(spec, loc, after), nil
}

// maxWallSteps bounds the wall times nextWall skips because they already
// occurred (an every-second expression during a fall-back hour's second
// pass skips up to 3600).
const maxWallSteps = 1 << 14

// nextWall returns the first instant strictly after after at which spec
// matches a wall-clock time of loc. robfig/cron's own Next steps through
// instants in loc and gets daylight saving wrong (a 02:00 that does not
// exist is skipped for the day; a 02:30 that exists twice fires twice), so
// the expression is matched here against wall times written as UTC, which
// has no transitions, and each match is then placed in loc.
func nextWall(spec *robfig.SpecSchedule, loc *time.Location, after time.Time) time.Time {
	utc := *spec
	utc.Location = time.UTC
	w := wallOf(after.In(loc))
	for range maxWallSteps {
		w = utc.Next(w)
		if w.IsZero() {
			return w
		}
		if t := firstInstant(w, loc); t.After(after) {
			return t.UTC()
		}
	}
	return time.Time{}
}

// wallOf is t's wall-clock reading, written as a UTC time.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// firstInstant is the first instant whose wall clock in loc reads w (w
// written as UTC); when no instant does (a spring-forward gap), the
// instant the gap ends.
func firstInstant(w time.Time, loc *time.Location) time.Time {
	u := w.Unix()
	_, before := time.Unix(u-86400, 0).In(loc).Zone()
	_, after := time.Unix(u+86400, 0).In(loc).Zone()
	var best time.Time
	for _, off := range []int{before, after} {
		t := time.Unix(u-int64(off), 0).In(loc)
		if _, o := t.Zone(); o == off && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	if !best.IsZero() {
		return best
	}
	start, _ := time.Unix(u-int64(before), 0).In(loc).ZoneBounds()
	return start
}
