package peer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// report sends a batch of outcomes and returns the verdicts.
func report(t *testing.T, c *api.Client, done string) []api.LeaseVerdict {
	t.Helper()
	status, data := wcall(t, c, "POST", "/v1/leases/report", `{"done": [`+done+`]}`)
	var res api.ReportResult
	if status != 200 || json.Unmarshal(data, &res) != nil {
		t.Fatalf("report = %d %s; want 200", status, data)
	}
	return res.Done
}

// statuses lists the verdicts' statuses and error codes.
func statuses(vs []api.LeaseVerdict) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%d", v.Status)
		if v.Error != nil {
			fmt.Fprintf(&b, " %s", v.Error.Code)
		}
		b.WriteString("; ")
	}
	return b.String()
}

// A batch is fenced per entry exactly as the per-lease calls are: the
// first outcome of a lease is taken, a repeat of it is a 200 that changes
// nothing, another outcome on it or an outcome on a lost lease is 409
// lease_lost, an unknown lease is 404; one entry's refusal does not stop
// the others. A poll carries a batch in "done" and answers it in order.
func TestWorkerReportBatch(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	var ids []string
	for i := range 5 {
		ids = append(ids, submitTask(t, c, fmt.Sprintf(`{"handler": "resize", "payload": %d, "retry": {"max_attempts": 3}}`, i)))
	}
	var tasks []api.WorkerTask
	waitUntil(t, func() bool {
		tasks = append(tasks, poll(t, c, "w", `"resize"`, 5-len(tasks), "1s")...)
		return len(tasks) == 5
	})
	lease := map[string]string{}
	for _, tk := range tasks {
		lease[tk.ID] = tk.Lease
	}
	if _, err := c.CancelTask(t.Context(), ids[3]); err != nil {
		t.Fatal(err)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease[ids[3]]+"/heartbeat", ""); status != 200 || !strings.Contains(string(data), `"canceled":true`) {
		t.Fatalf("heartbeat = %d %s; want canceled", status, data)
	}
	first := fmt.Sprintf(`{"lease": %q, "result": {"n": 0}}, {"lease": %q, "error": "bad input", "permanent": true},
		{"lease": %q}, {"lease": %q, "result": 3}, {"lease": "00112233445566778899aabbccddeeff", "result": 1}`,
		lease[ids[0]], lease[ids[1]], lease[ids[2]], lease[ids[3]])
	vs := report(t, c, first)
	if got, want := statuses(vs), "200; 200; 200; 409 lease_lost; 404 not_found; "; got != want || vs[2].Lease != lease[ids[2]] {
		t.Fatalf("report = %s (%+v); want %s", got, vs, want)
	}
	// The same batch again (its answer was lost): the same verdicts, no change.
	if got, want := statuses(report(t, c, first)), "200; 200; 200; 409 lease_lost; 404 not_found; "; got != want {
		t.Errorf("repeated report = %s; want %s", got, want)
	}
	// Other outcomes on the taken leases are refused, each on its own.
	other := fmt.Sprintf(`{"lease": %q, "result": {"n": 9}}, {"lease": %q, "error": "bad input", "permanent": true}`, lease[ids[0]], lease[ids[1]])
	if got, want := statuses(report(t, c, other)), "409 lease_lost; 200; "; got != want {
		t.Errorf("report of another outcome = %s; want %s", got, want)
	}
	for i, want := range []string{"SUCCEEDED", "FAILED", "SUCCEEDED", "CANCELED"} {
		got, err := c.GetTask(t.Context(), ids[i], 10*time.Second)
		if err != nil || got.State != want || (want != "CANCELED" && got.Attempt != 1) {
			t.Errorf("task %d = %+v, %v; want %s after one attempt", i, got, err, want)
		}
		if i == 0 && string(got.Result) != `{"n":0}` {
			t.Errorf("task 0 result = %s; want the first report's", got.Result)
		}
		if i == 2 && string(got.Result) != `null` {
			t.Errorf("task 2 result = %s; want null (no result)", got.Result)
		}
	}
	// A poll that reports the last lease gets its verdict, and the next task.
	next := submitTask(t, c, `{"handler": "resize", "payload": 5}`)
	body := fmt.Sprintf(`{"worker": "w", "handlers": ["resize"], "max": 1, "wait": "10s", "done": [{"lease": %q, "result": 4}]}`, lease[ids[4]])
	status, data := wcall(t, c, "POST", "/v1/workers/poll", body)
	var res api.PollResult
	if status != 200 || json.Unmarshal(data, &res) != nil || statuses(res.Done) != "200; " || res.Done[0].Lease != lease[ids[4]] ||
		len(res.Tasks) != 1 || res.Tasks[0].ID != next {
		t.Fatalf("poll with done = %d %s; want the verdict and task %s", status, data, next)
	}
	if got, err := c.GetTask(t.Context(), ids[4], 10*time.Second); err != nil || got.State != "SUCCEEDED" || string(got.Result) != "4" {
		t.Errorf("task 4 = %+v, %v; want SUCCEEDED with 4", got, err)
	}
}

