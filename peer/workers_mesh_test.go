package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// testWorker polls c for handler until ctx ends and completes each task
// with its own id as the result; it counts what it ran.
type testWorker struct {
	id      string
	mu      sync.Mutex
	ran     map[string]int
	created map[string]*time.Time // each task's created_at as polled
	info    map[string][2]int     // each task's priority and max_attempts as polled
}

func runTestWorker(ctx context.Context, t *testing.T, c *api.Client, id, handler string, wg *sync.WaitGroup) *testWorker {
	w := &testWorker{id: id, ran: map[string]int{}, created: map[string]*time.Time{}, info: map[string][2]int{}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		body := `{"worker": "` + id + `", "handlers": ["` + handler + `"], "max": 4, "wait": "1s"}`
		for ctx.Err() == nil {
			status, data, err := rawCall(ctx, c, "POST", "/v1/workers/poll", body)
			if err != nil || status != http.StatusOK {
				continue // the test ends, or a peer is not ready
			}
			var res api.PollResult
			if err := json.Unmarshal(data, &res); err != nil {
				t.Errorf("worker %s: poll body %s: %v", id, data, err)
				return
			}
			for _, tk := range res.Tasks {
				// Counted before it reports: the group can be done (and
				// the test count) before the report's answer is back.
				w.mu.Lock()
				w.ran[tk.ID]++
				w.created[tk.ID] = tk.CreatedAt
				w.info[tk.ID] = [2]int{int(tk.Priority), tk.MaxAttempts}
				w.mu.Unlock()
				status, data, err := rawCall(ctx, c, "POST", "/v1/leases/"+tk.Lease+"/complete", `{"result": "`+id+`"}`)
				if err == nil && status != http.StatusOK {
					t.Errorf("worker %s: complete %s = %d %s", id, tk.ID, status, data)
				}
			}
		}
	}()
	return w
}

func (w *testWorker) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ran)
}

// rawCall is wcall for goroutines: errors are returned, not fatal.
func rawCall(ctx context.Context, c *api.Client, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// Three real peers: tasks submitted through one peer run in workers that
// poll the other two (their owners lease to the peers whose workers wait);
// every peer lists both workers; a READY task of a handler no worker
// serves says so.
func TestWorkersAcrossMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	w2 := runTestWorker(ctx, t, peers[1].c, "w2", "resize", &wg)
	w3 := runTestWorker(ctx, t, peers[2].c, "w3", "resize", &wg)
	waitFor(t, "both workers listed by the first peer", 30*time.Second, func() bool {
		status, data := wcall(t, peers[0].c, "GET", "/v1/workers", "")
		return status == 200 && strings.Contains(string(data), `"w2"`) && strings.Contains(string(data), `"w3"`)
	})
	var tasks []string
	for i := range 120 {
		tasks = append(tasks, fmt.Sprintf(`{"handler":"resize","payload":%d,"priority":%d,"retry":{"max_attempts":%d}}`, i, i%5, 1+i%3))
	}
	res := submitRetrying(t, peers[0].c, `{"mode":"parallel","key":"across","tasks":[`+strings.Join(tasks, ",")+`]}`)
	g, err := peers[0].c.GetGroup(t.Context(), res.Group, 30*time.Second)
	if err != nil || g.State != "SUCCEEDED" {
		for _, tk := range g.Tasks {
			if tk.State != "SUCCEEDED" && tk.Round > 0 {
				_, evs := wcall(t, peers[0].c, "GET", "/v1/tasks/"+tk.ID+"/events", "")
				t.Logf("peers %s %s %s; task %s %s round %d: %s", peers[0].p.ID(), peers[1].p.ID(), peers[2].p.ID(), tk.ID, tk.State, tk.Round, evs)
				break
			}
		}
		t.Fatalf("group %s counts %v, %v; want SUCCEEDED", g.State, g.Counts, err)
	}
	for _, tk := range g.Tasks {
		if r := string(tk.Result); r != `"w2"` && r != `"w3"` {
			t.Fatalf("task %s result %s; want a worker's id", tk.ID, r)
		}
		// Polled from the peer the owner granted the lease to, most of
		// them another peer: created_at came in the grant.
		w := w2
		if string(tk.Result) == `"w3"` {
			w = w3
		}
		w.mu.Lock()
		c, info := w.created[tk.ID], w.info[tk.ID]
		w.mu.Unlock()
		if c == nil || tk.CreatedAt == nil || !c.Equal(*tk.CreatedAt) {
			t.Errorf("task %s: polled created_at %v; GET's %v", tk.ID, c, tk.CreatedAt)
		}
		// So did its priority and retry budget.
		var i int
		fmt.Sscanf(tk.ID[strings.LastIndexByte(tk.ID, '.')+1:], "%d", &i)
		if want := [2]int{i % 5, 1 + i%3}; info != want || int(tk.Priority) != want[0] {
			t.Errorf("task %s: polled priority and max_attempts %v, GET's priority %d; want %v", tk.ID, info, tk.Priority, want)
		}
	}
	if w2.count()+w3.count() < 120 {
		t.Errorf("workers ran %d + %d tasks; want 120", w2.count(), w3.count())
	}
	res = submitRetrying(t, peers[0].c, `{"mode":"parallel","key":"nobody","tasks":[{"handler":"nobody-serves","payload":1}]}`)
	t.Logf("peers %s %s %s", peers[0].p.ID(), peers[1].p.ID(), peers[2].p.ID())
	defer func() {
		if t.Failed() {
			_, evs := wcall(t, peers[0].c, "GET", "/v1/tasks/"+res.Group+".0/events", "")
			tk, _ := peers[1].c.GetTask(t.Context(), res.Group+".0", 0)
			t.Logf("nobody task %+v: %s", tk, evs)
		}
	}()
	waitFor(t, "the waiting reason", 30*time.Second, func() bool {
		tk, err := peers[1].c.GetTask(t.Context(), res.Group+".0", 0)
		return err == nil && tk.State == "READY" && tk.Waiting == `no live worker serves handler "nobody-serves"`
	})
}
