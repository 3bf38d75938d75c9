package api

import (
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
)

// cronGapSamples is how many consecutive ticks of a cron expression are
// looked at for its shortest interval: ticks close together (every second
// on Mondays) come in runs, and the first run shows its interval.
const cronGapSamples = 100

// shortestInterval returns the shortest time between two consecutive ticks
// of sp among its next ticks after now; 0 when it ticks at most once.
func shortestInterval(sp *shard.ScheduleSpec, now time.Time) time.Duration {
	if sp.Every > 0 {
		return sp.Every
	}
	prev, err := cron.Next(sp, now)
	if err != nil || prev.IsZero() {
		return 0
	}
	var gap time.Duration
	for range cronGapSamples {
		next, err := cron.Next(sp, prev)
		if err != nil || next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}

// checkScheduleRate refuses a schedule that ticks more often than
// lim.MinEvery (an interval, a cron expression with seconds, @every) or
// fires more than lim.MaxFiredPerMinute tasks in a minute (the tasks of
// one firing times the ticks that fit in a minute; a broadcast counts one
// task per firing, whatever the number of peers).
func checkScheduleRate(sp *shard.ScheduleSpec, lim Limits, now time.Time) error {
	field := "every"
	if sp.Cron != "" {
		field = "cron"
	}
	gap := shortestInterval(sp, now)
	if gap == 0 {
		return nil // fires at most once
	}
	if gap < lim.MinEvery {
		return fieldErr(field, "ticks every %s, under the minimum of %s (needled --min-every)", gap, lim.MinEvery)
	}
	perMinute := int64((time.Minute + gap - 1) / gap)
	if fired := perMinute * int64(len(sp.Group.Tasks)); fired > int64(lim.MaxFiredPerMinute) {
		return fieldErr(field, "fires %d tasks a minute (%d ticks of %d tasks), over the limit of %d (needled --max-fired-per-minute)",
			fired, perMinute, len(sp.Group.Tasks), lim.MaxFiredPerMinute)
	}
	return nil
}
