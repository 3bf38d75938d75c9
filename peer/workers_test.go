package peer

import (
	"bytes"
	"context"

	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// wcall sends one request to a peer's API and returns the status and body.
func wcall(t *testing.T, c *api.Client, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, c.BaseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP // an in-memory mesh's peers answer through their own
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// poll polls a peer as worker for handlers and returns the tasks.
func poll(t *testing.T, c *api.Client, worker, handlers string, max int, wait string) []api.WorkerTask {
	t.Helper()
	body := `{"worker": "` + worker + `", "handlers": [` + handlers + `], "max": ` + itoa(max) + `, "wait": "` + wait + `"}`
	status, data := wcall(t, c, "POST", "/v1/workers/poll", body)
	if status != http.StatusOK {
		t.Fatalf("poll = %d %s", status, data)
	}
	var res api.PollResult
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("poll body %s: %v", data, err)
	}
	return res.Tasks
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// errCode returns the code of an error body.
func errCode(data []byte) string {
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error == nil {
		return ""
	}
	return eb.Error.Code
}

// leaseOne submits a task of handler and polls it as worker: its id and
// lease.
func leaseOne(t *testing.T, c *api.Client, worker, handler string) (id, lease string) {
	t.Helper()
	id = submitTask(t, c, `{"handler": "`+handler+`", "payload": 1}`)
	tasks := poll(t, c, worker, `"`+handler+`"`, 1, "10s")
	if len(tasks) != 1 || tasks[0].ID != id {
		t.Fatalf("poll = %+v; want %s", tasks, id)
	}
	return id, tasks[0].Lease
}

func submitTask(t *testing.T, c *api.Client, body string) string {
	t.Helper()
	status, data := wcall(t, c, "POST", "/v1/tasks", body)
	if status != http.StatusCreated {
		t.Fatalf("submit = %d %s", status, data)
	}
	var r api.SubmitTaskResponse
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func TestWorkerPollComplete(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	id := submitTask(t, c, `{"handler": "resize", "payload": {"w": 640}}`)
	tasks := poll(t, c, "w1", `"resize", "email"`, 8, "10s")
	if len(tasks) != 1 || tasks[0].ID != id || tasks[0].Handler != "resize" || string(tasks[0].Payload) != `{"w":640}` ||
		tasks[0].Lease == "" || tasks[0].State != "RUNNING" || tasks[0].Round != 1 {
		t.Fatalf("poll = %+v; want task %s with a lease", tasks, id)
	}
	lease := tasks[0].Lease
	if !tasks[0].Deadline.After(time.Now()) {
		t.Errorf("deadline %v is not in the future", tasks[0].Deadline)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/heartbeat", ""); status != 200 || !strings.Contains(string(data), `"canceled":false`) {
		t.Fatalf("heartbeat = %d %s", status, data)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/logs", `{"lines": ["resizing", "done"]}`); status != 200 {
		t.Fatalf("logs = %d %s", status, data)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/complete", `{"result": {"url": "x.png"}}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "SUCCEEDED" || string(got.Result) != `{"url":"x.png"}` {
		t.Fatalf("task = %+v, %v; want SUCCEEDED with the result", got, err)
	}
	// A repeat of the same outcome (its answer was lost) is a 200 and
	// changes nothing; another outcome on the same lease is lease_lost.
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/complete", `{"result": {"url": "x.png"}}`); status != 200 {
		t.Errorf("repeated complete = %d %s; want 200", status, data)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/fail", `{"error": "late"}`); status != 409 || errCode(data) != api.CodeLeaseLost {
		t.Errorf("fail after complete = %d %s; want 409 lease_lost", status, data)
	}
	if got, _ := c.GetTask(t.Context(), id, 0); got.State != "SUCCEEDED" || got.Attempt != 1 {
		t.Errorf("task after repeats = %s attempt %d; want SUCCEEDED, 1 attempt", got.State, got.Attempt)
	}
	var logs api.TaskLogs
	status, data := wcall(t, c, "GET", "/v1/tasks/"+id+"/logs", "")
	if err := json.Unmarshal(data, &logs); status != 200 || err != nil || len(logs.Lines) != 2 || logs.Lines[1].Text != "done" {
		t.Errorf("logs = %d %s; want the worker's two lines", status, data)
	}
	status, data = wcall(t, c, "GET", "/v1/workers", "")
	var wl api.WorkerList
	if err := json.Unmarshal(data, &wl); status != 200 || err != nil || len(wl.Workers) != 1 || wl.Workers[0].ID != "w1" ||
		len(wl.Workers[0].Handlers) != 2 || wl.Workers[0].Slots != nil || wl.Workers[0].Asked != 8 {
		t.Errorf("workers = %d %s; want w1 serving resize and email, asking for 8, its slots unsaid", status, data)
	}
}

// A poll that waits gets a task submitted after it started, without
// waiting for its wait to pass; one that finds nothing answers an empty
// list when its wait passes.
func TestWorkerLongPoll(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	if tasks := poll(t, c, "w1", `"thumb"`, 1, "50ms"); len(tasks) != 0 {
		t.Fatalf("poll of an empty peer = %+v; want none", tasks)
	}
	pollThenSubmit(t, c, "w1", 4)
}

// pollThenSubmit starts a long poll of worker for "thumb" (up to max
// tasks), submits a task once the peer lists the poll as waiting, and
// returns the task the poll got: the submitted one, or the test fails.
func pollThenSubmit(t *testing.T, c *api.Client, worker string, max int) api.WorkerTask {
	t.Helper()
	got := make(chan []api.WorkerTask, 1)
	go func() { got <- poll(t, c, worker, `"thumb"`, max, "2m") }()
	waitUntil(t, func() bool {
		status, data := wcall(t, c, "GET", "/v1/workers", "")
		return status == 200 && strings.Contains(string(data), `"polling":true`)
	})
	id := submitTask(t, c, `{"handler": "thumb", "payload": 1}`)
	select {
	case tasks := <-got:
		if len(tasks) != 1 || tasks[0].ID != id {
			t.Fatalf("poll = %+v; want %s", tasks, id)
		}
		return tasks[0]
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting poll got nothing")
	}
	return api.WorkerTask{}
}

// waitUntil polls cond until it holds (or the test's deadline).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("condition not reached in 30 s")
		}
	}
}

