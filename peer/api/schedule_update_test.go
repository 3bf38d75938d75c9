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
)

// fakeUpdates holds one schedule, s1, and records the updates that reach
// it.
type fakeUpdates struct {
	fakeSchedules
	cur     shard.ScheduleSpec
	updates []*shard.ScheduleSpec
	bases   []uint64
}

func newFakeUpdates() *fakeUpdates {
	return &fakeUpdates{cur: shard.ScheduleSpec{ID: "s1", Name: "nightly", Every: time.Minute, Overlap: shard.OverlapSkip,
		Misfire: shard.MisfireOnce, Paused: true, Group: shard.GroupSpec{Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Name: "t", Handler: "echo"}}}}}
}

func (f *fakeUpdates) Schedule(_ context.Context, id shard.ScheduleID) (shard.ScheduleView, error) {
	if id != f.cur.ID {
		return shard.ScheduleView{}, shard.ErrNotFound
	}
	return shard.ScheduleView{Spec: f.cur, Paused: f.cur.Paused}, nil
}

func (f *fakeUpdates) UpdateSchedule(_ context.Context, spec *shard.ScheduleSpec, base uint64, _ string) (shard.ScheduleView, error) {
	f.updates, f.bases = append(f.updates, spec), append(f.bases, base)
	if base != 0 && base != shard.ScheduleRevision(&f.cur) {
		return shard.ScheduleView{}, shard.ErrRevision
	}
	f.cur = *spec
	return shard.ScheduleView{Spec: f.cur, Paused: f.cur.Paused}, nil
}

func patch(h http.Handler, id, body string, header ...string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("PATCH", "/v1/schedules/"+id, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	h.ServeHTTP(rec, req)
	return rec
}

func TestUpdateScheduleValidation(t *testing.T) {
	lim := Limits{MinEvery: 10 * time.Second, MaxFiredPerMinute: 100}
	for _, tt := range []struct{ name, body, field string }{
		{"empty body", ``, ""},
		{"empty object", `{}`, ""},
		{"unknown field", `{"crom": "* * * * *"}`, "crom"},
		{"key", `{"key": "k"}`, "key"},
		{"paused", `{"paused": true}`, "paused"},
		{"cron and every", `{"cron": "* * * * *", "every": "1m"}`, "every"},
		{"bad cron", `{"cron": "61 * * * *"}`, "cron"},
		{"empty cron", `{"cron": ""}`, "cron"},
		{"never fires", `{"cron": "0 0 30 2 *"}`, "cron"},
		{"cron too often", `{"cron": "*/5 * * * * *"}`, "cron"},
		{"bad tz", `{"timezone": "Mars/Olympus"}`, "timezone"},
		{"every malformed", `{"every": "soon"}`, "every"},
		{"every under min-every", `{"every": "5s"}`, "every"},
		{"every over 366 days", `{"every": "8785h"}`, "every"},
		{"overlap", `{"overlap": "maybe"}`, "overlap"},
		{"misfire", `{"misfire": "all"}`, "misfire"},
		{"name too long", `{"name": "` + strings.Repeat("n", 1000) + `"}`, "name"},
		{"group null", `{"group": null}`, ""},
		{"group handler", `{"group": {"tasks": [{"name": "a"}]}}`, "group.tasks[0].handler"},
		{"group key", `{"group": {"key": "k", "tasks": [{"name": "a", "handler": "echo"}]}}`, "group.key"},
		{"group fires too many", `{"group": {"mode": "parallel", "tasks": [` + strings.Repeat(`{"handler": "echo"}, `, 100) + `{"handler": "echo"}]}}`, "every"},
		{"bad revision", `{"name": "x", "revision": "zz"}`, "revision"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeUpdates()
			rec := patch(NewHandler(f, HandlerOptions{Limits: lim}), "s1", tt.body)
			var body ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			if rec.Code != http.StatusBadRequest || body.Error == nil || body.Error.Code != CodeInvalidArgument ||
				(tt.field != "" && body.Error.Field != tt.field) {
				t.Fatalf("PATCH %s = %d %s; want 400 naming %q", tt.body, rec.Code, rec.Body, tt.field)
			}
			if len(f.updates) != 0 {
				t.Fatal("a rejected update reached the backend")
			}
		})
	}
}

func TestUpdateSchedule(t *testing.T) {
	f := newFakeUpdates()
	h := NewHandler(f, HandlerOptions{})
	rev := Revision(&f.cur)
	rec := patch(h, "s1", `{"cron": "0 3 * * *", "timezone": "Europe/Paris", "name": ""}`, "If-Match", `"`+rev+`"`)
	if rec.Code != http.StatusOK || len(f.updates) != 1 {
		t.Fatalf("PATCH = %d %s", rec.Code, rec.Body)
	}
	sp := f.updates[0]
	if sp.ID != "s1" || sp.Cron != "0 3 * * *" || sp.Every != 0 || sp.TZ != "Europe/Paris" || sp.Name != "" ||
		sp.Overlap != shard.OverlapSkip || !sp.Paused || len(sp.Group.Tasks) != 1 || sp.Group.Tasks[0].Handler != "echo" {
		t.Fatalf("merged spec = %+v", sp)
	}
	var s Schedule
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || s.Cron != "0 3 * * *" || s.Revision == rev || rec.Header().Get("ETag") != `"`+s.Revision+`"` {
		t.Fatalf("body %s (%v), ETag %s", rec.Body, err, rec.Header().Get("ETag"))
	}
	// every clears cron; a new group template replaces the old one.
	rec = patch(h, "s1", `{"every": "2m", "group": {"tasks": [{"name": "b", "handler": "other"}]}}`)
	if sp := f.updates[1]; rec.Code != http.StatusOK || sp.Cron != "" || sp.Every != 2*time.Minute || sp.Group.Tasks[0].Handler != "other" {
		t.Fatalf("PATCH = %d %s; spec %+v", rec.Code, rec.Body, sp)
	}
	// The old revision is refused (412), in the header or the body; an
	// unknown schedule is a 404. Neither reaches the backend.
	n := len(f.updates)
	if rec := patch(h, "s1", `{"name": "x"}`, "If-Match", rev); rec.Code != http.StatusPreconditionFailed || !strings.Contains(rec.Body.String(), CodePreconditionFailed) {
		t.Fatalf("stale If-Match = %d %s; want 412", rec.Code, rec.Body)
	}
	if rec := patch(h, "s1", `{"name": "x", "revision": "`+rev+`"}`); rec.Code != http.StatusPreconditionFailed {
		t.Fatalf("stale revision = %d %s; want 412", rec.Code, rec.Body)
	}
	if rec := patch(h, "s9", `{"name": "x"}`); rec.Code != http.StatusNotFound {
		t.Fatalf("unknown schedule = %d %s; want 404", rec.Code, rec.Body)
	}
	if len(f.updates) != n {
		t.Fatal("a refused update reached the backend")
	}
	// GET gives the revision as an ETag, which PATCH takes.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/schedules/s1", nil))
	if rec := patch(h, "s1", `{"name": "y"}`, "If-Match", rec.Header().Get("ETag")); rec.Code != http.StatusOK {
		t.Fatalf("PATCH with GET's ETag = %d %s", rec.Code, rec.Body)
	}
}
