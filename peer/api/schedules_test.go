package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
)

// fakeSchedules is a Backend with schedules kept in memory.
type fakeSchedules struct {
	fakeBackend
	created []*shard.ScheduleSpec
}

func (f *fakeSchedules) CreateSchedule(_ context.Context, spec *shard.ScheduleSpec, _, _ string) (shard.ScheduleView, bool, error) {
	spec.ID = "s1"
	f.created = append(f.created, spec)
	return shard.ScheduleView{Spec: *spec, Next: time.Unix(1_700_000_000, 0)}, true, nil
}
func (f *fakeSchedules) Schedule(context.Context, shard.ScheduleID) (shard.ScheduleView, error) {
	return shard.ScheduleView{}, shard.ErrNotFound
}
func (f *fakeSchedules) Schedules(context.Context) ([]shard.ScheduleView, error) { return nil, nil }
func (f *fakeSchedules) DeleteSchedule(context.Context, shard.ScheduleID, string) (shard.ScheduleView, error) {
	return shard.ScheduleView{}, shard.ErrNotFound
}
func (f *fakeSchedules) PauseSchedule(context.Context, shard.ScheduleID, bool, string) (shard.ScheduleView, error) {
	return shard.ScheduleView{}, shard.ErrNotFound
}

func TestCreateScheduleValidation(t *testing.T) {
	const group = `"group": {"tasks": [{"name": "a", "handler": "echo"}]}`
	tests := []struct {
		name, body, field string
	}{
		{"bad cron", `{"cron": "61 * * * *", ` + group + `}`, "cron"},
		{"cron and every", `{"cron": "* * * * *", "every": "1m", ` + group + `}`, "cron"},
		{"neither", `{` + group + `}`, "cron"},
		{"never fires", `{"cron": "0 0 30 2 *", ` + group + `}`, "cron"},
		{"bad tz", `{"cron": "0 2 * * *", "timezone": "Mars/Olympus", ` + group + `}`, "timezone"},
		{"every too short", `{"every": "999ms", ` + group + `}`, "every"},
		{"every overflows", `{"every": "2562047h", ` + group + `}`, "every"},
		{"group delay overflows", `{"every": "1s", "group": {"tasks": [{"name": "a", "handler": "echo", "delay": "2562047h"}]}}`, "group.tasks[0].delay"},
		{"group concurrency", `{"every": "1s", "group": {"mode": "pipeline", "stages": [{"name": "a", "handler": "echo", "concurrency": 2147483648}], "items": [1]}}`, "group.stages[0].concurrency"},
		{"every malformed", `{"every": "soon", ` + group + `}`, "every"},
		{"overlap", `{"every": "1s", "overlap": "maybe", ` + group + `}`, "overlap"},
		{"misfire", `{"every": "1s", "misfire": "all", ` + group + `}`, "misfire"},
		{"no group", `{"every": "1s"}`, "group"},
		{"group timeout under the minimum", `{"every": "1s", "group": {"tasks": [{"name": "a", "handler": "echo", "timeout": "1ns"}]}}`, "group.tasks[0].timeout"},
		{"group handler", `{"every": "1s", "group": {"tasks": [{"name": "a"}]}}`, "group.tasks[0].handler"},
		{"group cycle", `{"every": "1s", "group": {"tasks": [{"name": "a", "handler": "echo", "deps": ["a"]}]}}`, "group.tasks[0].deps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSchedules{}
			h := NewHandler(f, HandlerOptions{})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/schedules", strings.NewReader(tt.body)))
			var body ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusBadRequest || body.Error == nil || body.Error.Field != tt.field || body.Error.Code != CodeInvalidArgument {
				t.Fatalf("POST %s = %d %s; want 400 naming %q", tt.body, rec.Code, rec.Body, tt.field)
			}
			if len(f.created) != 0 {
				t.Fatal("a rejected schedule reached the backend")
			}
		})
	}
}

