package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// opsBackend adds the list, stats and retry routes to fakeBackend: it
// holds five failed tasks, newest (highest index) first.
type opsBackend struct {
	*fakeBackend
	filters  []shard.Filter
	mu       sync.Mutex // RetryTask's: the bulk retry sends several at once
	retried  []shard.TaskID
	keys     map[string]bool // RetryTask's keys: one seen again is a repeat
	conflict shard.TaskID    // RetryTask answers it 409, as a task retried meanwhile
}

var (
	_ api.Lister  = (*opsBackend)(nil)
	_ api.Retrier = (*opsBackend)(nil)
)

func (o *opsBackend) ListTasks(_ context.Context, f *shard.Filter) (api.TaskPage, error) {
	o.filters = append(o.filters, *f)
	var page api.TaskPage
	for i := 4; i >= 0; i-- {
		k := shard.ListKey{Created: t0, Group: "g0", Task: i}
		if f.After != nil && !k.Less(*f.After) {
			continue
		}
		v := taskIn(shard.TaskIDOf("g0", i), shard.Failed)
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
	lost := &shard.HandlerStats{OldestReady: t0}
	lost.Counts[shard.Ready] = 3
	return api.StatsPage{Handlers: map[string]*shard.HandlerStats{"echo": hs, "resize": lost}, Now: t0.Add(90 * time.Second),
		Waiting: map[string]string{"resize": `no live worker serves handler "resize"`}}, nil
}

func (o *opsBackend) RetryTask(_ context.Context, id shard.TaskID, _, key string) (shard.TaskView, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if key != "" && o.keys[key] {
		return taskIn(id, shard.Failed), true, nil
	}
	if id == o.conflict {
		return shard.TaskView{}, false, api.NewError(api.CodeConflict, "", "task "+string(id)+" is READY")
	}
	if key != "" {
		if o.keys == nil {
			o.keys = map[string]bool{}
		}
		o.keys[key] = true
	}
	o.retried = append(o.retried, id)
	return taskIn(id, shard.Ready), false, nil
}

func (o *opsBackend) RetryGroup(context.Context, shard.GroupID, string, string) (shard.GroupView, bool, error) {
	return shard.GroupView{}, false, shard.ErrNotFound
}

func TestListStatsRetry(t *testing.T) {
	o := &opsBackend{fakeBackend: &fakeBackend{}}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	runCLI(t, srv.URL, "", "list", "--state", "failed", "--since", "1h", "--limit", "2").check(t, 0, "g0.4", "--cursor")
	f := o.filters[0]
	if !slices.Equal(f.States, []shard.State{shard.Failed}) || f.Limit != 2 || time.Since(f.CreatedAfter) < 59*time.Minute {
		t.Errorf("list sent filter %+v; want FAILED, limit 2, created in the last hour", f)
	}
	r := runCLI(t, srv.URL, "", "list", "--all", "--limit", "2")
	for i := range 5 {
		if !strings.Contains(r.stdout, string(shard.TaskIDOf("g0", i))) {
			t.Errorf("list --all printed %q; want g0.%d", r.stdout, i)
		}
	}
	if !strings.Contains(r.stdout, `waiting: no live worker serves handler "echo"`) {
		t.Errorf("list --all printed %q; want g0.0's reason to wait", r.stdout)
	}
	r = runCLI(t, srv.URL, "", "stats")
	r.check(t, 0, "1m30s", "")
	r.check(t, 0, `resize: 3 READY wait: no live worker serves handler "resize"`+"\n", "")
	if strings.Contains(r.stdout, "echo: ") {
		t.Errorf("stats says echo's tasks wait:\n%s", r.stdout)
	}
	runCLI(t, srv.URL, "", "stats", "--json").check(t, 0, `"waiting": "no live worker serves handler \"resize\""`, "")
	runCLI(t, srv.URL, "", "retry", "g0.3").check(t, 0, "g0.3 READY", "")
	if !slices.Equal(o.retried, []shard.TaskID{"g0.3"}) {
		t.Errorf("retried %v; want g0.3", o.retried)
	}
	runCLI(t, srv.URL, "", "retry", "gbad").check(t, 1, "", "404")
	runCLI(t, srv.URL, "", "list", "extra").check(t, 2, "", "no arguments")
	n := len(o.filters)
	runCLI(t, srv.URL, "", "list", "--worker-deaths", "2").check(t, 0, "g0.4", "")
	if f := o.filters[n]; f.WorkerDeaths != 2 {
		t.Errorf("list --worker-deaths 2 sent filter %+v; want WorkerDeaths 2", f)
	}
	runCLI(t, srv.URL, "", "list", "--worker-deaths", "-1").check(t, 2, "", "--worker-deaths")
	runCLI(t, srv.URL, "", "list", "--worker-deaths", "99").check(t, 1, "", "worker_deaths")
}

func TestRetryBulk(t *testing.T) {
	o := &opsBackend{fakeBackend: &fakeBackend{}, conflict: "g0.2"}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)

	r := runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--since", "1h", "--dry-run")
	r.check(t, 0, "g0.4\ng0.3\ng0.2\ng0.1\ng0.0\n", "5 tasks match; none retried")
	if f := o.filters[0]; f.Handler != "echo" || !slices.Equal(f.States, []shard.State{shard.Failed}) || f.Limit != 1000 || f.CreatedAfter.IsZero() {
		t.Errorf("bulk retry listed with %+v; want FAILED tasks of echo created in the last hour", f)
	}
	runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--max", "3").check(t, 1, "", "more than 3 tasks match (--max); none retried")
	if len(o.retried) != 0 {
		t.Fatalf("retried %v before the list was known to fit --max", o.retried)
	}

	r = runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--state", "failed,canceled", "--key", "outage-7")
	r.check(t, 0, "g0.4 READY attempt 0\ng0.3 READY attempt 0\ng0.1 READY attempt 0\ng0.0 READY attempt 0\n", "needle: retry: g0.2 skipped: task g0.2 is READY")
	r.check(t, 0, "", "retried 4 of 5 matching tasks (1 skipped, 0 errors)")
	if f := o.filters[len(o.filters)-1]; !slices.Equal(f.States, []shard.State{shard.Failed, shard.Canceled}) {
		t.Errorf("states %v; want FAILED and CANCELED", f.States)
	}
	got := slices.Clone(o.retried)
	slices.Sort(got)
	if !slices.Equal(got, []shard.TaskID{"g0.0", "g0.1", "g0.3", "g0.4"}) {
		t.Errorf("retried %v; want g0.0, g0.1, g0.3, g0.4", got)
	}

	runCLI(t, srv.URL, "", "retry", "--state", "ready").check(t, 2, "", `--state "ready": want FAILED, CANCELED`)
	runCLI(t, srv.URL, "", "retry", "g0.1", "--handler", "echo").check(t, 2, "", "an id or filters, not both")
	runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--max", "0").check(t, 2, "", "--max")
	runCLI(t, srv.URL, "", "retry").check(t, 2, "", "want exactly one task or group id, or filters")
}

