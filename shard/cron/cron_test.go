package cron

import (
	"errors"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// TestNext: the five-field, six-field (seconds) and descriptor forms, a
// time zone, an aligned every, and an expression that never fires.
func TestNext(t *testing.T) {
	at := time.Date(2026, 1, 10, 12, 0, 1, 0, time.UTC)
	cases := []struct {
		name string
		sp   shard.ScheduleSpec
		want time.Time
	}{
		{"five fields in Paris", shard.ScheduleSpec{Cron: "0 2 * * *", TZ: "Europe/Paris"}, time.Date(2026, 1, 11, 1, 0, 0, 0, time.UTC)},
		{"seconds", shard.ScheduleSpec{Cron: "*/15 * * * * *"}, time.Date(2026, 1, 10, 12, 0, 15, 0, time.UTC)},
		{"descriptor", shard.ScheduleSpec{Cron: "@daily"}, time.Date(2026, 1, 11, 0, 0, 0, 0, time.UTC)},
		{"CRON_TZ prefix", shard.ScheduleSpec{Cron: "CRON_TZ=America/New_York 0 9 * * *"}, time.Date(2026, 1, 10, 14, 0, 0, 0, time.UTC)},
		{"every, aligned to the epoch", shard.ScheduleSpec{Every: 7 * time.Minute}, time.Date(2026, 1, 10, 12, 4, 0, 0, time.UTC)},
		{"never fires", shard.ScheduleSpec{Cron: "0 0 30 2 *"}, time.Time{}},
	}
	for _, c := range cases {
		got, err := Next(&c.sp, at)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%s: Next = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// TestErrors: a bad expression or zone is refused by Parse, LoadLocation
// and Next, with the package's sentinel.
func TestErrors(t *testing.T) {
	if err := Parse("0 2 * *"); !errors.Is(err, ErrExpr) {
		t.Errorf("Parse(4 fields) = %v; want ErrExpr", err)
	}
	if err := Parse("0 2 * * *"); err != nil {
		t.Errorf("Parse(5 fields) = %v", err)
	}
	if _, err := LoadLocation("Mars/Olympus"); !errors.Is(err, ErrZone) {
		t.Errorf("LoadLocation(Mars/Olympus) = %v; want ErrZone", err)
	}
	if l, err := LoadLocation(""); err != nil || l != time.UTC {
		t.Errorf(`LoadLocation("") = %v, %v; want UTC`, l, err)
	}
	if _, err := Next(&shard.ScheduleSpec{Cron: "bad"}, time.Unix(0, 0)); !errors.Is(err, ErrExpr) {
		t.Errorf("Next(bad) = %v; want ErrExpr", err)
	}
	if _, err := Next(&shard.ScheduleSpec{Cron: "0 2 * * *", TZ: "Mars/Olympus"}, time.Unix(0, 0)); !errors.Is(err, ErrZone) {
		t.Errorf("Next(Mars) = %v; want ErrZone", err)
	}
}
