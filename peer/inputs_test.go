package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// startPeerWith runs a real in-memory peer configured by cfg (defaults as
// startPeer) until the test ends, and returns a client for it.
func startPeerWith(t *testing.T, cfg Config) (*Peer, *api.Client) {
	t.Helper()
	cfg.InMemory, cfg.HTTPAddr, cfg.Partitions = true, "127.0.0.1:0", 16
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.Slots == 0 {
		cfg.Slots = 2
	}
	if cfg.DrainTimeout == 0 {
		// No drain at the end unless a test asks for one: a peer stopped
		// with a worker's lease held waited out the drain.
		cfg.DrainTimeout = -1
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p, &api.Client{BaseURL: "http://" + p.Addr()}
}

// runGroup submits a group and waits until it is terminal.
func runGroup(t *testing.T, c *api.Client, body string) (*api.Group, map[string]*api.Task) {
	t.Helper()
	ctx := t.Context()
	res, err := c.SubmitGroupJSON(ctx, []byte(body))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	g, err := c.GetGroup(ctx, res.Group, 10*time.Second)
	if err != nil {
		t.Fatalf("get group: %v", err)
	}
	tasks := map[string]*api.Task{}
	for name, id := range res.Tasks {
		if tasks[name], err = c.GetTask(ctx, id, 0); err != nil {
			t.Fatalf("get task %s: %v", name, err)
		}
	}
	return g, tasks
}

// sumHandler returns the sum of its inputs (numbers), and records the
// inputs of every call in seen.
func sumHandler(seen chan<- map[string]json.RawMessage) HandlerFunc {
	return func(_ context.Context, c Call) ([]byte, error) {
		seen <- c.Inputs
		sum := 0.0
		for name, raw := range c.Inputs {
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, Permanent(fmt.Errorf("input %s: %v", name, err))
			}
			sum += v
		}
		return json.Marshal(sum)
	}
}

func TestInputsGoHandler(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	seen := make(chan map[string]json.RawMessage, 10)
	if err := p.Handlers().Register("sum", sumHandler(seen)); err != nil {
		t.Fatal(err)
	}
	g, tasks := runGroup(t, c, `{"mode": "dag", "tasks": [
		{"name": "a", "handler": "echo", "payload": 2},
		{"name": "b", "handler": "echo", "payload": 3.5},
		{"name": "alone", "handler": "sum"},
		{"name": "sum", "handler": "sum", "deps": ["a", "b"]}]}`)
	if g.State != "SUCCEEDED" {
		t.Fatalf("group state = %s; want SUCCEEDED", g.State)
	}
	if got := string(tasks["sum"].Result); got != "5.5" {
		t.Errorf("sum result = %s; want 5.5", got)
	}
	if got := string(tasks["alone"].Result); got != "0" {
		t.Errorf("alone result = %s; want 0 (no inputs)", got)
	}
	var nilInputs, withInputs int
	for range 2 {
		in := <-seen
		switch {
		case in == nil:
			nilInputs++
		case reflect.DeepEqual(in, map[string]json.RawMessage{"a": json.RawMessage("2"), "b": json.RawMessage("3.5")}):
			withInputs++
		default:
			t.Errorf("handler got inputs %v", in)
		}
	}
	if nilInputs != 1 || withInputs != 1 {
		t.Errorf("calls: %d without inputs, %d with; want 1 and 1", nilInputs, withInputs)
	}

	// A pipeline stage gets the previous stage's results by name.
	g, tasks = runGroup(t, c, `{"mode": "pipeline", "stages": [
		[{"name": "x", "handler": "echo", "payload": 1}, {"name": "y", "handler": "echo", "payload": 2}],
		[{"name": "total", "handler": "sum"}]]}`)
	if g.State != "SUCCEEDED" || string(tasks["total"].Result) != "3" {
		t.Errorf("pipeline: state %s, total = %s; want SUCCEEDED, 3", g.State, tasks["total"].Result)
	}
}

