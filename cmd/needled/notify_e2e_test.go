package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/webhook"
)

const hookSecret = "e2e-s3cret"

// hookCall is one request the test receiver got.
type hookCall struct {
	path, id string // id: webhook-id
	group    string
	attempt  int
	sigOK    bool
	status   int
	body     api.Group
}

// receiver is a webhook endpoint that records every call. Under /flaky it
// answers 500 to a delivery's first two attempts, then 200; elsewhere 204.
type receiver struct {
	mu    sync.Mutex
	calls []hookCall
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := hookCall{path: r.URL.Path, id: r.Header.Get("webhook-id"), status: http.StatusNoContent}
	c.attempt, _ = strconv.Atoi(r.Header.Get(webhook.HeaderAttempt))
	// The receiver's side of the Standard Webhooks check: HMAC-SHA256 of
	// id.timestamp.body under the shared secret, compared in constant
	// time, and a timestamp within 5 minutes.
	c.sigOK = r.Header.Get("Content-Type") == "application/json" && verifyStandardWebhook(r.Header, body)
	_ = json.Unmarshal(body, &c.body)
	c.group = c.body.ID
	rc.mu.Lock()
	if strings.HasPrefix(c.path, "/flaky") {
		seen := 0
		for _, p := range rc.calls {
			if p.id == c.id {
				seen++
			}
		}
		c.status = http.StatusOK
		if seen < 2 {
			c.status = http.StatusInternalServerError
		}
	}
	rc.calls = append(rc.calls, c)
	rc.mu.Unlock()
	w.WriteHeader(c.status)
}

func verifyStandardWebhook(h http.Header, body []byte) bool {
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return false
	}
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	m.Write(body)
	return hmac.Equal([]byte(h.Get("webhook-signature")), []byte("v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil))))
}

// byGroup returns the calls made for each group.
func (rc *receiver) byGroup() map[string][]hookCall {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]hookCall{}
	for _, c := range rc.calls {
		out[c.group] = append(out[c.group], c)
	}
	return out
}

// startNotifyDaemon runs needled with extra flags and environment.
// It returns the API's address.
func startNotifyDaemon(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	_, addr := runDaemon(t, bin, env, append([]string{"--data", t.TempDir(), "--http", anyPort, "--listen", "/ip4/127.0.0.1/tcp/0",
		"--slots", "4", "--drain-timeout", "-1s"}, args...)...)
	return addr
}

