package peer

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	nc "github.com/needle-mesh/needle/client"
	"github.com/needle-mesh/needle/peer/api"
)

// Three real peers; three Go client workers, one polling the second peer
// and two the third. A broadcast to workers submitted through the first
// peer (which has none) runs exactly one copy in each worker, named by the
// worker, told distinct shards 0, 1, 2 of 3.
func TestBroadcastToWorkersMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	type call struct {
		worker, task  string
		shard, shards int
	}
	var mu sync.Mutex
	var calls []call
	for i, at := range []int{1, 2, 2} {
		id := []string{"wa", "wb", "wc"}[i]
		w := &nc.Worker{Client: nc.New(peers[at].c.BaseURL), ID: id, Concurrency: 2, PollWait: time.Second,
			Handlers: map[string]nc.HandlerFunc{"split": func(_ context.Context, tk nc.Task) (json.RawMessage, error) {
				mu.Lock()
				calls = append(calls, call{id, tk.ID, tk.Shard, tk.Shards})
				mu.Unlock()
				return json.Marshal(map[string]any{"worker": id, "shard": tk.Shard, "shards": tk.Shards})
			}}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("worker %s: %v", id, err)
			}
		}()
	}
	waitFor(t, "the three workers listed by the first peer", 30*time.Second, func() bool {
		status, data := wcall(t, peers[0].c, "GET", "/v1/workers", "")
		return status == 200 && strings.Contains(string(data), `"wa"`) && strings.Contains(string(data), `"wb"`) && strings.Contains(string(data), `"wc"`)
	})
	res := submitRetrying(t, peers[0].c, `{"mode":"broadcast","to":"workers","key":"split-1","tasks":[{"handler":"split","payload":{"rows":300}}]}`)
	if len(res.Tasks) != 3 || res.Tasks["wa"] == "" || res.Tasks["wb"] == "" || res.Tasks["wc"] == "" {
		t.Fatalf("submit answered tasks %v; want one per worker", res.Tasks)
	}
	g, err := peers[0].c.GetGroup(t.Context(), res.Group, 30*time.Second)
	if err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("group = %+v, %v; want SUCCEEDED", g, err)
	}
	shards := map[int]string{}
	for _, tk := range g.Tasks {
		var r struct {
			Worker        string
			Shard, Shards int
		}
		if err := json.Unmarshal(tk.Result, &r); err != nil || r.Worker != tk.Name || r.Shards != 3 || tk.Pin == "" {
			t.Fatalf("copy %s (%s, pinned to %s) result %s; want run by worker %s, of 3 shards", tk.ID, tk.Name, tk.Pin, tk.Result, tk.Name)
		}
		shards[r.Shard] = r.Worker
	}
	if len(shards) != 3 || shards[0] == "" || shards[1] == "" || shards[2] == "" {
		t.Fatalf("shards %v; want 0, 1 and 2, one per worker", shards)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("handler calls %+v; want exactly one per worker", calls)
	}
	// A repeat of the key answers the same group and copies.
	again := submitRetrying(t, peers[2].c, `{"mode":"broadcast","to":"workers","key":"split-1","tasks":[{"handler":"split","payload":{"rows":300}}]}`)
	if again.Group != res.Group || len(again.Tasks) != 3 || again.Tasks["wb"] != res.Tasks["wb"] {
		t.Fatalf("repeat = %+v; want %+v", again, res)
	}
}

