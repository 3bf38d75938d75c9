//go:build browser

package dash

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The browser test of the dashboard's views, run by .ci/dashboard-test.sh
// against real peers (go test -tags browser ./peer/dash/):
//
//	NEEDLE_URL        a needled started with --exec-allow sh=/bin/sh, no token
//	                  (it serves GET /v1/workers: the workers view is checked)
//	NEEDLE_TOKEN_URL  a needled started with NEEDLE_API_TOKEN=$NEEDLE_TOKEN (optional)
//	SCREENSHOT_DIR    where one PNG per view is written
//	CHROMIUM          the browser binary (default chromium)
//	NEEDLED           the needled binary of the peers the test starts itself
//	                  (one with a read-only token); default ../../bin/needled,
//	                  which the script builds
//
// It submits real work with the API, opens each view in headless Chromium,
// checks the page shows that work, clicks the view's buttons and checks
// through the API that they did what they say.

type peerAPI struct {
	t     testing.TB
	base  string
	token string
}

func (p peerAPI) do(method, path string, body any, out any) int {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		p.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			p.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return res.StatusCode
}

type submitted struct {
	Group string            `json:"group"`
	Tasks map[string]string `json:"tasks"`
}

type taskView struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
}

// until polls the API (every 50 ms, at most 20 s) until cond holds.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 20s", what)
		}
		time.Sleep(50 * time.Millisecond) // polling a real peer, not synchronising logic
	}
}