// A worker that stops polling and heartbeating is dead after the TTL: its
// task runs again (a new round, no attempt spent) and its late outcome is
// refused with lease_lost, changing nothing.
func TestWorkerDeadTaskRunsAgain(t *testing.T) {
	_, c := startPeerWith(t, Config{WorkerTTL: time.Second})
	id := submitTask(t, c, `{"handler": "resize", "payload": 1, "retry": {"max_attempts": 1}}`)
	first := poll(t, c, "dies", `"resize"`, 1, "10s")
	if len(first) != 1 {
		t.Fatalf("poll = %+v", first)
	}
	second := pollRerun(t, c, id)
	status, data := wcall(t, c, "POST", "/v1/leases/"+first[0].Lease+"/complete", `{"result": "late"}`)
	if status != 409 || errCode(data) != api.CodeLeaseLost {
		t.Fatalf("late complete = %d %s; want 409 lease_lost", status, data)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+second[0].Lease+"/complete", `{"result": "ok"}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "SUCCEEDED" || string(got.Result) != `"ok"` {
		t.Fatalf("task = %+v, %v; want SUCCEEDED with the live worker's result", got, err)
	}
}

// pollRerun polls as worker "lives" until it gets task id again, in round
// 2: the worker that held it went silent and was found dead.
func pollRerun(t *testing.T, c *api.Client, id string) []api.WorkerTask {
	t.Helper()
	var got []api.WorkerTask
	waitUntil(t, func() bool {
		got = poll(t, c, "lives", `"resize"`, 1, "100ms")
		return len(got) == 1
	})
	if got[0].ID != id || got[0].Round != 2 {
		t.Fatalf("second poll = %+v; want %s in round 2 (the silent worker found dead)", got, id)
	}
	return got
}

// A heartbeat after the task was canceled says so; the worker's outcome
// is then refused.
func TestWorkerHeartbeatCanceled(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	id := submitTask(t, c, `{"handler": "long", "payload": 1}`)
	tasks := poll(t, c, "w", `"long"`, 1, "10s")
	if len(tasks) != 1 {
		t.Fatalf("poll = %+v", tasks)
	}
	if _, err := c.CancelTask(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	status, data := wcall(t, c, "POST", "/v1/leases/"+tasks[0].Lease+"/heartbeat", "")
	if status != 200 || !strings.Contains(string(data), `"canceled":true`) {
		t.Fatalf("heartbeat = %d %s; want canceled", status, data)
	}
	status, data = wcall(t, c, "POST", "/v1/leases/"+tasks[0].Lease+"/complete", `{"result": 1}`)
	if status != 409 || errCode(data) != api.CodeLeaseLost {
		t.Fatalf("complete after cancel = %d %s; want 409 lease_lost", status, data)
	}
	if got, _ := c.GetTask(t.Context(), id, 0); got.State != "CANCELED" {
		t.Errorf("task = %s; want CANCELED", got.State)
	}
}

// A result over --max-result is a 400 naming result, and the task fails
// permanently as a built-in's oversized result does.
func TestWorkerResultTooLarge(t *testing.T) {
	_, c := startPeerWith(t, Config{MaxResult: 100})
	id := submitTask(t, c, `{"handler": "big", "payload": 1, "retry": {"max_attempts": 5}}`)
	tasks := poll(t, c, "w", `"big"`, 1, "10s")
	big := `{"result": "` + strings.Repeat("x", 200) + `"}`
	status, data := wcall(t, c, "POST", "/v1/leases/"+tasks[0].Lease+"/complete", big)
	var eb api.ErrorBody
	if status != 400 || json.Unmarshal(data, &eb) != nil || eb.Error.Field != "result" {
		t.Fatalf("complete = %d %s; want 400 naming result", status, data)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "FAILED" || got.Error == nil || !strings.Contains(*got.Error, "over the limit") {
		t.Fatalf("task = %+v, %v; want FAILED for good", got, err)
	}
}

func TestWorkerBadInput(t *testing.T) {
	_, c := startPeerWith(t, Config{Token: "secret"})
	c.Token = "secret"
	for _, tt := range []struct {
		name, path, body string
		status           int
		field            string
	}{
		{"no handlers", "/v1/workers/poll", `{"worker": "w"}`, 400, "handlers"},
		{"empty handlers", "/v1/workers/poll", `{"worker": "w", "handlers": []}`, 400, "handlers"},
		{"empty handler", "/v1/workers/poll", `{"worker": "w", "handlers": [""]}`, 400, "handlers[0]"},
		{"malformed handler", "/v1/workers/poll", `{"worker": "w", "handlers": ["a", "b c"]}`, 400, "handlers[1]"},
		{"max over", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "max": 1001}`, 400, "max"},
		{"max under", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "max": 0}`, 400, "max"},
		{"wait over", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "wait": "6m"}`, 400, "wait"},
		{"wait bad", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "wait": "soon"}`, 400, "wait"},
		{"unknown field", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "size": 3}`, 400, "size"},
		{"slots over", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "slots": 1001}`, 400, "slots"},
		{"slots under", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "slots": 0}`, 400, "slots"},
		{"no worker", "/v1/workers/poll", `{"handlers": ["a"]}`, 400, "worker"},
		{"bad instance", "/v1/workers/poll", `{"worker": "w", "instance": "a\u0001", "handlers": ["a"]}`, 400, "instance"},
		{"bad label", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "labels": ["zone"]}`, 400, "labels[0]"},
		{"built-in handler", "/v1/workers/poll", `{"worker": "w", "handlers": ["resize", "echo"]}`, 400, "handlers[1]"},
		{"built-in handler, exec", "/v1/workers/poll", `{"worker": "w", "handlers": ["exec"]}`, 400, "handlers[0]"},
		{"label key twice", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "labels": ["a=1", "a=2"]}`, 400, "labels[1]"},
		{"label key twice, later", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"], "labels": ["a=1", "b=1", "a=1", "b=2"]}`, 400, "labels[3]"},
		{"unknown lease", "/v1/leases/00112233445566778899aabbccddeeff/complete", `{"result": 1}`, 404, ""},
		{"malformed lease", "/v1/leases/not-a-lease/complete", `{"result": 1}`, 400, "lease"},
		{"fail without error", "/v1/leases/00112233445566778899aabbccddeeff/fail", `{}`, 400, "error"},
		{"complete unknown field", "/v1/leases/00112233445566778899aabbccddeeff/complete", `{"resul": 1}`, 400, "resul"},
		{"heartbeat unknown lease", "/v1/leases/00112233445566778899aabbccddeeff/heartbeat", ``, 404, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, data := wcall(t, c, "POST", tt.path, tt.body)
			var eb api.ErrorBody
			if status != tt.status || json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Field != tt.field {
				t.Errorf("POST %s %s = %d %s; want %d naming %q", tt.path, tt.body, status, data, tt.status, tt.field)
			}
		})
	}
	c.Token = ""
	if status, _ := wcall(t, c, "POST", "/v1/workers/poll", `{"worker": "w", "handlers": ["a"]}`); status != 401 {
		t.Errorf("poll without the token = %d; want 401", status)
	}
}