func TestInputsExecStdin(t *testing.T) {
	if _, err := os.Stat("/bin/cat"); err != nil {
		t.Skip("needs /bin/cat")
	}
	_, c := startPeerWith(t, Config{Builtins: BuiltinConfig{Exec: map[string][]string{"cat": {"/bin/cat"}}}})
	g, tasks := runGroup(t, c, `{"mode": "dag", "tasks": [
		{"name": "a", "handler": "echo", "payload": {"x": 1}},
		{"name": "b", "handler": "echo", "payload": "two"},
		{"name": "cat", "handler": "exec", "payload": {"command": "cat"}, "deps": ["a", "b"]},
		{"name": "explicit", "handler": "exec", "payload": {"command": "cat", "stdin": "mine"}, "deps": ["a"]},
		{"name": "none", "handler": "exec", "payload": {"command": "cat"}}]}`)
	if g.State != "SUCCEEDED" {
		t.Fatalf("group state = %s; want SUCCEEDED", g.State)
	}
	stdout := func(name string) string {
		var r execResult
		if err := json.Unmarshal(tasks[name].Result, &r); err != nil {
			t.Fatalf("%s result %s: %v", name, tasks[name].Result, err)
		}
		return r.Stdout
	}
	var got any
	if err := json.Unmarshal([]byte(stdout("cat")), &got); err != nil {
		t.Fatalf("cat stdout %q is not JSON: %v", stdout("cat"), err)
	}
	want := map[string]any{"payload": map[string]any{"command": "cat"},
		"inputs": map[string]any{"a": map[string]any{"x": 1.0}, "b": "two"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cat got stdin %v; want %v", got, want)
	}
	if s := stdout("explicit"); s != "mine" {
		t.Errorf("explicit stdin: cat got %q; want %q (explicit stdin wins)", s, "mine")
	}
	if s := stdout("none"); s != "" {
		t.Errorf("no deps: cat got %q; want no input", s)
	}
}

func TestResultLimit(t *testing.T) {
	_, c := startPeerWith(t, Config{MaxResult: 64})
	big := `"` + strings.Repeat("x", 100) + `"`
	g, tasks := runGroup(t, c, `{"mode": "parallel", "tasks": [
		{"name": "small", "handler": "echo", "payload": "ok"},
		{"name": "big", "handler": "echo", "payload": `+big+`, "retry": {"max_attempts": 3}}]}`)
	if g.State != "FAILED" {
		t.Fatalf("group state = %s; want FAILED", g.State)
	}
	if s := tasks["small"]; s.State != "SUCCEEDED" || string(s.Result) != `"ok"` {
		t.Errorf("small = %s %s; want SUCCEEDED \"ok\"", s.State, s.Result)
	}
	b := tasks["big"]
	want := fmt.Sprintf("result of %d bytes is over the limit of 64", len(big))
	if b.State != "FAILED" || b.Error == nil || !strings.Contains(*b.Error, want) || !strings.Contains(*b.Error, `"echo"`) {
		t.Errorf("big = %s, error %v; want FAILED with %q", b.State, b.Error, want)
	}
	if b.Attempt != 1 || len(b.Result) != 0 && string(b.Result) != "null" {
		t.Errorf("big: attempt %d, result %s; want one attempt (permanent) and no result", b.Attempt, b.Result)
	}
}

func TestConfigMaxResult(t *testing.T) {
	c := Config{}
	if err := c.Validate(); err != nil || c.MaxResult != DefaultMaxResult {
		t.Errorf("default MaxResult = %d, %v; want %d", c.MaxResult, err, DefaultMaxResult)
	}
	c = Config{MaxResult: -1}
	if err := c.Validate(); err == nil {
		t.Error("MaxResult -1: want an error")
	}
	c = Config{MaxResult: shard.MaxResultBytes}
	if err := c.Validate(); err != nil {
		t.Errorf("MaxResult %d: %v", c.MaxResult, err)
	}
	c = Config{MaxResult: shard.MaxResultBytes + 1}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--max-result") {
		t.Errorf("MaxResult over the mesh's limit: %v; want an error naming --max-result", err)
	}
}

func TestBuiltinInputs(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Write([]byte("null"))
	}))
	t.Cleanup(srv.Close)
	r := MustBuiltins(t, BuiltinConfig{HTTPAllow: []string{srv.URL + "/"}})
	inputs := map[string]json.RawMessage{"b": json.RawMessage(`[1, 2]`), "a": json.RawMessage(`"x"`)}
	call := func(handler, payload string, in map[string]json.RawMessage) string {
		t.Helper()
		h, _ := r.Lookup(handler)
		res, err := h(t.Context(), Call{Task: "t.0", Round: 1, Attempt: 1, Payload: []byte(payload), Inputs: in})
		if err != nil {
			t.Fatalf("%s %s: %v", handler, payload, err)
		}
		return string(res)
	}
	// echo ignores inputs.
	if got := call("echo", `{"k":1}`, inputs); got != `{"k":1}` {
		t.Errorf("echo = %s; want the payload", got)
	}
	// http: the body unchanged unless with_inputs.
	call("http", `{"url":"`+srv.URL+`/x","body":{"k":1}}`, inputs)
	call("http", `{"url":"`+srv.URL+`/x","body":{"k":1},"with_inputs":true}`, inputs)
	call("http", `{"url":"`+srv.URL+`/x","with_inputs":true}`, nil)
	want := []string{`{"k":1}`, `{"body":{"k":1},"inputs":{"a":"x","b":[1,2]}}`, `{"body":null,"inputs":{}}`}
	if !reflect.DeepEqual(bodies, want) {
		t.Errorf("http bodies = %q; want %q", bodies, want)
	}
}

// A peer runs its exec attempts in a directory of its own under the exec
// dir, named by its peer id, made at its start (audit s75, F5).
func TestExecDirOfPeer(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("needs /bin/sh")
	}
	dir := filepath.Join(t.TempDir(), "exec")
	p, c := startPeerWith(t, Config{Builtins: BuiltinConfig{ExecDir: dir,
		Exec: map[string][]string{"pwd": {"/bin/sh", "-c", `printf %s "$PWD"`}}}})
	if fi, err := os.Stat(filepath.Join(dir, p.ID())); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the peer's exec directory after its start: %v, %v; want a directory 0700", fi, err)
	}
	g, tasks := runGroup(t, c, `{"mode": "parallel", "tasks": [{"name": "pwd", "handler": "exec", "payload": {"command": "pwd"}}]}`)
	var r execResult
	if g.State != "SUCCEEDED" || json.Unmarshal(tasks["pwd"].Result, &r) != nil {
		t.Fatalf("exec pwd: group %s, result %s", g.State, tasks["pwd"].Result)
	}
	if got := filepath.Dir(r.Stdout); got != filepath.Join(dir, p.ID()) {
		t.Errorf("an attempt ran in %s; want a directory under %s", r.Stdout, filepath.Join(dir, p.ID()))
	}
}
