//go:build browser

package dash

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// browser is a headless Chromium driven over the DevTools protocol: one
// page, navigated, queried with JavaScript, clicked and photographed. It is
// the smallest client the dashboard's browser test needs (no dependency
// beyond x/net's websocket).
type browser struct {
	t testing.TB // fails the test that uses it: see on
	*cdp
}

// cdp is the DevTools connection to one page.
type cdp struct {
	cmd     *exec.Cmd
	ws      *websocket.Conn
	session string

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	done    chan struct{} // closed when the reader stops
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

var devtoolsRE = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// mustBrowser starts Chromium (the binary named by $CHROMIUM, default
// "chromium") with a fresh profile and opens one blank page, 1280x900.
func mustBrowser(t testing.TB) *browser {
	t.Helper()
	bin := os.Getenv("CHROMIUM")
	if bin == "" {
		bin = "chromium"
	}
	profile, err := os.MkdirTemp("", "needle-dash-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--remote-debugging-port=0", "--remote-allow-origins=*",
		"--user-data-dir="+profile, "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := devtoolsRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	var wsURL string
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatal("chromium exited without a DevTools address")
		}
		wsURL = u
	case <-time.After(30 * time.Second):
		t.Fatal("chromium printed no DevTools address in 30s")
	}
	cfg, err := websocket.NewConfig(wsURL, "http://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL, err)
	}
	ws.MaxPayloadBytes = 64 << 20
	b := &browser{t: t, cdp: &cdp{cmd: cmd, ws: ws, waiting: map[int]chan cdpReply{}, done: make(chan struct{})}}
	go b.read()
	t.Cleanup(func() {
		// Browser.close lets Chromium stop its children and flush its
		// profile before the directory goes.
		_ = b.try("Browser.close", nil, nil)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		ws.Close()
		<-b.done
		os.RemoveAll(profile)
	})

	var target struct{ TargetID string }
	b.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	b.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	b.call("Page.enable", nil, nil)
	b.call("Runtime.enable", nil, nil)
	b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

// on returns the browser failing t (a subtest) instead.
func (b *browser) on(t testing.TB) *browser { return &browser{t: t, cdp: b.cdp} }

func (b *cdp) read() {
	defer close(b.done)
	for {
		var msg struct {
			ID int `json:"id"`
			cdpReply
		}
		var raw []byte
		if err := websocket.Message.Receive(b.ws, &raw); err != nil {
			b.mu.Lock()
			for id, ch := range b.waiting {
				ch <- cdpReply{Error: &struct {
					Message string `json:"message"`
				}{"connection closed: " + err.Error()}}
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		if json.Unmarshal(raw, &msg) != nil || msg.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.waiting[msg.ID]
		delete(b.waiting, msg.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- msg.cdpReply
		}
	}
}

// call sends one DevTools command on the page's session (the browser's for
// Target.*) and decodes its result into out.
func (b *browser) call(method string, params any, out any) {
	b.t.Helper()
	if err := b.try(method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

func (b *cdp) try(method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if b.session != "" && !strings.HasPrefix(method, "Target.") && !strings.HasPrefix(method, "Browser.") {
		req["sessionId"] = b.session
	}
	if err := websocket.JSON.Send(b.ws, req); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer in 60s", method)
	}
}

// navigate opens url in the page.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call("Page.navigate", map[string]any{"url": url}, nil)
}

// eval runs a JavaScript expression in the page (awaiting a promise) and
// decodes its value into out.
func (b *browser) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := b.try("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("%s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// waitJS polls a JavaScript expression until it is truthy (its value is
// returned as a string) or the deadline passes, and fails the test then
// with what the expression last gave and the page's status line.
func (b *browser) waitJS(ctx context.Context, what, expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last any
	var lastErr error
	for {
		var v any
		lastErr = b.eval("(() => { const v = ("+expr+"); return v ? String(v) : ''; })()", &v)
		if s, ok := v.(string); ok && s != "" && lastErr == nil {
			return s
		}
		last = v
		select {
		case <-ctx.Done():
			var status string
			_ = b.eval(`document.querySelector('#status') ? document.querySelector('#status').textContent : ''`, &status)
			b.t.Fatalf("%s: not seen in 20s (last %v, %v; status line %q)", what, last, lastErr, status)
		case <-tick.C:
		}
	}
}

// click clicks the element a CSS selector names (the first match).
func (b *browser) click(sel string) {
	b.t.Helper()
	var ok bool
	if err := b.eval(`(() => { const n = document.querySelector(`+jsString(sel)+`); if (!n) return false; n.click(); return true; })()`, &ok); err != nil || !ok {
		b.t.Fatalf("click %s: %v (found %v)", sel, err, ok)
	}
}

// screenshot saves the page as a PNG file.
func (b *browser) screenshot(path string) {
	b.t.Helper()
	var r struct{ Data string }
	b.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": false}, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