// A poll for a handler that runs in the peers (built in, or registered by
// the program) is refused, naming it: its tasks never go to workers, so
// the worker would wait for ever, listed as serving it.
func TestPollInPeersHandler(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	if err := p.Handlers().Register("upper", func(context.Context, Call) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"echo", "sleep", "fail", "exec", "http", "upper"} {
		status, data := wcall(t, c, "POST", "/v1/workers/poll", `{"worker": "w", "handlers": ["resize", "`+h+`"]}`)
		var eb api.ErrorBody
		if status != 400 || json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Field != "handlers[1]" ||
			!strings.Contains(eb.Error.Message, `handler "`+h+`" runs in the peers (built in or registered), never in external workers`) {
			t.Errorf("poll for %q = %d %s; want 400 naming handlers[1], saying it runs in the peers", h, status, data)
		}
	}
	status, data := wcall(t, c, "GET", "/v1/workers", "")
	if status != 200 || bytes.Contains(data, []byte(`"id":"w"`)) {
		t.Errorf("GET /v1/workers = %d %s; want no worker w", status, data)
	}
}

// Any well-formed handler name may be submitted (it is external unless
// registered); --handlers strict refuses the ones not registered.
func TestSubmitExternalHandler(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	submitTask(t, c, `{"handler": "my.resize-v2", "payload": 1}`)
	status, data := wcall(t, c, "POST", "/v1/tasks", `{"handler": "bad name", "payload": 1}`)
	if status != 400 || !bytes.Contains(data, []byte(`"field":"handler"`)) {
		t.Errorf("malformed handler = %d %s; want 400 naming handler", status, data)
	}
	_, strict := startPeerWith(t, Config{StrictHandlers: true})
	status, data = wcall(t, strict, "POST", "/v1/tasks", `{"handler": "resize", "payload": 1}`)
	if status != 400 || !bytes.Contains(data, []byte("unknown handler")) {
		t.Errorf("strict peer, unknown handler = %d %s; want 400 unknown handler", status, data)
	}
}