// A result over --max-result in a batch fails its task permanently, and
// its verdict is the 400 of a complete, naming the entry's result.
func TestWorkerReportResultTooLarge(t *testing.T) {
	_, c := startPeerWith(t, Config{MaxResult: 100})
	id := submitTask(t, c, `{"handler": "big", "payload": 1, "retry": {"max_attempts": 5}}`)
	tasks := poll(t, c, "w", `"big"`, 1, "10s")
	vs := report(t, c, fmt.Sprintf(`{"lease": %q, "result": %q}`, tasks[0].Lease, strings.Repeat("x", 200)))
	if len(vs) != 1 || vs[0].Status != 400 || vs[0].Error == nil || vs[0].Error.Field != "done[0].result" {
		t.Fatalf("report = %+v; want a 400 naming done[0].result", vs)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "FAILED" || got.Error == nil || !strings.Contains(*got.Error, "over the limit") {
		t.Fatalf("task = %+v, %v; want FAILED for good", got, err)
	}
}

// A batch with a bad entry is a 400 naming it, and none of its entries is
// applied; nor is a poll's.
func TestWorkerReportBadInput(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	id := submitTask(t, c, `{"handler": "resize", "payload": 1}`)
	tasks := poll(t, c, "w", `"resize"`, 1, "10s")
	if len(tasks) != 1 {
		t.Fatalf("poll = %+v", tasks)
	}
	good := fmt.Sprintf(`{"lease": %q, "result": "first"}`, tasks[0].Lease)
	const other = `"00112233445566778899aabbccddeeff"`
	many := strings.TrimSuffix(strings.Repeat(`{"lease": `+other+`}, `, api.MaxReport+1), ", ")
	for _, tt := range []struct {
		name, path, body, field string
	}{
		{"no done", "/v1/leases/report", `{}`, "done"},
		{"done not a list", "/v1/leases/report", `{"done": {}}`, "done"},
		{"malformed lease", "/v1/leases/report", `{"done": [` + good + `, {"lease": "not-a-lease", "result": 1}]}`, "done[1].lease"},
		{"no lease", "/v1/leases/report", `{"done": [` + good + `, {"result": 1}]}`, "done[1].lease"},
		{"repeated lease", "/v1/leases/report", `{"done": [` + good + `, ` + good + `]}`, "done[1].lease"},
		{"unknown field", "/v1/leases/report", `{"done": [` + good + `, {"lease": ` + other + `, "resul": 1}]}`, "done[1].resul"},
		{"result and error", "/v1/leases/report", `{"done": [` + good + `, {"lease": ` + other + `, "result": 1, "error": "x"}]}`, "done[1]"},
		{"empty error", "/v1/leases/report", `{"done": [` + good + `, {"lease": ` + other + `, "error": ""}]}`, "done[1].error"},
		{"permanent success", "/v1/leases/report", `{"done": [` + good + `, {"lease": ` + other + `, "permanent": true}]}`, "done[1].permanent"},
		{"permanent not a bool", "/v1/leases/report", `{"done": [` + good + `, {"lease": ` + other + `, "error": "x", "permanent": 1}]}`, "done[1].permanent"},
		{"too many", "/v1/leases/report", `{"done": [` + many + `]}`, "done"},
		{"poll, bad entry", "/v1/workers/poll", `{"worker": "w", "handlers": ["resize"], "done": [` + good + `, {"lease": "x y"}]}`, "done[1].lease"},
		{"poll, bad max", "/v1/workers/poll", `{"worker": "w", "handlers": ["resize"], "max": 0, "done": [` + good + `]}`, "max"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, data := wcall(t, c, "POST", tt.path, tt.body)
			var eb api.ErrorBody
			if status != 400 || json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Field != tt.field {
				t.Errorf("POST %s = %d %s; want 400 naming %q", tt.path, status, data, tt.field)
			}
		})
	}
	// None of those took the good entry: the lease is still the worker's.
	if got, _ := c.GetTask(t.Context(), id, 0); got.State != "RUNNING" {
		t.Fatalf("task after the rejected batches = %s; want RUNNING", got.State)
	}
	if vs := report(t, c, fmt.Sprintf(`{"lease": %q, "result": "second"}`, tasks[0].Lease)); statuses(vs) != "200; " {
		t.Fatalf("report = %s; want 200", statuses(vs))
	}
	if got, err := c.GetTask(t.Context(), id, 10*time.Second); err != nil || string(got.Result) != `"second"` {
		t.Errorf("task = %+v, %v; want the result of the accepted batch", got, err)
	}
}

// A worker's free slots stay in the peer's demand for a while after its
// poll: tasks submitted meanwhile are leased and queued for it, and a poll
// that does not wait (wait 0) finds them.
func TestWorkerStandingDemand(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	submitTask(t, c, `{"handler": "resize", "payload": 0}`)
	if tasks := poll(t, c, "w", `"resize"`, 4, "10s"); len(tasks) != 1 {
		t.Fatalf("poll = %+v; want the task", tasks)
	}
	want := map[string]bool{}
	for i := range 3 {
		want[submitTask(t, c, fmt.Sprintf(`{"handler": "resize", "payload": %d}`, i+1))] = true
	}
	waitUntil(t, func() bool {
		for _, tk := range poll(t, c, "w", `"resize"`, 3, "0s") {
			if !want[tk.ID] {
				t.Fatalf("poll got %s; want one of %v", tk.ID, want)
			}
			delete(want, tk.ID)
		}
		return len(want) == 0
	})
}
