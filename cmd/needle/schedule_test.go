package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// fakeSchedule is an API backend holding one schedule, s1, that records
// the updates it takes.
type fakeSchedule struct {
	fakeBackend
	cur     shard.ScheduleSpec
	updates int
}

func (f *fakeSchedule) CreateSchedule(context.Context, *shard.ScheduleSpec, string, string) (shard.ScheduleView, bool, error) {
	return shard.ScheduleView{}, false, shard.ErrNotFound
}
func (f *fakeSchedule) Schedule(_ context.Context, id shard.ScheduleID) (shard.ScheduleView, error) {
	if id != f.cur.ID {
		return shard.ScheduleView{}, shard.ErrNotFound
	}
	return shard.ScheduleView{Spec: f.cur, CreatedAt: t0}, nil
}
func (f *fakeSchedule) Schedules(context.Context) ([]shard.ScheduleView, error) { return nil, nil }
func (f *fakeSchedule) DeleteSchedule(context.Context, shard.ScheduleID, string) (shard.ScheduleView, error) {
	return shard.ScheduleView{}, shard.ErrNotFound
}
func (f *fakeSchedule) PauseSchedule(context.Context, shard.ScheduleID, bool, string) (shard.ScheduleView, error) {
	return shard.ScheduleView{}, shard.ErrNotFound
}
func (f *fakeSchedule) UpdateSchedule(_ context.Context, spec *shard.ScheduleSpec, base uint64, _ string) (shard.ScheduleView, error) {
	if base != shard.ScheduleRevision(&f.cur) {
		return shard.ScheduleView{}, shard.ErrRevision
	}
	f.updates++
	f.cur = *spec
	return shard.ScheduleView{Spec: f.cur, CreatedAt: t0}, nil
}

func TestScheduleEdit(t *testing.T) {
	f := &fakeSchedule{cur: shard.ScheduleSpec{ID: "s1", Name: "nightly", Cron: "0 2 * * *", Overlap: shard.OverlapSkip,
		Misfire: shard.MisfireOnce, Group: shard.GroupSpec{Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Name: "t", Handler: "echo"}}}}}
	srv := httptest.NewServer(api.NewHandler(f, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	addr := srv.URL

	runCLI(t, addr, "", "schedule", "edit", "s1", "--every", "5m", "--tz", "Europe/Paris", "--name", "").check(t, 0, `s1 active "every 5m0s"`, "")
	if f.cur.Every != 5*time.Minute || f.cur.Cron != "" || f.cur.TZ != "Europe/Paris" || f.cur.Name != "" || f.cur.Group.Tasks[0].Handler != "echo" {
		t.Fatalf("after edit: %+v", f.cur)
	}
	runCLI(t, addr, "", "schedule", "edit", "s1", "--handler", "report", "--payload", `{"full":true}`, "--json").check(t, 0, `"revision"`, "")
	if len(f.cur.Group.Tasks) != 1 || f.cur.Group.Tasks[0].Handler != "report" || string(f.cur.Group.Tasks[0].Payload) != `{"full":true}` {
		t.Fatalf("group after edit: %+v", f.cur.Group)
	}
	rev := api.Revision(&f.cur)
	runCLI(t, addr, "", "schedule", "edit", "s1", "--misfire", "skip", "--if-match", rev).check(t, 0, "s1", "")
	n := f.updates
	runCLI(t, addr, "", "schedule", "edit", "s1", "--overlap", "allow", "--if-match", rev).check(t, 1, "", "412 precondition_failed")
	runCLI(t, addr, "", "schedule", "edit", "s1", "--overlap", "sometimes").check(t, 1, "", "overlap")
	runCLI(t, addr, "", "schedule", "edit", "s9", "--name", "x").check(t, 1, "", "404")
	for _, args := range [][]string{
		{"schedule", "edit"},
		{"schedule", "edit", "s1"},
		{"schedule", "edit", "s1", "s2", "--name", "x"},
		{"schedule", "edit", "s1", "--cron", "* * * * *", "--every", "1m"},
		{"schedule", "edit", "s1", "--paused"},
		{"schedule", "edit", "s1", "--key", "k"},
		{"schedule", "edit", "s1", "--payload", "1"},
		{"schedule", "edit", "s1", "-f", "g.json", "--handler", "echo"},
	} {
		if r := runCLI(t, addr, "", args...); r.code != 2 || r.stderr == "" {
			t.Errorf("needle %v = exit %d, stderr %q; want exit 2 with a message", args, r.code, r.stderr)
		}
	}
	if f.updates != n {
		t.Fatal("a refused edit changed the schedule")
	}
}