// TestNotifyWebhooks runs the daemon with a local receiver: every finished
// task and group is delivered exactly once with a valid signature, a
// receiver that fails twice is retried and the failures are in the task's
// history, and a URL off the allow-list is a 400 that creates nothing.
func TestNotifyWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	bin := buildNeedled(t)
	addr := startNotifyDaemon(t, bin, []string{"NEEDLE_NOTIFY_SECRET=" + hookSecret},
		"--notify-allow", srv.URL+"/ok", "--notify-allow", srv.URL+"/flaky")
	c := &api.Client{BaseURL: "http://" + addr}
	ctx := t.Context()

	groups := map[string]string{} // group id -> its task (single tasks) or ""
	for i := range 5 {
		res, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo",
			Payload: json.RawMessage(strconv.Itoa(i))}, Notify: srv.URL + "/ok"})
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		groups[res.Group] = res.ID
	}
	failed, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "fail",
		Payload: json.RawMessage(`{"permanent": true}`)}, Notify: srv.URL + "/ok/failed"})
	if err != nil {
		t.Fatal(err)
	}
	groups[failed.Group] = failed.ID
	par, err := c.SubmitGroup(ctx, &api.SubmitGroupRequest{Mode: "parallel", Notify: srv.URL + "/ok",
		Tasks: []api.GroupTask{{TaskFields: api.TaskFields{Handler: "echo"}}, {TaskFields: api.TaskFields{Handler: "echo"}}}})
	if err != nil {
		t.Fatal(err)
	}
	groups[par.Group] = ""
	pipe, err := c.SubmitGroupJSON(ctx, []byte(`{"mode": "pipeline", "notify": "`+srv.URL+`/ok",
		"stages": [{"name": "a", "handler": "echo", "concurrency": 2}, {"name": "b", "handler": "echo"}], "items": [1, 2, 3]}`))
	if err != nil {
		t.Fatal(err)
	}
	groups[pipe.Group] = ""
	flaky, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo"}, Notify: srv.URL + "/flaky"})
	if err != nil {
		t.Fatal(err)
	}
	groups[flaky.Group] = flaky.ID

	// Every group's webhook reads delivered (the flaky one after two
	// failed attempts).
	for g := range groups {
		waitUntil(t, "the webhook of "+g, func() bool {
			gr, err := c.GetGroup(ctx, g, 0)
			return err == nil && gr.Notify != nil && gr.Notify.State == "delivered"
		})
	}
	calls := rc.byGroup()
	for g, task := range groups {
		cs := calls[g]
		ok := 0
		for _, call := range cs {
			if !call.sigOK {
				t.Errorf("%s: attempt %d: signature or content type does not verify", g, call.attempt)
			}
			if call.id != cs[0].id || !strings.HasPrefix(call.id, g+"_") {
				t.Errorf("%s: attempt %d: webhook-id %q; attempt 1 had %q (one id per delivery)", g, call.attempt, call.id, cs[0].id)
			}
			if call.body.ID != g || call.body.State == "RUNNING" || len(call.body.Tasks) == 0 {
				t.Errorf("%s: body = %+v", g, call.body)
			}
			if task != "" && call.body.Tasks[0].ID != task {
				t.Errorf("%s: body's task %s; want %s", g, call.body.Tasks[0].ID, task)
			}
			if call.status/100 == 2 {
				ok++
			}
		}
		if ok != 1 {
			t.Errorf("%s: %d successful deliveries; want exactly 1 (%+v)", g, ok, cs)
		}
	}
	if st := calls[failed.Group]; len(st) != 1 || st[0].body.State != "FAILED" {
		t.Errorf("failed task's delivery = %+v", st)
	}
	fl := calls[flaky.Group]
	if len(fl) != 3 || fl[0].attempt != 1 || fl[1].attempt != 2 || fl[2].attempt != 3 || fl[2].status != http.StatusOK {
		t.Fatalf("flaky deliveries = %+v; want attempts 1, 2 (500) and 3 (200)", fl)
	}
	evs, err := c.Events(ctx, flaky.ID)
	if err != nil {
		t.Fatal(err)
	}
	var notified []api.Event
	for _, e := range evs {
		if e.Type == "notified" {
			notified = append(notified, e)
		}
	}
	if len(notified) != 3 || !strings.Contains(notified[0].Error, "status 500") || !strings.Contains(notified[1].Error, "status 500") || notified[2].Error != "" {
		t.Fatalf("flaky task's notified events = %+v", notified)
	}
	gr, _ := c.GetGroup(ctx, flaky.Group, 0)
	if gr.Notify.Attempts != 3 || gr.Notify.URL != srv.URL+"/flaky" {
		t.Fatalf("flaky group's notify = %+v", gr.Notify)
	}
	metrics := getText(t, addr, "/metrics")
	for _, want := range []string{
		fmt.Sprintf(`needle_notify_deliveries_total{result="delivered"} %d`, len(groups)),
		`needle_notify_deliveries_total{result="failed"} 2`,
		`needle_notify_delivery_seconds_count`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Off the allow-list: 400 naming notify; nothing created (the key is
	// still free afterwards).
	for _, bad := range []string{srv.URL + "/elsewhere", "http://127.0.0.1:1/ok", "ftp://x/ok"} {
		_, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo"}, Key: "k-bad", Notify: bad})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "notify" {
			t.Fatalf("notify %q: %v; want 400 naming notify", bad, err)
		}
	}
	if res, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo"}, Key: "k-bad"}); err != nil || !res.Created {
		t.Fatalf("the key of the refused submissions: %+v, %v; want it unused (201)", res, err)
	}
	before := len(rc.byGroup())
	if len(calls) != before {
		t.Fatalf("deliveries to unknown groups: %d groups called, %d expected", before, len(calls))
	}

	// A peer without an allow-list refuses notify and says why.
	plain := startNotifyDaemon(t, bin, nil)
	resp, err := http.Post("http://"+plain+"/v1/tasks", "application/json",
		bytes.NewBufferString(`{"handler": "echo", "notify": "`+srv.URL+`/ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	var eb api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || eb.Error == nil || eb.Error.Field != "notify" || !strings.Contains(eb.Error.Message, "allow-list") {
		t.Fatalf("no allow-list: %d %+v", resp.StatusCode, eb.Error)
	}
}

func getText(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