// A retried task is handed out with the attempts made before: a worker
// tells its second attempt from its first (as exec's NEEDLE_ATTEMPT).
func TestWorkerTaskAttempt(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	id := submitTask(t, c, `{"handler": "flaky", "retry": {"max_attempts": 2, "backoff": "10ms"}}`)
	for attempt := range 2 {
		tasks := poll(t, c, "w1", `"flaky"`, 1, "10s")
		if len(tasks) != 1 || tasks[0].ID != id || tasks[0].Attempt != attempt {
			t.Fatalf("poll %d = %+v; want %s with attempt %d (attempts made)", attempt, tasks, id, attempt)
		}
		if status, data := wcall(t, c, "POST", "/v1/leases/"+tasks[0].Lease+"/fail", `{"error": "boom"}`); status != 200 {
			t.Fatalf("fail = %d %s", status, data)
		}
	}
	if got, err := c.GetTask(t.Context(), id, 10*time.Second); err != nil || got.State != "FAILED" || got.Attempt != 2 {
		t.Fatalf("task = %+v, %v; want FAILED after 2 attempts", got, err)
	}
}

// A broadcast's copy is told its shard index and the number of copies:
// in the polled task, and in a Go handler's Call.
func TestBroadcastShard(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	status, data := wcall(t, c, "POST", "/v1/groups", `{"mode":"broadcast","tasks":[{"handler":"resize","payload":1}]}`)
	if status != http.StatusCreated {
		t.Fatalf("submit = %d %s", status, data)
	}
	tasks := poll(t, c, "w", `"resize"`, 1, "10s")
	if len(tasks) != 1 || tasks[0].Shard == nil || *tasks[0].Shard != 0 || tasks[0].Shards == nil || *tasks[0].Shards != 1 {
		t.Fatalf("polled broadcast copy = %+v; want shard 0 of 1", tasks)
	}
	got := make(chan [2]int, 1)
	if err := p.Handlers().Register("shardy", func(_ context.Context, call Call) ([]byte, error) {
		got <- [2]int{call.Shard, call.Shards}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	status, data = wcall(t, c, "POST", "/v1/groups", `{"mode":"broadcast","tasks":[{"handler":"shardy","payload":1}]}`)
	if status != http.StatusCreated {
		t.Fatalf("submit = %d %s", status, data)
	}
	select {
	case s := <-got:
		if s != [2]int{0, 1} {
			t.Errorf("Call shard = %v; want 0 of 1", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the broadcast's handler did not run")
	}
}

// A hub with nothing to sweep stops its ticker (an idle peer costs no
// wakeups there); a worker's first poll, or a run for the workers, starts
// the sweeps again, so a worker that then goes silent is still found dead
// and its task runs again.
func TestWorkerHubWakesFromIdle(t *testing.T) {
	p, c := startPeerWith(t, Config{WorkerTTL: time.Second})
	waitUntil(t, func() bool { return p.hub.parked.Load() > 0 })
	first := poll(t, c, "dies", `"resize"`, 1, "100ms") // registers the worker
	if len(first) != 0 {
		t.Fatalf("poll = %+v; want nothing yet", first)
	}
	parked := p.hub.parked.Load()
	id := submitTask(t, c, `{"handler": "resize", "payload": 1, "retry": {"max_attempts": 1}}`)
	got := poll(t, c, "dies", `"resize"`, 1, "10s")
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("poll = %+v; want %s", got, id)
	}
	pollRerun(t, c, id)
	if p.hub.parked.Load() != parked {
		t.Fatalf("the hub parked while it held a worker and a lease")
	}
}

// A worker's error text of any size (its whole traceback, a response body
// in an exception) is cut in the middle to shard.MaxErrorBytes: 24 MB of
// it in one outcome was one entry over the log's largest record, and the
// peer exited after answering 200.
func TestWorkerHugeErrorIsCut(t *testing.T) {
	// A worker TTL well above what sending 24 MB takes on a loaded
	// machine: the worker is silent while it uploads (a lease lost to
	// its TTL once, in CI).
	_, c := startPeerWith(t, Config{WorkerTTL: 2 * time.Minute})
	id, lease := leaseOne(t, c, "w", "chatty")
	msg := "Traceback: " + strings.Repeat("é", 12<<20) + " ValueError: the end"
	body, _ := json.Marshal(map[string]string{"error": msg})
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/fail", string(body)); status != 200 {
		t.Fatalf("fail = %d %.200s", status, data)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "FAILED" || got.Error == nil {
		t.Fatalf("task = %+v, %v; want FAILED", got, err)
	}
	e := *got.Error
	if len(e) > shard.MaxErrorBytes || !utf8.ValidString(e) || !strings.HasPrefix(e, "Traceback: éé") ||
		!strings.HasSuffix(e, "éé ValueError: the end") || !strings.Contains(e, "bytes cut") {
		t.Errorf("error of %d bytes = %.80q ... %.80q; want the head and tail of the message, cut to %d", len(e), e, e[max(0, len(e)-80):], shard.MaxErrorBytes)
	}
	// The peer is up and takes work.
	id2 := submitTask(t, c, `{"handler": "chatty", "payload": 2}`)
	if tasks := poll(t, c, "w", `"chatty"`, 1, "10s"); len(tasks) != 1 || tasks[0].ID != id2 {
		t.Fatalf("poll after = %+v; want %s", tasks, id2)
	}
}

// A release hands a task back unrun, without spending an attempt: a
// worker that stops hands back what it has not started (the clients did a
// fail, which spent the attempt and, with one attempt, failed the task for
// good, where a kill -9 of the worker would not have).
func TestWorkerRelease(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	id, l1 := leaseOne(t, c, "w1", "resize")
	for range 2 { // the repeat of a release is a 200 too
		if status, data := wcall(t, c, "POST", "/v1/leases/"+l1+"/release", `{"reason": "stopping"}`); status != 200 {
			t.Fatalf("release = %d %s", status, data)
		}
	}
	// w1 asks for nothing now: its free slot left the demand, so the task
	// is not leased straight back to it, to wait there for a poll that
	// will not come (until the worker is found gone).
	p.hub.mu.Lock()
	standing := p.hub.workers["w1"].polled
	p.hub.mu.Unlock()
	if !standing.IsZero() {
		t.Errorf("w1 still stands for work (polled %v) after handing its task back", standing)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+l1+"/complete", `{"result": 1}`); status != 409 || errCode(data) != api.CodeLeaseLost {
		t.Fatalf("complete after release = %d %s; want 409 lease_lost", status, data)
	}
	tasks := poll(t, c, "w2", `"resize"`, 1, "10s")
	if len(tasks) != 1 || tasks[0].ID != id || tasks[0].Round != 2 || tasks[0].Attempt != 0 {
		t.Fatalf("poll after release = %+v; want %s again, round 2, no attempt spent", tasks, id)
	}
	// The batch form, on a poll's done, with an empty body's twin (no reason).
	status, data := wcall(t, c, "POST", "/v1/workers/poll",
		`{"worker": "w2", "handlers": ["resize"], "max": 1, "wait": "10s", "done": [{"lease": "`+tasks[0].Lease+`", "release": true}]}`)
	var res api.PollResult
	if status != 200 || json.Unmarshal(data, &res) != nil || len(res.Done) != 1 || res.Done[0].Status != 200 ||
		len(res.Tasks) != 1 || res.Tasks[0].ID != id || res.Tasks[0].Round != 3 {
		t.Fatalf("poll releasing = %d %s; want the release taken and the task again in round 3", status, data)
	}
	if status, data := wcall(t, c, "POST", "/v1/leases/"+res.Tasks[0].Lease+"/complete", `{"result": "done"}`); status != 200 {
		t.Fatalf("complete = %d %s", status, data)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "SUCCEEDED" || got.Attempt != 1 {
		t.Fatalf("task = %+v, %v; want SUCCEEDED after one attempt", got, err)
	}
	_, hist := wcall(t, c, "GET", "/v1/tasks/"+id+"/events", "")
	if !bytes.Contains(hist, []byte("released by worker w1: stopping")) || !bytes.Contains(hist, []byte("released by worker w2")) {
		t.Errorf("history %s; want both releases named", hist)
	}
}

func TestWorkerReleaseBadInput(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	_, lease := leaseOne(t, c, "w", "resize")
	for _, tt := range []struct {
		name, path, body, field string
	}{
		{"reason not a string", "/v1/leases/" + lease + "/release", `{"reason": 5}`, "reason"},
		{"reason too long", "/v1/leases/" + lease + "/release", `{"reason": "` + strings.Repeat("r", api.MaxReleaseReason+1) + `"}`, "reason"},
		{"unknown field", "/v1/leases/" + lease + "/release", `{"why": "x"}`, "why"},
		{"release with a result", "/v1/leases/report", `{"done": [{"lease": "` + lease + `", "release": true, "result": 1}]}`, "done[0]"},
		{"release with an error", "/v1/leases/report", `{"done": [{"lease": "` + lease + `", "release": true, "error": "x"}]}`, "done[0]"},
		{"reason without release", "/v1/leases/report", `{"done": [{"lease": "` + lease + `", "result": 1, "reason": "x"}]}`, "done[0].reason"},
	} {
		status, data := wcall(t, c, "POST", tt.path, tt.body)
		var eb api.ErrorBody
		if status != 400 || json.Unmarshal(data, &eb) != nil || eb.Error.Field != tt.field {
			t.Errorf("%s: %d %s; want 400 naming %s", tt.name, status, data, tt.field)
		}
	}
	// Nothing of it was taken: the lease is still the worker's.
	if status, data := wcall(t, c, "POST", "/v1/leases/"+lease+"/heartbeat", ""); status != 200 {
		t.Errorf("heartbeat after refused calls = %d %s", status, data)
	}
}

// A worker in a typed language writes every field: a null result beside
// an error is a fail, not "both".
func TestWorkerReportNullResultWithError(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	id, lease := leaseOne(t, c, "w", "resize")
	status, data := wcall(t, c, "POST", "/v1/leases/report",
		`{"done": [{"lease": "`+lease+`", "result": null, "error": "disk full", "permanent": true}]}`)
	if status != 200 || !bytes.Contains(data, []byte(`"status":200`)) {
		t.Fatalf("report = %d %s; want the fail taken", status, data)
	}
	got, err := c.GetTask(t.Context(), id, 10*time.Second)
	if err != nil || got.State != "FAILED" || got.Error == nil || *got.Error != "disk full" {
		t.Fatalf("task = %+v, %v; want FAILED with the error", got, err)
	}
}

// A polled task is the task as GET /v1/tasks/{id} shows it while it runs
// (docs/openapi.yaml, WorkerTask), but for the fields api.md names that
// only GET fills: a task polled after its submission applied, and one
// handed to a poll that waited as it was submitted (leased in the
// submission's own entry).
func TestWorkerTaskAsGet(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	check := func(wt api.WorkerTask) {
		t.Helper()
		got, err := c.GetTask(t.Context(), wt.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		same := func(a, b *time.Time) bool { return a != nil && b != nil && a.Equal(*b) }
		if wt.CreatedAt == nil || !same(wt.CreatedAt, got.CreatedAt) {
			t.Errorf("task %s: polled created_at %v, GET's %v", wt.ID, wt.CreatedAt, got.CreatedAt)
		}
		g := got
		g.CreatedAt, g.StartedAt = nil, nil
		w := wt.Task
		w.CreatedAt, w.StartedAt = nil, nil
		w.Priority, w.Retries, w.Error, w.Deps, w.Stage, w.Item = g.Priority, g.Retries, g.Error, g.Deps, g.Stage, g.Item
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(g)
		if string(wj) != string(gj) {
			t.Errorf("task %s: polled %s\nGET      %s", wt.ID, wj, gj)
		}
	}
	res := submitRetrying(t, c, `{"mode":"dag","tasks":[{"name":"resize-a","handler":"resize","payload":1,"priority":3,"pin":"`+p.ID()+`"}]}`)
	tasks := poll(t, c, "w1", `"resize"`, 1, "10s")
	if len(tasks) != 1 || tasks[0].ID != res.Tasks["resize-a"] {
		t.Fatalf("poll = %+v; want %s", tasks, res.Tasks["resize-a"])
	}
	check(tasks[0])

	check(pollThenSubmit(t, c, "w2", 1))
}
