package api

import (
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/needle-mesh/needle/shard"
)

// cronParser reads standard 5-field cron expressions, an optional leading
// seconds field, and descriptors (@daily, @hourly, ...). robfig/cron is a
// well-kept parser with time-zone-aware Next; we use only its parser.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

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
		return nil, err
	}
	locations.Store(name, l)
	return l, nil
}

// ScheduleNext is the shard's Config.Next: the first tick of sp strictly
// after after, in UTC; the zero time when the cron expression never fires
// again. Every ticks are aligned to multiples of the interval since the
// Unix epoch, so every owner computes the same ticks.
func ScheduleNext(sp *shard.ScheduleSpec, after time.Time) (time.Time, error) {
	if sp.Every > 0 {
		return after.UTC().Truncate(sp.Every).Add(sp.Every), nil
	}
	loc, err := LoadLocation(sp.TZ)
	if err != nil {
		return time.Time{}, fmt.Errorf("timezone %q: %w", sp.TZ, err)
	}
	s, err := cronParser.Parse(sp.Cron)
	if err != nil {
		return time.Time{}, fmt.Errorf("cron %q: %w", sp.Cron, err)
	}
	t := s.Next(after.In(loc))
	if t.IsZero() {
		return t, nil
	}
	return t.UTC(), nil
}