func TestCancelBulk(t *testing.T) {
	var mu sync.Mutex
	var canceled []shard.TaskID
	o := &opsBackend{fakeBackend: &fakeBackend{CancelTaskFn: func(id shard.TaskID, _ string) (shard.TaskView, error) {
		mu.Lock()
		defer mu.Unlock()
		canceled = append(canceled, id)
		return taskIn(id, shard.Canceled), nil
	}}}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)

	runCLI(t, srv.URL, "", "cancel", "--handler", "ech0", "--dry-run").check(t, 0, "g0.4\ng0.3\ng0.2\ng0.1\ng0.0\n", "5 tasks match; none canceled")
	want := []shard.State{shard.Pending, shard.Ready, shard.Running, shard.Waiting}
	if f := o.filters[0]; f.Handler != "ech0" || !slices.Equal(f.States, want) {
		t.Errorf("bulk cancel listed with %+v; want the unfinished tasks of ech0", f)
	}
	if len(canceled) != 0 {
		t.Fatalf("a dry run canceled %v", canceled)
	}
	r := runCLI(t, srv.URL, "", "cancel", "--handler", "ech0", "--state", "ready")
	r.check(t, 0, "g0.4 CANCELED\n", "canceled 5 of 5 matching tasks (0 skipped, 0 errors)")
	if f := o.filters[1]; !slices.Equal(f.States, []shard.State{shard.Ready}) {
		t.Errorf("states %v; want READY", f.States)
	}
	if len(canceled) != 5 {
		t.Errorf("canceled %v; want 5 tasks", canceled)
	}
	runCLI(t, srv.URL, "", "cancel", "--state", "failed").check(t, 2, "", `--state "failed": want PENDING, READY, RUNNING, WAITING`)
	runCLI(t, srv.URL, "", "cancel", "g0.1", "--handler", "ech0").check(t, 2, "", "an id or filters, not both")
	runCLI(t, srv.URL, "", "cancel", "--json").check(t, 2, "", "want exactly one task or group id, or filters")
}

