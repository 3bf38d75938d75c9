package node

import (
	"testing"
	"time"
)

// TestInstant checks that a member's instants give back the times they
// were made from: the zero time as "never", the base itself, times before
// and after it, with and without a monotonic clock reading.
func TestInstant(t *testing.T) {
	mono := time.Now() // with a monotonic reading, as the daemon's
	for _, base := range []time.Time{mono, mono.Round(0), time.Unix(1_700_000_000, 123).UTC(), {}} {
		m := &mesh{base: base}
		if got := m.instant(time.Time{}); got != 0 {
			t.Errorf("base %v: the zero time is instant %d; want 0", base, got)
		}
		if got := m.at(0); !got.IsZero() {
			t.Errorf("base %v: instant 0 is %v; want the zero time", base, got)
		}
		if base.IsZero() {
			base = base.Add(2 * time.Hour) // the zero time itself is "never"
		}
		var prev time.Time
		for i, d := range []time.Duration{-time.Hour, -time.Nanosecond, 0, time.Nanosecond, time.Second, 100 * 24 * time.Hour} {
			at := base.Add(d)
			i0 := m.instant(at)
			got := m.at(i0)
			if i0 == 0 || got.IsZero() {
				t.Errorf("base %v + %v: instant %d, time %v: taken for never", base, d, i0, got)
			}
			if !got.Equal(at) || got.Sub(at) != 0 || got.Sub(base) != at.Sub(base) {
				t.Errorf("base %v + %v: back as %v (%v from it)", base, d, got, got.Sub(at))
			}
			if i > 0 && (!got.After(prev) || !prev.Before(got)) {
				t.Errorf("base %v + %v: %v not after %v", base, d, got, prev)
			}
			prev = got
		}
	}
}

// TestInstantMonotonic checks that a time rebuilt from an instant keeps
// a monotonic clock reading when the base has one: the failure detector's
// comparisons with the daemon's nows stay on the monotonic clock.
func TestInstantMonotonic(t *testing.T) {
	base := time.Now()
	m := &mesh{base: base}
	at := m.at(m.instant(base.Add(time.Second)))
	// String shows "m=+..." only for a time with a monotonic reading.
	if s, want := at.String(), base.Add(time.Second).String(); s != want {
		t.Errorf("rebuilt %q; want %q", s, want)
	}
}
