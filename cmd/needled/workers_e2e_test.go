package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/client"
	"github.com/needle-mesh/needle/peer/api"
)

// TestWorkersProcesses runs three daemons with external workers on two of
// them (the Go client's Worker) and submits through the third: every task
// runs in a worker. A worker killed mid-run (it stops polling and
// heartbeating, its connections cut) loses no task: each of its tasks runs
// again within --worker-ttl + 2 s, and its late complete is 409 lease_lost
// and changes nothing.
func TestWorkersProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	const ttl = 2 * time.Second
	bin := buildNeedled(t)
	addrs := make([]string, 3)
	extra := []string{"--worker-ttl", ttl.String()}
	_, addrs[0] = startLabeledDaemon(t, bin, "", nil, extra...)
	join := selfAddr(t, addrs[0])
	_, addrs[1] = startLabeledDaemon(t, bin, join, nil, extra...)
	_, addrs[2] = startLabeledDaemon(t, bin, join, nil, extra...)
	for _, a := range addrs {
		waitUntil(t, "3 live peers seen from "+a, func() bool {
			var ps api.Peers
			if getJSON(a, "/v1/peers", &ps) != nil || len(ps.Peers) != 3 {
				return false
			}
			for _, p := range ps.Peers {
				if p.State != "alive" {
					return false
				}
			}
			return true
		})
	}

	// The worker that dies: it takes tasks from the second peer and never
	// reports them; then its process is gone (no poll, no heartbeat).
	dyingCtx, kill := context.WithCancel(t.Context())
	var taken []api.WorkerTask
	var killedAt time.Time
	gotTasks := make(chan struct{})
	go func() {
		for dyingCtx.Err() == nil {
			var res api.PollResult
			if postJSON(dyingCtx, addrs[1], "/v1/workers/poll", `{"worker":"dies","handlers":["resize"],"max":3,"wait":"1s"}`, &res) != nil {
				continue
			}
			if len(res.Tasks) > 0 {
				taken = res.Tasks
				close(gotTasks)
				return
			}
		}
	}()

	var body strings.Builder
	body.WriteString(`{"mode":"parallel","key":"workers-e2e","tasks":[`)
	const n = 60
	for i := range n {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"handler":"resize","payload":{"i":%d},"retry":{"max_attempts":1}}`, i)
	}
	body.WriteString("]}")
	c := &api.Client{BaseURL: "http://" + addrs[0]}
	var res *api.SubmitGroupResponse
	waitUntil(t, "the submission", func() bool {
		var err error
		res, err = c.SubmitGroupJSON(t.Context(), []byte(body.String()))
		return err == nil
	})
	select {
	case <-gotTasks:
	case <-time.After(30 * time.Second):
		t.Fatal("the dying worker got no task")
	}
	killedAt = time.Now()
	kill()

	// The live workers, on the second and third peers.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := map[string]int{}
	for i, a := range addrs[1:] {
		w := &client.Worker{Client: client.New("http://" + a), ID: fmt.Sprintf("live-%d", i), Concurrency: 4,
			PollWait: time.Second, Handlers: map[string]client.HandlerFunc{
				"resize": func(ctx context.Context, tk client.Task) (json.RawMessage, error) {
					mu.Lock()
					ran[tk.ID]++
					mu.Unlock()
					return json.RawMessage(fmt.Sprintf(`{"by":%q}`, a)), nil
				}}}
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				t.Errorf("worker %s: %v", w.ID, err)
			}
		})
	}
	defer wg.Wait()
	defer stop()

	g, err := c.GetGroup(t.Context(), res.Group, 60*time.Second)
	if err != nil || g.State != "SUCCEEDED" || len(g.Tasks) != n {
		t.Fatalf("group = %s, %v; want SUCCEEDED with %d tasks (0 lost)", g.State, err, n)
	}
	for _, tk := range taken {
		v, err := c.GetTask(t.Context(), tk.ID, 0)
		if err != nil || v.State != "SUCCEEDED" || v.Round < 2 || v.Attempt != 1 {
			t.Fatalf("the dead worker's task %s = %+v, %v; want SUCCEEDED in a later round, one attempt", tk.ID, v, err)
		}
		if again := v.StartedAt.Sub(killedAt); again > ttl+2*time.Second {
			t.Errorf("task %s ran again %v after its worker died; want within --worker-ttl + 2s = %v", tk.ID, again, ttl+2*time.Second)
		}
		// The dead worker's late report is refused and changes nothing.
		status, data := post(addrs[1], "/v1/leases/"+tk.Lease+"/complete", `{"result":"late"}`)
		if status != http.StatusConflict || !bytes.Contains(data, []byte(api.CodeLeaseLost)) {
			t.Errorf("late complete of %s = %d %s; want 409 lease_lost", tk.ID, status, data)
		}
		if after, _ := c.GetTask(t.Context(), tk.ID, 0); string(after.Result) == `"late"` || after.Round != v.Round {
			t.Errorf("the late complete changed %s: %+v", tk.ID, after)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != n {
		t.Errorf("the live workers ran %d distinct tasks; want %d", len(ran), n)
	}
	var wl api.WorkerList
	if err := getJSON(addrs[0], "/v1/workers", &wl); err != nil || len(wl.Workers) != 2 {
		t.Errorf("GET /v1/workers = %+v, %v; want the two live workers", wl, err)
	}
}

// postJSON posts body to a daemon and decodes a 200 answer into out.
func postJSON(ctx context.Context, addr, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s = %d %s", path, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// post posts body to a daemon and returns the status and body.
func post(addr, path, body string) (int, []byte) {
	resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}
