package cron

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// ticks returns the first n ticks of sp strictly after from, in UTC.
func ticks(t *testing.T, sp *shard.ScheduleSpec, from string, n int) []string {
	t.Helper()
	at, err := time.Parse(time.RFC3339, from)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range n {
		next, err := Next(sp, at)
		if err != nil {
			t.Fatal(err)
		}
		if !next.After(at) {
			t.Fatalf("Next(%+v, %v) = %v, not after it", sp, at, next)
		}
		out = append(out, next.UTC().Format(time.RFC3339))
		at = next
	}
	return out
}

// TestScheduleNextDaylightSaving: a wall time that does not exist (spring
// forward) fires once at the first valid instant after it; a wall time that
// exists twice (fall back) fires once, at its first occurrence.
func TestScheduleNextDaylightSaving(t *testing.T) {
	cases := []struct {
		name, tz, cron string
		from           string
		want           []string
	}{
		// Paris 2026-03-29: 02:00 CET -> 03:00 CEST at 01:00Z.
		{"paris spring 5f", "Europe/Paris", "0 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		{"paris spring 5f 02:30", "Europe/Paris", "30 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"paris spring 6f, several in the gap fire once", "Europe/Paris", "0 */15 2 * * *", "2026-03-29T00:50:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		// Paris 2026-10-25: 03:00 CEST -> 02:00 CET at 01:00Z.
		{"paris fall 5f", "Europe/Paris", "30 2 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"paris fall 6f", "Europe/Paris", "0 */30 2 * * *", "2026-10-24T23:59:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:00:00Z"}},
		{"paris fall, from the second pass", "Europe/Paris", "30 2 * * *", "2026-10-25T01:10:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		// New York 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00Z.
		{"new york spring 5f", "America/New_York", "30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"new york spring 6f", "America/New_York", "15 0 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:15Z"}},
		// New York 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z.
		{"new york fall 5f", "America/New_York", "30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york fall 6f", "America/New_York", "0 0 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-02T06:00:00Z"}},
		{"new york ordinary day", "America/New_York", "0 9 * * 1-5", "2026-11-01T12:00:00Z",
			[]string{"2026-11-02T14:00:00Z", "2026-11-03T14:00:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ticks(t, &shard.ScheduleSpec{Cron: c.cron, TZ: c.tz}, c.from, len(c.want))
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("%s in %s from %s: ticks %v; want %v", c.cron, c.tz, c.from, got, c.want)
				}
			}
		})
	}
}

// TestScheduleNextEveryAcrossDaylightSaving: every is real elapsed time,
// one tick per interval through both transitions, whatever the zone.
func TestScheduleNextEveryAcrossDaylightSaving(t *testing.T) {
	for _, tz := range []string{"Europe/Paris", "America/New_York"} {
		for _, from := range []string{"2026-03-28T22:00:00Z", "2026-10-24T22:00:00Z", "2026-03-08T04:00:00Z", "2026-11-01T03:00:00Z"} {
			got := ticks(t, &shard.ScheduleSpec{Every: time.Hour, TZ: tz}, from, 6)
			at, _ := time.Parse(time.RFC3339, from)
			for i, g := range got {
				if want := at.Add(time.Duration(i+1) * time.Hour).Format(time.RFC3339); g != want {
					t.Fatalf("every 1h in %s from %s: ticks %v; tick %d want %s", tz, from, got, i, want)
				}
			}
		}
	}
}