func TestDashboardViews(t *testing.T) {
	base := os.Getenv("NEEDLE_URL")
	if base == "" {
		t.Skip("NEEDLE_URL is not set (run by .ci/dashboard-test.sh)")
	}
	shots := os.Getenv("SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	}
	shot := func(name string) string { return filepath.Join(shots, "needle-dashboard-"+name+".png") }
	ctx := t.Context()
	p := peerAPI{t: t, base: base}

	// The work the views must show.
	const failMsg = "disk full on /var/spool (dashboard test)"
	var failed, running submitted
	p.do("POST", "/v1/groups", map[string]any{"mode": "parallel", "tasks": []any{
		map[string]any{"name": "spool", "handler": "fail", "payload": map[string]any{"message": failMsg, "permanent": true}},
		map[string]any{"name": "ok", "handler": "echo", "payload": 1},
	}}, &failed)
	p.do("POST", "/v1/groups", map[string]any{"mode": "parallel", "tasks": []any{
		map[string]any{"name": "long", "handler": "sleep", "payload": map[string]any{"ms": 120000}},
	}}, &running)
	var sched struct {
		ID string `json:"id"`
	}
	p.do("POST", "/v1/schedules", map[string]any{"name": "nightly-report", "cron": "0 2 * * *",
		"group": map[string]any{"mode": "parallel", "tasks": []any{map[string]any{"handler": "echo", "payload": 1}}}}, &sched)
	spool := failed.Tasks["spool"]
	long := running.Tasks["long"]
	p.do("GET", "/v1/groups/"+failed.Group+"?wait=20s&tasks=false", nil, nil)
	until(t, "the sleep task runs", func() bool {
		var tv taskView
		p.do("GET", "/v1/tasks/"+long, nil, &tv)
		return tv.State == "RUNNING"
	})

	browser := mustBrowser(t)

	t.Run("groups", func(t *testing.T) {
		b := browser.on(t)
		b.navigate(base + "/#groups")
		b.waitJS(ctx, "the failed group's row", `document.querySelector('#list tr[data-id="`+failed.Group+`"] .s-FAILED')`)
		b.waitJS(ctx, "the running group's row", `document.querySelector('#list tr[data-id="`+running.Group+`"] .s-RUNNING')`)
		b.screenshot(shot("groups"))
		// Filters: only FAILED groups.
		b.navigate(base + "/#groups?state=FAILED")
		b.waitJS(ctx, "the FAILED filter", `document.querySelector('#list tr[data-id="`+failed.Group+`"]') && !document.querySelector('#list tr[data-id="`+running.Group+`"]')`)
		// Cancel asks for a second click, then cancels the group.
		b.navigate(base + "/#groups?state=RUNNING")
		sel := `#list tr[data-id="` + running.Group + `"] button.danger`
		b.waitJS(ctx, "the cancel button", `document.querySelector('`+sel+`')`)
		b.click(sel)
		b.waitJS(ctx, "the confirm step", `document.querySelector('`+sel+`').textContent.includes('Confirm')`)
		b.click(sel)
		until(t, "the group canceled through the button", func() bool {
			var tv taskView
			p.do("GET", "/v1/tasks/"+long, nil, &tv)
			return tv.State == "CANCELED"
		})
	})

	t.Run("failed", func(t *testing.T) {
		b := browser.on(t)
		b.navigate(base + "/#failed")
		row := `#list tr[data-id="` + spool + `"]`
		b.waitJS(ctx, "the failed task with its error", `document.querySelector('`+row+` .error-text') && document.querySelector('`+row+` .error-text').textContent === `+jsString(failMsg))
		b.screenshot(shot("failed"))
		var before taskView
		p.do("GET", "/v1/tasks/"+spool, nil, &before)
		b.click(row + ` button.primary`)
		until(t, "the task run again through the retry button", func() bool {
			var tv taskView
			p.do("GET", "/v1/tasks/"+spool, nil, &tv)
			return tv.Attempt == before.Attempt+1 && tv.State == "FAILED"
		})
		var ev struct {
			Events []struct{ Type string } `json:"events"`
		}
		p.do("GET", "/v1/tasks/"+spool+"/events", nil, &ev)
		leased := 0
		for _, e := range ev.Events {
			if e.Type == "leased" {
				leased++
			}
		}
		if leased != 2 {
			t.Errorf("after the retry click the task was leased %d times; want 2 (%+v)", leased, ev.Events)
		}
		b.waitJS(ctx, "the retried task's attempts in the list", `document.querySelector('`+row+` td.num') && document.querySelector('`+row+` td.num').textContent === '2'`)

		// Retry these N: every FAILED task of the page (filtered to one
		// group), after a confirming second click.
		var three submitted
		fail := map[string]any{"handler": "fail", "payload": map[string]any{"message": "bulk (dashboard test)", "permanent": true}}
		p.do("POST", "/v1/groups", map[string]any{"mode": "parallel", "tasks": []any{fail, fail, fail}}, &three)
		p.do("GET", "/v1/groups/"+three.Group+"?wait=20s&tasks=false", nil, nil)
		b.navigate(base + "/#failed?q=" + three.Group)
		b.waitJS(ctx, "the bulk retry button", `document.querySelector('#list-bulk button') && document.querySelector('#list-bulk button').textContent === 'Retry these 3'`)
		b.click(`#list-bulk button`)
		b.waitJS(ctx, "the bulk retry asking to confirm", `document.querySelector('#list-bulk button').textContent === 'Confirm: retry 3'`)
		b.click(`#list-bulk button`)
		until(t, "the three tasks run again through the bulk retry", func() bool {
			var g struct {
				Tasks []taskView `json:"tasks"`
			}
			p.do("GET", "/v1/groups/"+three.Group, nil, &g)
			n := 0
			for _, tv := range g.Tasks {
				if tv.Attempt == 2 && tv.State == "FAILED" {
					n++
				}
			}
			return n == 3
		})
		b.waitJS(ctx, "the note of the bulk retry", `document.body.textContent.includes('retried 3 of 3 tasks')`)
		b.screenshot(shot("failed-bulk"))
	})

	t.Run("pipeline", func(t *testing.T) {
		b := browser.on(t)
		// A streaming pipeline shows each stage's progress and its
		// skipped items, which the task graph does not.
		var pipe submitted
		p.do("POST", "/v1/groups", map[string]any{"mode": "pipeline", "key": "nightly-import",
			"stages": []any{
				map[string]any{"name": "parse", "handler": "echo", "concurrency": 2},
				map[string]any{"name": "load", "handler": "fail", "retry": map[string]any{"max_attempts": 1}},
			},
			"items": []any{
				map[string]any{"message": "row 7: no such date 2026-02-30", "permanent": true},
				map[string]any{"message": "row 12: empty account", "permanent": true},
				map[string]any{"message": "row 31: amount not a number", "permanent": true},
			}}, &pipe)
		p.do("GET", "/v1/groups/"+pipe.Group+"?wait=20s&tasks=false", nil, nil)
		b.navigate(base + "/#group=" + pipe.Group)
		b.waitJS(ctx, "the stage table", `(() => { const t = document.querySelector('#group-extra table.stages');
			return t && t.textContent.includes('parse') && t.textContent.includes('3 / 3') && t.textContent.includes('unbounded') })()`)
		b.waitJS(ctx, "the skipped items", `document.querySelector('#group-extra .skipped-note') && document.querySelector('#group-extra .skipped-note').textContent.startsWith('3 items skipped')`)
		b.waitJS(ctx, "the group's key", `document.querySelector('#group-extra').textContent.includes('nightly-import')`)
		b.screenshot(shot("pipeline"))

		// A group's concurrency is shown with its fields.
		var capped submitted
		echo := map[string]any{"handler": "echo", "payload": 1}
		p.do("POST", "/v1/groups", map[string]any{"mode": "parallel", "concurrency": 2, "tasks": []any{echo, echo, echo}}, &capped)
		b.navigate(base + "/#group=" + capped.Group)
		b.waitJS(ctx, "the group's concurrency", `document.querySelector('#group-extra').textContent.includes('2 at a time')`)
	})

	t.Run("task", func(t *testing.T) {
		b := browser.on(t)
		// The task prints a line, then waits for a file the test creates
		// once the page shows that line, then prints another: the second
		// line can only reach the page through the live follow.
		gate := filepath.Join(t.TempDir(), "gate")
		var logged struct {
			ID string `json:"id"`
		}
		p.do("POST", "/v1/tasks", map[string]any{"handler": "exec", "payload": map[string]any{
			"command": "sh", "args": []string{"-c", `echo 'first line from the task' >&2; while [ ! -e "$0" ]; do sleep 0.05; done; echo 'second line, followed live' >&2`, gate}}}, &logged)
		b.navigate(base + "/#task=" + logged.ID)
		b.waitJS(ctx, "the first log line", `document.querySelector('#logs').textContent.includes('first line from the task')`)
		b.waitJS(ctx, "the task shown RUNNING", `document.querySelector('#task-meta .s-RUNNING')`)
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		b.waitJS(ctx, "the followed second line", `document.querySelector('#logs').textContent.includes('second line, followed live')`)
		b.waitJS(ctx, "the task SUCCEEDED", `document.querySelector('#task-meta .s-SUCCEEDED')`)
		b.screenshot(shot("task"))
		// A failed task shows its error and a Retry button.
		b.navigate(base + "/#task=" + spool)
		b.waitJS(ctx, "the failed task's error", `document.querySelector('#task-fields .err') && document.querySelector('#task-fields .err').textContent === `+jsString(failMsg))
		b.waitJS(ctx, "the retry button", `document.querySelector('#task-actions button.primary')`)
		// A READY task no peer may run says why, and what it requires.
		var stuck struct {
			ID string `json:"id"`
		}
		p.do("POST", "/v1/tasks", map[string]any{"handler": "echo", "payload": 1, "require": []string{"zone=nowhere"}}, &stuck)
		b.navigate(base + "/#task=" + stuck.ID)
		b.waitJS(ctx, "why the task waits", `document.querySelector('#task-fields .waiting') && document.querySelector('#task-fields .waiting').textContent === 'no live peer has labels zone=nowhere'`)
		b.waitJS(ctx, "the labels it requires", `document.querySelector('#task-fields').textContent.includes('requires') && document.querySelector('#task-fields').textContent.includes('zone=nowhere')`)
		b.screenshot(shot("task-waiting"))
		p.do("POST", "/v1/tasks/"+stuck.ID+"/cancel", nil, nil)
	})

	t.Run("schedules", func(t *testing.T) {
		b := browser.on(t)
		b.navigate(base + "/#schedules")
		row := `#schedules tr[data-id="` + sched.ID + `"]`
		b.waitJS(ctx, "the schedule with its next fire", `document.querySelector('`+row+`') && document.querySelector('`+row+`').textContent.includes('0 2 * * *') && document.querySelector('`+row+`').textContent.includes(' in ')`)
		b.click(row + ` button[data-focus-key="trigger:` + sched.ID + `"]`)
		b.waitJS(ctx, "the manual firing", `document.querySelector('`+row+` a.firing')`)
		var s struct {
			Paused  bool `json:"paused"`
			Firings []struct {
				Manual bool `json:"manual"`
			} `json:"firings"`
		}
		p.do("GET", "/v1/schedules/"+sched.ID, nil, &s)
		if len(s.Firings) != 1 || !s.Firings[0].Manual {
			t.Errorf("after the trigger click: firings %+v; want one manual", s.Firings)
		}
		b.click(row + ` button[data-focus-key="pause:` + sched.ID + `"]`)
		until(t, "the schedule paused through the button", func() bool {
			p.do("GET", "/v1/schedules/"+sched.ID, nil, &s)
			return s.Paused
		})
		b.waitJS(ctx, "the resume button", `document.querySelector('`+row+` button[data-focus-key="resume:`+sched.ID+`"]')`)
		b.screenshot(shot("schedules"))
	})

	t.Run("audit", func(t *testing.T) {
		b := browser.on(t)
		b.navigate(base + "/#audit")
		b.waitJS(ctx, "the trigger in the audit trail", `document.querySelector('#audit tbody').textContent.includes('schedule_triggered')`)
		b.waitJS(ctx, "the pause in the audit trail", `document.querySelector('#audit tbody').textContent.includes('schedule_paused')`)
		b.waitJS(ctx, "the cancel in the audit trail", `document.querySelector('#audit tbody').textContent.includes(`+jsString(running.Group)+`)`)
		b.screenshot(shot("audit"))
	})

	t.Run("workers", func(t *testing.T) {
		b := browser.on(t)
		// A worker waiting in a long poll is a live worker.
		pollCtx, stop := context.WithCancel(ctx)
		defer stop()
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			body := strings.NewReader(`{"worker": "dash-test-worker", "handlers": ["dash-test-resize"], "max": 4, "slots": 4, "wait": "30s"}`)
			req, _ := http.NewRequestWithContext(pollCtx, "POST", base+"/v1/workers/poll", body)
			req.Header.Set("Content-Type", "application/json")
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
		until(t, "the worker listed by the API", func() bool {
			var ws struct {
				Workers []struct{ ID string } `json:"workers"`
			}
			p.do("GET", "/v1/workers", nil, &ws)
			return len(ws.Workers) == 1 && ws.Workers[0].ID == "dash-test-worker"
		})
		b.navigate(base + "/#workers")
		row := `#workers tr[data-id="dash-test-worker"]`
		b.waitJS(ctx, "the workers tab shown", `!document.querySelector('#nav a[data-view="workers"]').hidden`)
		b.waitJS(ctx, "the worker's row", `document.querySelector('`+row+`') && document.querySelector('`+row+`').textContent.includes('dash-test-resize') && document.querySelector('`+row+`').textContent.includes('0 / 4')`)
		b.screenshot(shot("workers"))
		stop()
		<-polled
		// The peer learns the poll is gone when it reads the closed
		// connection; a task submitted before that would be handed to
		// the gone poll and held under its lease.
		until(t, "the canceled poll no longer waiting", func() bool {
			var ws struct {
				Workers []struct {
					ID      string
					Polling bool
				} `json:"workers"`
			}
			p.do("GET", "/v1/workers", nil, &ws)
			return len(ws.Workers) == 1 && !ws.Workers[0].Polling
		})

		// A worker that polls again as another instance restarted: it died
		// holding its task, which the task view shows.
		var one struct {
			ID string `json:"id"`
		}
		p.do("POST", "/v1/tasks", map[string]any{"handler": "dash-test-resize", "payload": 1}, &one)
		var got struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		poll := map[string]any{"worker": "dash-test-worker", "instance": "first", "handlers": []string{"dash-test-resize"}, "max": 1, "wait": "10s"}
		p.do("POST", "/v1/workers/poll", poll, &got)
		if len(got.Tasks) != 1 || got.Tasks[0].ID != one.ID {
			t.Fatalf("poll = %+v; want %s", got, one.ID)
		}
		poll["instance"], poll["wait"] = "second", "1s"
		p.do("POST", "/v1/workers/poll", poll, nil)
		until(t, "the worker's death recorded with the task", func() bool {
			var tv struct {
				WorkerDeaths *struct{ Alone int } `json:"worker_deaths"`
			}
			p.do("GET", "/v1/tasks/"+one.ID, nil, &tv)
			return tv.WorkerDeaths != nil && tv.WorkerDeaths.Alone == 1
		})
		b.navigate(base + "/#task=" + one.ID)
		b.waitJS(ctx, "the task's worker deaths", `document.querySelector('#task-fields').textContent.includes('1 alone · 0 beside other tasks')`)
	})

	t.Run("overview", func(t *testing.T) {
		b := browser.on(t)
		b.navigate(base + "/#track=" + failed.Group)
		b.waitJS(ctx, "the throughput chart's bars", `document.querySelector('#chart rect.b-SUCCEEDED') && document.querySelector('#chart rect.b-FAILED')`)
		b.waitJS(ctx, "the handlers table", `[...document.querySelectorAll('#handlers tbody th')].map((n) => n.textContent).join(',').includes('fail')`)
		b.waitJS(ctx, "the tracked group's DAG", `document.querySelector('#dag .node.s-FAILED')`)
		var peers struct {
			Self  string `json:"self"`
			Peers []struct {
				ID      string `json:"id"`
				Version string `json:"version"`
			} `json:"peers"`
		}
		p.do("GET", "/v1/peers", nil, &peers)
		version := "unknown"
		for _, x := range peers.Peers {
			if x.ID == peers.Self && x.Version != "" {
				version = x.Version
			}
		}
		b.waitJS(ctx, "the peer's version", `document.querySelector('#peers tr.self-row td.version') && document.querySelector('#peers tr.self-row td.version').textContent === `+jsString(version))
		// A handler whose READY tasks no live worker serves says so.
		var lonely struct {
			ID string `json:"id"`
		}
		p.do("POST", "/v1/tasks", map[string]any{"handler": "dash-test-nobody", "payload": 1}, &lonely)
		b.waitJS(ctx, "the handler no worker serves", `[...document.querySelectorAll('#handlers .waiting-note')].some((n) => n.textContent === 'no live worker serves handler "dash-test-nobody"')`)
		b.screenshot(shot("overview"))
		p.do("POST", "/v1/tasks/"+lonely.ID+"/cancel", nil, nil)
	})

	// Submit example with a token that may only read: the 403 stays in
	// the status line over the refreshes that follow, and says which
	// scope to get (audit F15: it was cleared by the next refresh).
	t.Run("readonly", func(t *testing.T) {
		const admin, reader = "dash-admin-token-0123456789", "dash-read-token-0123456789"
		roURL := startNeedled(t, admin+" name=adm\n"+reader+" name=viewer scope=read\n")
		b := browser.on(t)
		b.navigate(roURL + "/#")
		if err := b.eval(`localStorage.setItem('needle.dash.token', `+jsString(reader)+`)`, nil); err != nil {
			t.Fatal(err)
		}
		b.navigate(roURL + "/#")
		b.waitJS(ctx, "the page live with the read token", `document.querySelector('#status').className.includes('ok') && document.querySelector('#status').textContent.startsWith('live')`)
		// Count the refreshes: each starts with GET /v1/peers.
		if err := b.eval(`(() => { window.dashRefreshes = 0; const f = window.fetch;
			window.fetch = (path, ...rest) => { if (String(path) === '/v1/peers') window.dashRefreshes++; return f(path, ...rest); }; })()`, nil); err != nil {
			t.Fatal(err)
		}
		b.click(`#submit-example`)
		const refused = `document.querySelector('#status').textContent.includes('submit example failed: 403 forbidden') &&
			document.querySelector('#status').textContent.includes('set a token with the submit scope')`
		b.waitJS(ctx, "the refusal in the status line", refused)
		var n int
		if err := b.eval(`window.dashRefreshes`, &n); err != nil {
			t.Fatal(err)
		}
		// Two refreshes started after it: the first of them has ended.
		b.waitJS(ctx, "a refresh after the refusal", `window.dashRefreshes >= `+strconv.Itoa(n+2))
		var status string
		if err := b.eval(`document.querySelector('#status').textContent`, &status); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(status, "403 forbidden") || !strings.Contains(status, "submit scope") {
			t.Errorf("status line after a refresh = %q; want the 403 of Submit example still, naming the submit scope", status)
		}
		b.screenshot(shot("readonly"))
		var groups struct {
			Groups []json.RawMessage `json:"groups"`
		}
		peerAPI{t: t, base: roURL, token: admin}.do("GET", "/v1/groups", nil, &groups)
		if len(groups.Groups) != 0 {
			t.Errorf("the read token's Submit example created %d groups", len(groups.Groups))
		}
	})

	if tokURL := os.Getenv("NEEDLE_TOKEN_URL"); tokURL != "" {
		t.Run("token", func(t *testing.T) {
			b := browser.on(t)
			tok := os.Getenv("NEEDLE_TOKEN")
			tp := peerAPI{t: t, base: tokURL, token: tok}
			var g submitted
			tp.do("POST", "/v1/groups", map[string]any{"tasks": []any{map[string]any{"name": "a", "handler": "fail", "payload": map[string]any{"permanent": true}}}}, &g)
			tp.do("GET", "/v1/groups/"+g.Group+"?wait=20s&tasks=false", nil, nil)
			b.navigate(tokURL + "/#failed")
			b.waitJS(ctx, "the token dialog", `document.querySelector('#token-dialog').open && document.querySelector('#token-dialog-why').textContent.includes('token')`)
			b.screenshot(shot("token"))
			if err := b.eval(`(() => { document.querySelector('#token-dialog-input').value = `+jsString(tok)+`;
				document.querySelector('#token-dialog-form button[value=ok]').click(); })()`, nil); err != nil {
				t.Fatal(err)
			}
			b.waitJS(ctx, "the failed task once the token is given", `document.querySelector('#list tr[data-id="`+g.Tasks["a"]+`"]')`)
			b.click(`#list tr[data-id="` + g.Tasks["a"] + `"] button.primary`)
			until(t, "the retry sent with the token", func() bool {
				var tv taskView
				tp.do("GET", "/v1/tasks/"+url.PathEscape(g.Tasks["a"]), nil, &tv)
				return tv.Attempt == 2
			})
			var status string
			_ = b.eval(`document.querySelector('#status').className`, &status)
			if !strings.Contains(status, "ok") {
				t.Errorf("status line %q after the token was given", status)
			}
		})
	}
}

// startNeedled starts a needled of its own whose --api-token-file holds
// tokens (the binary the CI script built, ../../bin/needled, or $NEEDLED)
// and returns its base URL once it is healthy; it is stopped at the end of
// the test.
func startNeedled(t *testing.T, tokens string) string {
	t.Helper()
	bin := os.Getenv("NEEDLED")
	if bin == "" {
		bin = filepath.Join("..", "..", "bin", "needled")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("needled binary %s: %v (build it: go build -o bin/ ./cmd/needled)", bin, err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "api.tokens")
	if err := os.WriteFile(file, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for needled's --http
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--data", filepath.Join(dir, "data"), "--http", addr,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--api-token-file", file)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEEDLE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once it exited, waitErr set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("needled %s log:\n%s", addr, logs.String())
		}
	})
	base := "http://" + addr
	until(t, "needled "+addr+" healthy", func() bool {
		select {
		case <-exited:
			t.Fatalf("needled %s exited: %v\n%s", addr, waitErr, logs.String())
		default:
		}
		res, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	return base
}
