package peer

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// A polled task shows what GET /v1/tasks/{id} shows of it: its priority,
// its error when it runs again after a failed attempt, and its stage and
// item in a pipeline, and how many attempts its retry policy allows. A
// poll used to answer priority 0 and error null whatever the task's.
func TestWorkerPollShowsTaskContext(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	id := submitTask(t, c, `{"handler": "resize", "payload": 1, "priority": 5, "retry": {"max_attempts": 3, "backoff": "10ms"}}`)
	tasks := poll(t, c, "w1", `"resize"`, 1, "10s")
	if len(tasks) != 1 || tasks[0].ID != id {
		t.Fatalf("poll = %+v; want %s", tasks, id)
	}
	first := tasks[0]
	if first.Priority != 5 || first.MaxAttempts != 3 || first.Error != nil || first.Attempt != 0 || first.Stage != nil || first.Item != nil {
		t.Errorf("first poll: priority %d, max_attempts %d, error %v, attempt %d, stage %v, item %v; want 5, 3, nil, 0, nil, nil",
			first.Priority, first.MaxAttempts, first.Error, first.Attempt, first.Stage, first.Item)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+first.Lease+"/fail", `{"error": "disk full"}`); status != 200 {
		t.Fatalf("fail = %d %s", status, data)
	}
	tasks = poll(t, c, "w1", `"resize"`, 1, "10s")
	if len(tasks) != 1 || tasks[0].ID != id {
		t.Fatalf("poll after the failure = %+v; want %s again", tasks, id)
	}
	again := tasks[0]
	if again.Attempt != 1 || again.Error == nil || *again.Error != "disk full" || again.MaxAttempts != 3 || again.Priority != 5 {
		t.Errorf("second poll: attempt %d, error %v, max_attempts %d, priority %d; want 1, disk full, 3, 5",
			again.Attempt, again.Error, again.MaxAttempts, again.Priority)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+again.Lease+"/complete", `{"result": 1}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}

	// A streaming pipeline's tasks carry their stage and item.
	status, data := wcall(t, c, "POST", "/v1/groups", `{"mode": "pipeline", "stages": [{"name": "parse", "handler": "wparse"}], "items": [10, 20]}`)
	if status != 201 {
		t.Fatalf("pipeline = %d %s", status, data)
	}
	seen := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		for _, tk := range poll(t, c, "w2", `"wparse"`, 2, "5s") {
			if tk.Stage == nil || *tk.Stage != 0 || tk.Item == nil || tk.MaxAttempts != 1 {
				t.Fatalf("pipeline task %s: stage %v, item %v, max_attempts %d; want stage 0, an item, 1", tk.ID, tk.Stage, tk.Item, tk.MaxAttempts)
			}
			seen[*tk.Item] = true
			wcall(t, c, "POST", "/v1/leases/"+tk.Lease+"/complete", `{"result": 1}`)
		}
	}
	if !seen[0] || !seen[1] {
		t.Errorf("pipeline items polled %v; want 0 and 1", seen)
	}
}

// GET /v1/workers shows a worker's capacity as its polls state it
// ("slots"), not the "max" of its last poll, which moves with every task
// it takes (it showed that as slots); a worker that does not state it
// shows none.
func TestWorkersListSlots(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	slotsOf := func(want string) api.WorkerInfo {
		t.Helper()
		status, data := wcall(t, c, "GET", "/v1/workers", "")
		var wl api.WorkerList
		if err := json.Unmarshal(data, &wl); status != 200 || err != nil || len(wl.Workers) != 1 {
			t.Fatalf("workers = %d %s; want one worker", status, data)
		}
		if got := wl.Workers[0]; strings.Contains(string(data), `"slots"`) != (got.Slots != nil) || got.Slots == nil && want != "-" ||
			got.Slots != nil && strconv.Itoa(*got.Slots) != want {
			t.Fatalf("%s: worker = %s; want slots %s", want, data, want)
		}
		return wl.Workers[0]
	}
	for _, max := range []int{4, 1} {
		status, data := wcall(t, c, "POST", "/v1/workers/poll", `{"worker": "w1", "handlers": ["resize"], "slots": 4, "max": `+itoa(max)+`}`)
		if status != 200 {
			t.Fatalf("poll = %d %s", status, data)
		}
		if w := slotsOf("4"); w.Asked != max {
			t.Errorf("after a poll for %d: asked %d; want %d", max, w.Asked, max)
		}
	}
	poll(t, c, "w1", `"resize"`, 2, "0s") // as an older worker: no slots
	if w := slotsOf("-"); w.Asked != 2 {
		t.Errorf("after a poll without slots: asked %d; want 2", w.Asked)
	}
}