// A copy goes only to its worker; a worker that dies before it takes its
// copy fails that copy's attempt after the TTL (and the retry policy
// decides). Bad targets are 400s naming the field.
func TestBroadcastToWorkersPinnedAndDead(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: time.Second})
	if got := poll(t, c, "w1", `"split"`, 1, "0s"); len(got) != 0 {
		t.Fatalf("first poll = %+v", got)
	}
	if got := poll(t, c, "w2", `"split"`, 1, "0s"); len(got) != 0 {
		t.Fatalf("first poll = %+v", got)
	}
	status, data := wcall(t, c, "POST", "/v1/groups", `{"mode":"broadcast","to":"workers","tasks":[{"handler":"split","retry":{"max_attempts":1}}]}`)
	if status != http.StatusCreated {
		t.Fatalf("submit = %d %s", status, data)
	}
	var res api.SubmitGroupResponse
	if err := json.Unmarshal(data, &res); err != nil || len(res.Tasks) != 2 {
		t.Fatalf("submit body %s: %v", data, err)
	}
	// w2 keeps polling: it gets its own copy, never w1's.
	var mine []api.WorkerTask
	waitUntil(t, func() bool {
		for _, tk := range poll(t, c, "w2", `"split"`, 4, "50ms") {
			if tk.ID != res.Tasks["w2"] || tk.Shard == nil || *tk.Shard != 1 || *tk.Shards != 2 {
				t.Fatalf("w2 polled %+v; want only its copy %s, shard 1 of 2", tk, res.Tasks["w2"])
			}
			mine = append(mine, tk)
		}
		return len(mine) > 0
	})
	if status, data := wcall(t, c, "POST", "/v1/leases/"+mine[0].Lease+"/complete", `{"result": "w2"}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}
	// w1 polls no more: after the TTL its copy fails.
	var w1 *api.Task
	waitUntil(t, func() bool {
		for _, tk := range poll(t, c, "w2", `"split"`, 4, "50ms") {
			t.Fatalf("w2 polled %+v after its copy; want nothing", tk)
		}
		var err error
		w1, err = c.GetTask(t.Context(), res.Tasks["w1"], 0)
		return err == nil && w1.State == "FAILED"
	})
	if w1.Error == nil || !strings.Contains(*w1.Error, "worker w1 is not alive") {
		t.Fatalf("w1's copy = %+v; want failed: worker w1 is not alive", w1)
	}
	for body, field := range map[string]string{
		`{"mode":"broadcast","to":"everyone","tasks":[{"handler":"split"}]}`:                      "to",
		`{"mode":"parallel","to":"workers","tasks":[{"handler":"split"}]}`:                        "to",
		`{"mode":"broadcast","to":"workers","tasks":[{"handler":"nobody"}]}`:                      "tasks[0].handler",
		`{"mode":"broadcast","to":"workers","tasks":[{"handler":"echo"}]}`:                        "tasks[0].handler",
		`{"mode":"broadcast","to":"workers","tasks":[{"handler":"split","require":["zone=z"]}]}`:  "tasks[0].require",
		`{"every":"1m","group":{"mode":"broadcast","to":"workers","tasks":[{"handler":"echo"}]}}`: "group.tasks[0].handler",
		`{"every":"1m","group":{"mode":"parallel","to":"workers","tasks":[{"handler":"split"}]}}`: "group.to",
	} {
		path := "/v1/groups"
		if strings.Contains(body, `"every"`) {
			path = "/v1/schedules"
		}
		status, data := wcall(t, c, "POST", path, body)
		var eb api.ErrorBody
		_ = json.Unmarshal(data, &eb)
		if status != http.StatusBadRequest || eb.Error == nil || eb.Error.Field != field {
			t.Errorf("%s = %d %s; want 400 naming %s", body, status, data, field)
		}
	}
}

// A worker that dies while running its copy fails that attempt after the
// TTL (its copy goes to no other worker), and the retry runs when the
// same worker id polls again.
func TestBroadcastToWorkersDiesRunning(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: time.Second})
	if got := poll(t, c, "w1", `"split"`, 1, "0s"); len(got) != 0 {
		t.Fatalf("first poll = %+v", got)
	}
	status, data := wcall(t, c, "POST", "/v1/groups", `{"mode":"broadcast","to":"workers","tasks":[{"handler":"split","retry":{"max_attempts":2,"backoff":"1s"}}]}`)
	if status != http.StatusCreated {
		t.Fatalf("submit = %d %s", status, data)
	}
	var res api.SubmitGroupResponse
	if err := json.Unmarshal(data, &res); err != nil || res.Tasks["w1"] == "" {
		t.Fatalf("submit body %s: %v", data, err)
	}
	first := poll(t, c, "w1", `"split"`, 1, "10s")
	if len(first) != 1 || first[0].ID != res.Tasks["w1"] {
		t.Fatalf("w1 polled %+v; want its copy", first)
	}
	// w1 goes silent past the TTL while an intruder polls for the handler.
	var tk *api.Task
	waitUntil(t, func() bool {
		if got := poll(t, c, "intruder", `"split"`, 1, "20ms"); len(got) != 0 {
			t.Fatalf("another worker polled w1's copy: %+v", got)
		}
		var err error
		tk, err = c.GetTask(t.Context(), res.Tasks["w1"], 0)
		return err == nil && tk.Attempt == 1
	})
	if tk.Error == nil || !strings.Contains(*tk.Error, "worker w1 is not alive") {
		t.Fatalf("copy after w1 went silent = %+v; want its attempt failed: worker w1 is not alive", tk)
	}
	status, data = wcall(t, c, "POST", "/v1/leases/"+first[0].Lease+"/complete", `{"result": "late"}`)
	if status != http.StatusConflict || errCode(data) != api.CodeLeaseLost {
		t.Fatalf("late complete = %d %s; want 409 lease_lost", status, data)
	}
	var again []api.WorkerTask
	waitUntil(t, func() bool {
		again = poll(t, c, "w1", `"split"`, 1, "50ms")
		return len(again) == 1
	})
	if again[0].ID != res.Tasks["w1"] || again[0].Attempt != 1 || *again[0].Shard != 0 || *again[0].Shards != 1 {
		t.Fatalf("w1 polled again %+v; want its copy's second attempt, shard 0 of 1", again[0])
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+again[0].Lease+"/complete", `{"result": "w1"}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}
	if got, err := c.GetTask(t.Context(), res.Tasks["w1"], 10*time.Second); err != nil || got.State != "SUCCEEDED" {
		t.Fatalf("copy = %+v, %v; want SUCCEEDED", got, err)
	}
}