// A bad --state is echoed as typed, by the API (list) and by the bulk
// commands' own check (both upper-cased it: `unknown state "BOGUS"`).
func TestBadStateEchoedAsTyped(t *testing.T) {
	o := &opsBackend{fakeBackend: &fakeBackend{}}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	runCLI(t, srv.URL, "", "list", "--state", "bogus").check(t, 1, "", `unknown state "bogus"`)
	runCLI(t, srv.URL, "", "list", "--groups", "--state", "bogus").check(t, 1, "", `unknown group state "bogus"`)
	runCLI(t, srv.URL, "", "list", "--state", "failed").check(t, 0, "g0.4", "")
	runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--state", "bogus").check(t, 2, "", `--state "bogus"`)
}

// needle list --all prints one table under one header, and with --json
// one document of every task, without a cursor (it printed a header, or a
// document, per page: 6 headers for 290 tasks).
func TestListAllIsOneAnswer(t *testing.T) {
	o := &opsBackend{fakeBackend: &fakeBackend{}}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	r := runCLI(t, srv.URL, "", "list", "--all", "--limit", "2")
	if n := strings.Count(r.stdout, "ID  "); n != 1 || strings.Count(r.stdout, "\n") != 6 || r.code != 0 {
		t.Errorf("list --all (3 pages of 5 tasks) = exit %d, %d headers; want one header and 5 rows:\n%s", r.code, n, r.stdout)
	}
	r = runCLI(t, srv.URL, "", "list", "--all", "--limit", "2", "--json")
	var l api.TaskList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Tasks) != 5 || l.Cursor != "" || r.code != 0 {
		t.Errorf("list --all --json = exit %d, %d tasks, cursor %q, %v; want one document of 5 tasks, no cursor:\n%s", r.code, len(l.Tasks), l.Cursor, err, r.stdout)
	}
	r = runCLI(t, srv.URL, "", "list", "--limit", "2", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Tasks) != 2 || l.Cursor == "" {
		t.Errorf("list --json (a page) = %d tasks, cursor %q, %v; want 2 and the next page's cursor", len(l.Tasks), l.Cursor, err)
	}
	r = runCLI(t, srv.URL, "", "list", "--groups", "--all", "--json")
	var gl api.GroupList
	if err := json.Unmarshal([]byte(r.stdout), &gl); err != nil || gl.Groups == nil {
		t.Errorf("list --groups --all --json = %q, %v; want a document with an empty groups list", r.stdout, err)
	}
}

// A keyed bulk retry run again counts its repeats apart: nothing ran again
// (it said "retried 4 of 5 matching tasks (1 skipped, 0 errors)" again).
func TestRetryBulkRepeatedKey(t *testing.T) {
	o := &opsBackend{fakeBackend: &fakeBackend{}, conflict: "g0.2"}
	srv := httptest.NewServer(api.NewHandler(o, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--key", "batch1").check(t, 0, "", "retried 4 of 5 matching tasks (1 skipped, 0 errors)")
	r := runCLI(t, srv.URL, "", "retry", "--handler", "echo", "--key", "batch1")
	r.check(t, 0, "g0.4 FAILED attempt 3 (already retried with this key)\n", "retried 0 of 5 matching tasks (4 already retried with this key, 1 skipped, 0 errors)")
	if len(o.retried) != 4 {
		t.Errorf("retried %v; want the 4 of the first run only", o.retried)
	}
	runCLI(t, srv.URL, "", "retry", "g0.4", "--key", "batch1:g0.4").check(t, 0, `g0.4 FAILED attempt 3 (already retried with key "batch1:g0.4": nothing ran again)`, "")
	runCLI(t, srv.URL, "", "retry", "g0.4", "--key", "batch1:g0.4", "--json").check(t, 0, `"repeat": true`, "")
}

// --since and --until that leave no window are a usage error naming them,
// for list, retry and cancel, not a silently empty answer (audit s77).
func TestSinceUntilEmptyWindow(t *testing.T) {
	for _, cmd := range []string{"list", "retry", "cancel"} {
		runCLI(t, "http://127.0.0.1:1", "", cmd, "--since", "1h", "--until", "2h").
			check(t, 2, "", "--until 2h0m0s is not shorter than --since 1h0m0s")
	}
}