func TestCreateScheduleOK(t *testing.T) {
	f := &fakeSchedules{}
	h := NewHandler(f, HandlerOptions{})
	rec := httptest.NewRecorder()
	body := `{"name": "nightly", "cron": "0 2 * * *", "timezone": "Europe/Paris", "overlap": "allow",
		"group": {"mode": "parallel", "tasks": [{"handler": "echo"}]}}`
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/schedules", strings.NewReader(body)))
	if rec.Code != http.StatusCreated || len(f.created) != 1 {
		t.Fatalf("POST = %d %s", rec.Code, rec.Body)
	}
	sp := f.created[0]
	if sp.Cron != "0 2 * * *" || sp.TZ != "Europe/Paris" || sp.Overlap != shard.OverlapAllow || sp.Misfire != shard.MisfireOnce || len(sp.Group.Tasks) != 1 {
		t.Fatalf("spec = %+v", sp)
	}
	var s Schedule
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || s.ID != "s1" || s.Next == nil {
		t.Fatalf("body = %s (%v)", rec.Body, err)
	}
	// Next in Paris: 02:00 local.
	next, err := cron.Next(sp, time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC))
	if err != nil || !next.Equal(time.Date(2026, 1, 11, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("next = %v, %v", next, err)
	}
	// Six fields: seconds.
	sec := &shard.ScheduleSpec{Cron: "*/15 * * * * *"}
	if next, _ := cron.Next(sec, time.Date(2026, 1, 10, 12, 0, 1, 0, time.UTC)); !next.Equal(time.Date(2026, 1, 10, 12, 0, 15, 0, time.UTC)) {
		t.Fatalf("seconds next = %v", next)
	}
}

// TestScheduleRateLimits checks that --min-every holds for cron
// expressions (6 fields, @every) as for intervals, and the cap on the
// tasks a schedule fires per minute.
func TestScheduleRateLimits(t *testing.T) {
	lim := Limits{MinEvery: 10 * time.Second, MaxFiredPerMinute: 100}
	two := `"group": {"mode": "parallel", "tasks": [{"handler": "echo"}, {"handler": "echo"}]}`
	for _, tt := range []struct {
		name, body, field string
	}{
		{"cron with seconds", `{"cron": "*/5 * * * * *", ` + two + `}`, "cron"},
		{"every descriptor", `{"cron": "@every 0s", ` + two + `}`, "cron"},
		{"seconds on mondays", `{"cron": "* * * * * 1", ` + two + `}`, "cron"},
		{"interval", `{"every": "5s", ` + two + `}`, "every"},
		{"tasks per minute", `{"cron": "*/10 * * * * *", "group": {"mode": "parallel", "tasks": [` +
			strings.Repeat(`{"handler": "echo"}, `, 16) + `{"handler": "echo"}]}}`, "cron"},
		{"tasks per minute, interval", `{"every": "15s", "group": {"mode": "parallel", "tasks": [` +
			strings.Repeat(`{"handler": "echo"}, `, 25) + `{"handler": "echo"}]}}`, "every"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeSchedule(strings.NewReader(tt.body), lim)
			fe, ok := err.(*FieldError)
			if !ok || fe.Field != tt.field {
				t.Fatalf("DecodeSchedule = %v; want a FieldError naming %q", err, tt.field)
			}
		})
	}
	for _, body := range []string{
		`{"cron": "*/10 * * * * *", ` + two + `}`,
		`{"cron": "0 2 * * *", "group": {"mode": "parallel", "tasks": [` + strings.Repeat(`{"handler": "echo"}, `, 99) + `{"handler": "echo"}]}}`,
		`{"every": "1m", ` + two + `}`,
	} {
		if _, _, err := DecodeSchedule(strings.NewReader(body), lim); err != nil {
			t.Errorf("DecodeSchedule(%s) = %v; want nil", body, err)
		}
	}
}
