package main

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// opsBackend adds the list, stats and retry routes to fakeBackend: it
// holds five failed tasks, newest (highest index) first.
type opsBackend struct {
	*fakeBackend
	filters []shard.Filter
	retried []shard.TaskID
}

func (o *opsBackend) ListTasks(_ context.Context, f *shard.Filter) (api.TaskPage, error) {
	o.filters = append(o.filters, *f)
	var page api.TaskPage
	for i := 4; i >= 0; i-- {
		k := shard.ListKey{Created: t0, Group: "g", Task: i}
		if f.After != nil && !k.Less(*f.After) {
			continue
		}
		v := taskIn(shard.TaskIDOf("g", i), shard.Failed)
		if i == 0 {
			v = taskIn(v.ID, shard.Ready)
			v.Waiting = `no live worker serves handler "echo"`
		}
		page.Tasks = append(page.Tasks, v)
		page.Keys = append(page.Keys, k)
		if len(page.Keys) == f.Limit {
			break
		}
	}
	return page, nil
}

func (o *opsBackend) ListGroups(context.Context, *shard.Filter) (api.GroupPage, error) {
	return api.GroupPage{}, nil
}

func (o *opsBackend) Stats(context.Context) (api.StatsPage, error) {
	hs := &shard.HandlerStats{OldestReady: t0}
	hs.Counts[shard.Failed], hs.Counts[shard.Ready] = 5, 2
	return api.StatsPage{Handlers: map[string]*shard.HandlerStats{"echo": hs}, Now: t0.Add(90 * time.Second)}, nil
}

func (o *opsBackend) RetryTask(_ context.Context, id shard.TaskID, _, _ string) (shard.TaskView, error) {
	o.retried = append(o.retried, id)
	return taskIn(id, shard.Ready), nil
}

func (o *opsBackend) RetryGroup(context.Context, shard.GroupID, string, string) (shard.GroupView, error) {
	return shard.GroupView{}, shard.ErrNotFound
}

func TestListStatsRetry(t *testing.T) {
	o := &opsBackend{fakeBackend: &fakeBackend{}}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	runCLI(t, srv.URL, "", "list", "--state", "failed", "--since", "1h", "--limit", "2").check(t, 0, "g.4", "--cursor")
	f := o.filters[0]
	if !slices.Equal(f.States, []shard.State{shard.Failed}) || f.Limit != 2 || time.Since(f.CreatedAfter) < 59*time.Minute {
		t.Errorf("list sent filter %+v; want FAILED, limit 2, created in the last hour", f)
	}
	r := runCLI(t, srv.URL, "", "list", "--all", "--limit", "2")
	for i := range 5 {
		if !strings.Contains(r.stdout, string(shard.TaskIDOf("g", i))) {
			t.Errorf("list --all printed %q; want g.%d", r.stdout, i)
		}
	}
	if !strings.Contains(r.stdout, `waiting: no live worker serves handler "echo"`) {
		t.Errorf("list --all printed %q; want g.0's reason to wait", r.stdout)
	}
	runCLI(t, srv.URL, "", "stats").check(t, 0, "1m30s", "")
	runCLI(t, srv.URL, "", "retry", "g.3").check(t, 0, "g.3 READY", "")
	if !slices.Equal(o.retried, []shard.TaskID{"g.3"}) {
		t.Errorf("retried %v; want g.3", o.retried)
	}
	runCLI(t, srv.URL, "", "retry", "nope").check(t, 1, "", "404")
	runCLI(t, srv.URL, "", "list", "extra").check(t, 2, "", "no arguments")
	n := len(o.filters)
	runCLI(t, srv.URL, "", "list", "--worker-deaths", "2").check(t, 0, "g.4", "")
	if f := o.filters[n]; f.WorkerDeaths != 2 {
		t.Errorf("list --worker-deaths 2 sent filter %+v; want WorkerDeaths 2", f)
	}
	runCLI(t, srv.URL, "", "list", "--worker-deaths", "-1").check(t, 2, "", "--worker-deaths")
	runCLI(t, srv.URL, "", "list", "--worker-deaths", "99").check(t, 1, "", "worker_deaths")
}
