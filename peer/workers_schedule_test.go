package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	nc "github.com/needle-mesh/needle/client"
	"github.com/needle-mesh/needle/peer/api"
)

// Three real peers, a Go client worker polling the second and one the
// third. A schedule whose broadcast goes to workers, created through the
// first peer, runs one copy in each live worker at every firing (named by
// the worker, shards 0 and 1 of 2); a schedule to a handler no live worker
// serves records its firings as skipped.
func TestScheduleBroadcastToWorkersMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var mu sync.Mutex
	ran := map[string][]string{} // firing group -> workers that ran a copy
	for i, id := range []string{"wa", "wb"} {
		w := &nc.Worker{Client: nc.New(peers[i+1].c.BaseURL), ID: id, Concurrency: 2, PollWait: time.Second,
			Handlers: map[string]nc.HandlerFunc{"split": func(_ context.Context, tk nc.Task) (json.RawMessage, error) {
				mu.Lock()
				ran[tk.Group] = append(ran[tk.Group], id)
				mu.Unlock()
				return json.Marshal(map[string]any{"worker": id, "shard": tk.Shard, "shards": tk.Shards})
			}}}
		wg.Go(func() {
			if err := w.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("worker %s: %v", id, err)
			}
		})
	}
	c := peers[0].c
	var wl api.WorkerList
	waitFor(t, "the two workers advertised to the first peer", 30*time.Second, func() bool {
		status, data := wcall(t, c, "GET", "/v1/workers", "")
		return status == 200 && json.Unmarshal(data, &wl) == nil && len(wl.Workers) == 2
	})
	sched := createScheduleRetrying(t, c, `{"every":"1s","overlap":"allow","group":{"mode":"broadcast","to":"workers","tasks":[{"handler":"split"}]}}`)
	if sched.Group.To != api.ToWorkers {
		t.Errorf("schedule group = %+v; want to workers", sched.Group)
	}
	nobody := createScheduleRetrying(t, c, `{"every":"1s","group":{"mode":"broadcast","to":"workers","tasks":[{"handler":"nobody"}]}}`)

	var fired *api.Group
	waitFor(t, "a firing run by both workers", 30*time.Second, func() bool {
		var s api.Schedule
		if status, data := wcall(t, c, "GET", "/v1/schedules/"+sched.ID, ""); status != 200 || json.Unmarshal(data, &s) != nil {
			return false
		}
		for _, f := range s.Firings {
			if f.State == "SUCCEEDED" {
				g, err := c.GetGroup(t.Context(), f.Group, 0)
				if err == nil {
					fired = g
					return true
				}
			}
		}
		return false
	})
	var names []string
	for _, tk := range fired.Tasks {
		var r struct {
			Worker        string
			Shard, Shards int
		}
		if err := json.Unmarshal(tk.Result, &r); err != nil || r.Worker != tk.Name || r.Shards != 2 || fmt.Sprint(r.Shard) != fmt.Sprint(len(names)) {
			t.Errorf("copy %s (%s) result %s; want run by worker %s, shard %d of 2", tk.ID, tk.Name, tk.Result, tk.Name, len(names))
		}
		names = append(names, tk.Name)
	}
	if !slices.Equal(names, []string{"wa", "wb"}) {
		t.Errorf("firing %s has copies %v; want wa, wb", fired.ID, names)
	}
	mu.Lock()
	if got := slices.Sorted(slices.Values(ran[fired.ID])); !slices.Equal(got, []string{"wa", "wb"}) {
		t.Errorf("firing %s ran in %v; want once in wa and once in wb", fired.ID, got)
	}
	mu.Unlock()
	waitFor(t, "a skipped firing of the schedule no worker serves", 30*time.Second, func() bool {
		var s api.Schedule
		if status, data := wcall(t, c, "GET", "/v1/schedules/"+nobody.ID, ""); status != 200 || json.Unmarshal(data, &s) != nil {
			return false
		}
		return len(s.Firings) > 0 && s.Firings[len(s.Firings)-1].State == "SKIPPED"
	})
}

// createScheduleRetrying creates a schedule, retrying while the mesh
// settles (503).
func createScheduleRetrying(t *testing.T, c *api.Client, body string) api.Schedule {
	t.Helper()
	var s api.Schedule
	waitFor(t, "the schedule created", 20*time.Second, func() bool {
		status, data := wcall(t, c, "POST", "/v1/schedules", body)
		if status != 201 && status != 503 {
			t.Fatalf("create schedule %s = %d %s", body, status, data)
		}
		return status == 201 && json.Unmarshal(data, &s) == nil
	})
	return s
}
