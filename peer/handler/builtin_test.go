package handler

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// MustBuiltins returns a registry with the built-ins registered per cfg.
func MustBuiltins(tb testing.TB, cfg BuiltinConfig) *Registry {
	tb.Helper()
	r, err := NewBuiltins(cfg)
	if err != nil {
		tb.Fatalf("NewBuiltins: %v", err)
	}
	return r
}

// runBuiltin runs handler name of r on payload.
func runBuiltin(ctx context.Context, tb testing.TB, r *Registry, name, payload string) ([]byte, error) {
	tb.Helper()
	h, ok := r.Lookup(name)
	if !ok {
		tb.Fatalf("Lookup(%q) = false", name)
	}
	var p []byte
	if payload != "" {
		p = []byte(payload)
	}
	return h(ctx, Call{Task: "t1", Round: 1, Attempt: 1, Payload: p})
}

// errCase is the expected outcome of one handler call.
type errCase struct {
	name      string
	payload   string
	want      string // result, when wantErr is ""
	wantErr   string // substring of the error
	permanent bool   // want IsPermanent(err), when wantErr != ""
}

// checkCases runs the table against handler name.
func checkCases(t *testing.T, r *Registry, handler string, cases []errCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runBuiltin(t.Context(), t, r, handler, tt.payload)
			if tt.wantErr == "" {
				if err != nil || string(got) != tt.want {
					t.Fatalf("%s(%s) = %s, %v; want %s, nil", handler, tt.payload, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("%s(%s) error = %v; want one containing %q", handler, tt.payload, err, tt.wantErr)
			}
			if IsPermanent(err) != tt.permanent {
				t.Fatalf("%s(%s): IsPermanent(%v) = %v; want %v", handler, tt.payload, err, !tt.permanent, tt.permanent)
			}
		})
	}
}

func TestBuiltinEcho(t *testing.T) {
	r := MustBuiltins(t, BuiltinConfig{})
	checkCases(t, r, "echo", []errCase{
		{name: "object", payload: `{"a":[1,2,"x"]}`, want: `{"a":[1,2,"x"]}`},
		{name: "string", payload: `"hi"`, want: `"hi"`},
		{name: "empty", payload: "", want: "null"},
		{name: "blank", payload: " \n", want: "null"},
	})
}

func TestBuiltinSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := MustBuiltins(t, BuiltinConfig{})
		start := time.Now()
		got, err := runBuiltin(t.Context(), t, r, "sleep", `{"ms": 20}`)
		if err != nil || string(got) != `{"ms": 20}` {
			t.Fatalf("sleep = %s, %v; want the payload, nil", got, err)
		}
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Fatalf("sleep took %v; want 20ms", d)
		}
	})
	r := MustBuiltins(t, BuiltinConfig{})
	checkCases(t, r, "sleep", []errCase{
		{name: "bare number", payload: "1", want: "1"},
		{name: "zero", payload: `{"ms":0}`, want: `{"ms":0}`},
		{name: "negative", payload: `{"ms":-1}`, wantErr: `"ms"`, permanent: true},
		{name: "bare negative", payload: `-5`, wantErr: `"ms"`, permanent: true},
		{name: "string ms", payload: `{"ms":"20"}`, wantErr: `sleep: payload field "ms"`, permanent: true},
		{name: "bare string", payload: `"20"`, wantErr: `sleep: payload field "ms"`, permanent: true},
		{name: "missing ms", payload: `{}`, wantErr: `"ms" is required`, permanent: true},
		{name: "extra fields are kept in the result", payload: `{"ms":1,"tag":"x"}`, want: `{"ms":1,"tag":"x"}`},
		{name: "huge", payload: `{"ms":1e300}`, wantErr: "out of range", permanent: true},
		{name: "empty", payload: "", wantErr: `"ms"`, permanent: true},
	})
}

func TestBuiltinSleepCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := MustBuiltins(t, BuiltinConfig{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := runBuiltin(ctx, t, r, "sleep", `{"ms": 3600000}`)
			done <- err
		}()
		synctest.Wait() // the handler is blocked on its timer
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("sleep after cancel = %v; want context.Canceled", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("sleep returned after %v; want at once", d)
		}
	})
}

func TestBuiltinFail(t *testing.T) {
	r := MustBuiltins(t, BuiltinConfig{})
	checkCases(t, r, "fail", []errCase{
		{name: "permanent", payload: `{"permanent":true,"message":"boom"}`, wantErr: "boom", permanent: true},
		{name: "retryable", payload: `{"permanent":false,"message":"again"}`, wantErr: "again"},
		{name: "default message", payload: `{}`, wantErr: "fail handler"},
		{name: "empty payload", payload: "", wantErr: "fail handler"},
		{name: "bad field", payload: `{"permanent":"yes"}`, wantErr: `fail: payload field "permanent"`, permanent: true},
		{name: "not json", payload: `{`, wantErr: "fail: payload", permanent: true},
	})
}

// execConfig is the exec allow-list the exec tests use.
func execConfig(t *testing.T) BuiltinConfig {
	if runtime.GOOS == "windows" {
		t.Skip("exec tests need /bin/sh")
	}
	return BuiltinConfig{
		MaxOutput: 1024,
		ExecEnv:   []string{"GREETING"},
		Exec: map[string][]string{
			"echo":  {"/bin/echo"},
			"greet": {"/bin/sh", "-c", `echo "hello $1"`, "sh"},
			"exit3": {"/bin/sh", "-c", `echo partial; echo "it broke" >&2; exit 3`, "sh"},
			"cat":   {"cat"}, // resolved in PATH
			"env":   {"/bin/sh", "-c", `printf %s "$GREETING"`, "sh"},
			"big":   {"/bin/sh", "-c", `i=0; while [ $i -lt 200 ]; do echo 0123456789; i=$((i+1)); done`},
		},
	}
}

// execOut renders an exec result for the tables.
func execOut(stdout, stderr string) string {
	b, _ := json.Marshal(execResult{Stdout: stdout, Stderr: stderr})
	return string(b)
}

func TestBuiltinExec(t *testing.T) {
	r := MustBuiltins(t, execConfig(t))
	evil := `$(whoami); rm -rf / && echo pwned | cat > x; ` + "`id`"
	evilArgs, _ := json.Marshal([]string{evil, "*", "'quoted'"})
	checkCases(t, r, "exec", []errCase{
		{name: "echo", payload: `{"command":"echo","args":["hello","world"]}`, want: execOut("hello world\n", "")},
		{name: "metacharacters literal", payload: `{"command":"echo","args":` + string(evilArgs) + `}`,
			want: execOut(evil+" * 'quoted'\n", "")},
		{name: "sh -c from allow-list", payload: `{"command":"greet","args":["world; id"]}`, want: execOut("hello world; id\n", "")},
		{name: "stdin", payload: `{"command":"cat","stdin":"line1\nline2"}`, want: execOut("line1\nline2", "")},
		{name: "env", payload: `{"command":"env","env":{"GREETING":"hi there"}}`, want: execOut("hi there", "")},
		{name: "non-zero exit", payload: `{"command":"exit3"}`, wantErr: "exited with code 3: it broke"},
		{name: "not allowed", payload: `{"command":"sh","args":["-c","id"]}`,
			wantErr: `exec: command "sh" is not on this peer's allow-list`, permanent: true},
		{name: "shell string as command", payload: `{"command":"echo hi; id"}`, wantErr: "allow-list", permanent: true},
		{name: "output too large", payload: `{"command":"big"}`, wantErr: "stdout exceeds 1024 bytes", permanent: true},
		{name: "denied env", payload: `{"command":"echo","env":{"LD_PRELOAD":"/tmp/x.so"}}`, wantErr: `"LD_PRELOAD"`, permanent: true},
		{name: "env not allowed", payload: `{"command":"echo","env":{"PYTHONWARNINGS":"x","BROWSER":"id"}}`, wantErr: `"BROWSER" is not on this peer's allow-list`, permanent: true},
		{name: "args not a list", payload: `{"command":"echo","args":"hi"}`, wantErr: `exec: payload field "args"`, permanent: true},
		{name: "unknown field", payload: `{"command":"echo","shell":true}`, wantErr: `unknown field "shell"`, permanent: true},
		{name: "empty payload", payload: "", wantErr: "exec: payload is empty", permanent: true},
	})
	_, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"exit3"}`)
	var exitErr *ExecExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 3 || exitErr.StderrTail != "it broke" {
		t.Fatalf("exec exit3 error = %#v; want *ExecExitError{Code: 3, StderrTail: \"it broke\"}", err)
	}
}

func TestBuiltinExecCancel(t *testing.T) {
	cfg := execConfig(t)
	fifo := filepath.Join(t.TempDir(), "ready")
	if out, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
		t.Skipf("mkfifo: %v: %s", err, out)
	}
	// The shell starts a grandchild that holds stdout open, reports that
	// it is running, and waits: only a process-group kill ends it quickly.
	cfg.Exec["hang"] = []string{"/bin/sh", "-c", `sleep 30 & echo "$!" > "$1"; wait`, "sh", fifo}
	r := MustBuiltins(t, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runBuiltin(ctx, t, r, "exec", `{"command":"hang"}`)
		done <- err
	}()
	f, err := os.OpenFile(fifo, os.O_RDWR, 0) // O_RDWR: does not block on Linux
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ready := make(chan struct{})
	go func() {
		bufio.NewReader(f).ReadString('\n')
		close(ready)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("exec returned before the child was ready: %v", err)
	}
	start := time.Now()
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("exec after cancel = %v; want context.Canceled", err)
	}
	// Below execWaitDelay: the grandchild died too, closing stdout.
	if d := time.Since(start); d >= execWaitDelay*3/4 {
		t.Fatalf("exec returned %v after cancel; want well under %v", d, execWaitDelay)
	}
}

// hookServer serves the http tests; admin counts hits on paths that the
// allow-list must keep requests away from.
func hookServer(t *testing.T, admin *atomic.Int32) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/hooks/json", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"got":` + string(body) + `,"x":"` + r.Header.Get("X-Token") + `"}`))
	})
	mux.HandleFunc("/hooks/text", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("plain text")) })
	mux.HandleFunc("/hooks/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/hooks/boom", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "db down", 500) })
	mux.HandleFunc("/hooks/big", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 2048)) })
	mux.HandleFunc("/hooks/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/hooks/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/hooks/json", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/hooksX", func(w http.ResponseWriter, r *http.Request) { admin.Add(1) })
	mux.HandleFunc("/admin", func(w http.ResponseWriter, r *http.Request) { admin.Add(1) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestBuiltinHTTP(t *testing.T) {
	var admin atomic.Int32
	srv := hookServer(t, &admin)
	host := strings.TrimPrefix(srv.URL, "http://")
	r := MustBuiltins(t, BuiltinConfig{HTTPAllow: []string{srv.URL + "/hooks/"}, MaxOutput: 1024})
	req := func(url string) string { return `{"url":"` + url + `","body":{"a":1}}` }
	checkCases(t, r, "http", []errCase{
		{name: "200 json", payload: `{"url":"` + srv.URL + `/hooks/json","body":[1,2],"headers":{"X-Token":"t"}}`,
			want: `{"got":[1,2],"x":"t"}`},
		{name: "200 text", payload: req(srv.URL + "/hooks/text"), want: `"plain text"`},
		{name: "204", payload: req(srv.URL + "/hooks/empty"), want: "null"},
		{name: "allowed redirect", payload: req(srv.URL + "/hooks/hop"), want: `{"got":{"a":1},"x":""}`},
		{name: "upper-case host", payload: req("HTTP://" + strings.ToUpper(host) + "/hooks/text"), want: `"plain text"`},
		{name: "404", payload: req(srv.URL + "/hooks/missing"), wantErr: "status 404", permanent: true},
		{name: "500", payload: req(srv.URL + "/hooks/boom"), wantErr: `status 500: "db down\n"`},
		{name: "too large", payload: req(srv.URL + "/hooks/big"), wantErr: "exceeds 1024 bytes", permanent: true},
		{name: "dot-dot", payload: req(srv.URL + "/hooks/../admin"), wantErr: "not under an allowed prefix", permanent: true},
		{name: "encoded dot-dot", payload: req(srv.URL + "/hooks/%2e%2e/admin"), wantErr: "not under", permanent: true},
		{name: "encoded slash", payload: req(srv.URL + "/hooks%2F..%2Fadmin"), wantErr: "not under", permanent: true},
		{name: "no boundary", payload: req(srv.URL + "/hooksX"), wantErr: "not under", permanent: true},
		{name: "prefix itself minus slash", payload: req(srv.URL + "/hook"), wantErr: "not under", permanent: true},
		{name: "other host", payload: req("http://evil.invalid/hooks/x"), wantErr: "not under", permanent: true},
		{name: "other port", payload: req("http://127.0.0.1:1/hooks/x"), wantErr: "not under", permanent: true},
		{name: "https", payload: req("https://" + host + "/hooks/json"), wantErr: "not under", permanent: true},
		{name: "userinfo host trick", payload: req("http://" + host + "@evil.invalid/hooks/x"), wantErr: "userinfo", permanent: true},
		{name: "userinfo on allowed host", payload: req("http://u:p@" + host + "/hooks/json"), wantErr: "userinfo", permanent: true},
		{name: "backslash", payload: req(srv.URL + `/hooks/..\\admin`), wantErr: "backslash", permanent: true},
		{name: "relative", payload: req("/hooks/json"), wantErr: "scheme", permanent: true},
		{name: "redirect off list", payload: req(srv.URL + "/hooks/redirect"), wantErr: "not under", permanent: true},
		{name: "bad header", payload: `{"url":"` + srv.URL + `/hooks/json","headers":{"A B":"c"}}`, wantErr: "invalid header", permanent: true},
		{name: "header injection", payload: `{"url":"` + srv.URL + `/hooks/json","headers":{"A":"b\r\nX: y"}}`, wantErr: "invalid header", permanent: true},
		{name: "url not a string", payload: `{"url":5}`, wantErr: `http: payload field "url"`, permanent: true},
	})
	if n := admin.Load(); n != 0 {
		t.Fatalf("off-list handlers hit %d times; want 0", n)
	}
}

func TestBuiltinHTTPTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	target := srv.URL + "/hooks/x"
	srv.Close() // nothing listens any more
	r := MustBuiltins(t, BuiltinConfig{HTTPAllow: []string{srv.URL + "/hooks"}})
	_, err := runBuiltin(t.Context(), t, r, "http", `{"url":"`+target+`"}`)
	if err == nil || IsPermanent(err) {
		t.Fatalf("http to a closed server = %v; want a retryable error", err)
	}
}

func TestBuiltinRegisterErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  BuiltinConfig
	}{
		{"negative MaxOutput", BuiltinConfig{MaxOutput: -1}},
		{"empty argv", BuiltinConfig{Exec: map[string][]string{"x": {}}}},
		{"empty name", BuiltinConfig{Exec: map[string][]string{"": {"/bin/echo"}}}},
		{"missing command", BuiltinConfig{Exec: map[string][]string{"x": {"no-such-command-needle"}}}},
		{"relative path", BuiltinConfig{Exec: map[string][]string{"x": {"./no-such-command"}}}},
		{"allow not a URL", BuiltinConfig{HTTPAllow: []string{"127.0.0.1:9000/hooks"}}},
		{"allow with userinfo", BuiltinConfig{HTTPAllow: []string{"http://u@127.0.0.1/"}}},
		{"allow with query", BuiltinConfig{HTTPAllow: []string{"http://127.0.0.1/?a=b"}}},
		{"allow ftp", BuiltinConfig{HTTPAllow: []string{"ftp://127.0.0.1/"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := NewBuiltins(tt.cfg); !errors.Is(err, ErrBuiltins) || r != nil {
				t.Fatalf("NewBuiltins(%+v) = %v, %v; want nil, ErrBuiltins", tt.cfg, r, err)
			}
		})
	}
}

// TestExecChildEnvironment checks that an exec child gets a minimal
// environment: PATH and the like, the allow-listed names, never the
// daemon's secrets nor anything else it was started with.
func TestExecChildEnvironment(t *testing.T) {
	cfg := execConfig(t)
	cfg.Exec["printenv"] = []string{"/usr/bin/env"}
	t.Setenv("NEEDLE_API_TOKEN", "token-secret")
	t.Setenv("NEEDLE_NOTIFY_SECRET", "notify-secret")
	t.Setenv("PYTHONWARNINGS", "ignore::x")
	t.Setenv("GREETING", "from the daemon")
	r := MustBuiltins(t, cfg)
	out, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"printenv"}`)
	if err != nil {
		t.Fatal(err)
	}
	var res execResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"token-secret", "notify-secret", "PYTHONWARNINGS"} {
		if strings.Contains(res.Stdout, leak) {
			t.Errorf("child environment holds %q:\n%s", leak, res.Stdout)
		}
	}
	for _, want := range []string{"PATH=", "GREETING=from the daemon"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("child environment lacks %q:\n%s", want, res.Stdout)
		}
	}
	out, err = runBuiltin(t.Context(), t, r, "exec", `{"command":"env","env":{"GREETING":"from the task"}}`)
	if err != nil || !strings.Contains(string(out), "from the task") {
		t.Errorf("exec with an allowed env = %s, %v; want the task's value", out, err)
	}
	for _, name := range []string{"LD_PRELOAD", "NEEDLE_API_TOKEN", "PATH", "BASH_ENV", ""} {
		if err := (BuiltinConfig{ExecEnv: []string{name}}).Validate(); err == nil {
			t.Errorf("ExecEnv %q accepted", name)
		}
	}
}

// TestBuiltinIdentity checks that exec and http tell what they call which
// run it is (task, group, attempt, round), so that a receiver can
// deduplicate at-least-once runs, and that a task cannot forge it.
func TestBuiltinIdentity(t *testing.T) {
	call := Call{Task: "g7.3", Round: 5, Attempt: 2, Payload: []byte(`{"command":"printenv"}`)}
	want := map[string]string{"TASK_ID": "g7.3", "GROUP_ID": "g7", "ATTEMPT": "2", "ROUND": "5"}

	cfg := execConfig(t)
	cfg.Exec["printenv"] = []string{"/usr/bin/env"}
	h, _ := MustBuiltins(t, cfg).Lookup("exec")
	out, err := h(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	var res execResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if line := "NEEDLE_" + k + "=" + v; !slices.Contains(strings.Split(res.Stdout, "\n"), line) {
			t.Errorf("exec child environment lacks %s:\n%s", line, res.Stdout)
		}
	}

	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header }))
	t.Cleanup(srv.Close)
	h, _ = MustBuiltins(t, BuiltinConfig{HTTPAllow: []string{srv.URL}}).Lookup("http")
	call.Payload = []byte(`{"url":"` + srv.URL + `/x","headers":{"X-Needle-Task-Id":"forged","X-Needle-Round":"1"}}`)
	if _, err := h(t.Context(), call); err != nil {
		t.Fatal(err)
	}
	hdr := <-got
	for k, v := range map[string]string{"X-Needle-Task-Id": "g7.3", "X-Needle-Group-Id": "g7", "X-Needle-Attempt": "2", "X-Needle-Round": "5"} {
		if g := hdr.Values(k); !slices.Equal(g, []string{v}) {
			t.Errorf("http header %s = %q; want %q", k, g, v)
		}
	}
}

// TestCallIdentityShard: a copy of a broadcast group tells exec and http
// which copy it is (NEEDLE_SHARD of NEEDLE_SHARDS); any other task does
// not mention shards.
func TestCallIdentityShard(t *testing.T) {
	env := map[string]string{}
	for _, id := range callIdentity(Call{Task: "g.2", Round: 1, Attempt: 1, Shard: 2, Shards: 3}) {
		env[id.env] = id.value
	}
	if env["NEEDLE_SHARD"] != "2" || env["NEEDLE_SHARDS"] != "3" {
		t.Errorf("exec and http identity = %v; want NEEDLE_SHARD=2, NEEDLE_SHARDS=3", env)
	}
	for _, id := range callIdentity(Call{Task: "g.0", Round: 1, Attempt: 1}) {
		if strings.Contains(id.env, "SHARD") {
			t.Errorf("identity of a plain task holds %s", id.env)
		}
	}
}

// TestRegistry: Register refuses an empty name or a nil handler; Names
// are sorted; the log writer of a Call is io.Discard until the runtime
// sets one.
func TestRegistry(t *testing.T) {
	r := NewRegistry()
	h := func(context.Context, Call) ([]byte, error) { return nil, nil }
	if err := r.Register("", h); !errors.Is(err, ErrRegister) {
		t.Errorf("Register(\"\") = %v; want ErrRegister", err)
	}
	if err := r.Register("x", nil); !errors.Is(err, ErrRegister) {
		t.Errorf("Register(nil) = %v; want ErrRegister", err)
	}
	for _, n := range []string{"b", "a"} {
		if err := r.Register(n, h); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) || !r.Has("a") || r.Has("c") {
		t.Errorf("Names = %v", got)
	}
	var c Call
	if c.LogWriter() != io.Discard {
		t.Error("zero Call's LogWriter is not io.Discard")
	}
	var buf strings.Builder
	if c = c.WithLogWriter(&buf); c.LogWriter() != &buf {
		t.Error("WithLogWriter did not set the writer")
	}
}

// TestBuiltinTraceparent: exec and http pass a traced run's context on
// (TRACEPARENT, the traceparent header), which a task cannot forge, and
// pass nothing for a run without one.
func TestBuiltinTraceparent(t *testing.T) {
	cfg := execConfig(t)
	cfg.Exec["printenv"] = []string{"/usr/bin/env"}
	exec, _ := MustBuiltins(t, cfg).Lookup("exec")
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header }))
	t.Cleanup(srv.Close)
	web, _ := MustBuiltins(t, BuiltinConfig{HTTPAllow: []string{srv.URL}}).Lookup("http")
	for _, tr := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""} {
		call := Call{Task: "g7.3", Round: 5, Attempt: 2, Trace: tr, Payload: []byte(`{"command":"printenv"}`)}
		out, err := exec(t.Context(), call)
		if err != nil {
			t.Fatal(err)
		}
		var res execResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(res.Stdout, "\n")
		if has := slices.Contains(lines, "TRACEPARENT="+tr); has != (tr != "") || (tr == "" && strings.Contains(res.Stdout, "TRACEPARENT")) {
			t.Errorf("trace %q: exec child environment:\n%s", tr, res.Stdout)
		}
		call.Payload = []byte(`{"url":"` + srv.URL + `/x","headers":{"traceparent":"00-` + strings.Repeat("1", 32) + `-` + strings.Repeat("2", 16) + `-01"}}`)
		if _, err := web(t.Context(), call); err != nil {
			t.Fatal(err)
		}
		if hdr := <-got; tr != "" && !slices.Equal(hdr.Values("traceparent"), []string{tr}) {
			t.Errorf("trace %q: http traceparent header %q", tr, hdr.Values("traceparent"))
		}
	}
}

func TestExecExitErrorMessage(t *testing.T) {
	for _, c := range []struct {
		e    ExecExitError
		want string
	}{
		{ExecExitError{Command: "sh", Code: 3, StderrTail: "it broke"}, "exec: sh exited with code 3: it broke"},
		{ExecExitError{Command: "sh", Code: 3}, "exec: sh exited with code 3"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

// execDirConfig is execConfig with an exec dir of the test's and the
// commands of the working-directory tests.
func execDirConfig(t *testing.T) BuiltinConfig {
	cfg := execConfig(t)
	cfg.ExecDir = filepath.Join(t.TempDir(), "exec")
	cfg.ExecEnv = append(cfg.ExecEnv, "TMPDIR")
	// Writes $1 to a relative file after checking none is there, waits,
	// and prints what the file holds: two runs at once that shared a
	// directory would see each other's.
	cfg.Exec["write"] = []string{"/bin/sh", "-c", `test ! -e shared || { echo "shared exists: $(cat shared)"; exit 1; }; printf %s "$1" > shared; sleep 0.3; cat shared`, "sh"}
	cfg.Exec["where"] = []string{"/bin/sh", "-c", `printf '%s\n%s' "$PWD" "$TMPDIR"`}
	// Leaves a read-only directory with a file in it, then fails.
	cfg.Exec["litter"] = []string{"/bin/sh", "-c", `mkdir -p ro/deep && touch ro/deep/f ro/f && chmod 500 ro/deep ro; echo "in $PWD" >&2; exit "$1"`, "sh"}
	cfg.Exec["hangs"] = []string{"/bin/sh", "-c", `touch f; mkdir ro; chmod 500 ro; sleep 30`}
	return cfg
}

// entries lists what dir holds.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// Each exec attempt runs in an empty directory of its own under ExecDir:
// two tasks writing the same relative file at once each read their own,
// and neither writes into the daemon's working directory.
func TestExecOwnWorkingDirectory(t *testing.T) {
	cfg := execDirConfig(t)
	r := MustBuiltins(t, cfg)
	if fi, err := os.Stat(cfg.ExecDir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("exec dir after RegisterBuiltins: %v, %v; want a directory 0700", fi, err)
	}
	type res struct {
		out []byte
		err error
	}
	results := make(chan res, 2)
	for _, v := range []string{"one", "two"} {
		go func() {
			out, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"write","args":["`+v+`"]}`)
			results <- res{out, err}
		}()
	}
	var got []string
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatalf("exec write: %v", r.err)
		}
		var er execResult
		if err := json.Unmarshal(r.out, &er); err != nil {
			t.Fatal(err)
		}
		got = append(got, er.Stdout)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("two tasks writing the same relative file read %q; want each its own", got)
	}
	if _, err := os.Stat("shared"); err == nil {
		t.Error("an exec task wrote into the daemon's working directory")
	}
	if left := entries(t, cfg.ExecDir); len(left) != 0 {
		t.Errorf("exec dir holds %v after the attempts; want nothing", left)
	}

	out, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"where"}`)
	var er execResult
	if err != nil || json.Unmarshal(out, &er) != nil {
		t.Fatalf("exec where = %s, %v", out, err)
	}
	pwd, tmp, _ := strings.Cut(er.Stdout, "\n")
	if filepath.Dir(pwd) != cfg.ExecDir || !strings.HasPrefix(filepath.Base(pwd), execAttemptPrefix) || tmp != pwd {
		t.Errorf("a child ran in %q with TMPDIR %q; want a directory of its own under %s, and TMPDIR the same", pwd, tmp, cfg.ExecDir)
	}
	out, err = runBuiltin(t.Context(), t, r, "exec", `{"command":"where","env":{"TMPDIR":"/var/tmp"}}`)
	if err != nil || !strings.Contains(string(out), `\n/var/tmp"`) {
		t.Errorf("exec where with the task's TMPDIR = %s, %v; want the task's TMPDIR kept", out, err)
	}
}

// An attempt's directory is removed with all it holds, read-only
// directories too, when the attempt ends: on success, on failure and on
// timeout (the child killed).
func TestExecWorkingDirectoryRemoved(t *testing.T) {
	cfg := execDirConfig(t)
	r := MustBuiltins(t, cfg)
	if _, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"litter","args":["0"]}`); err != nil {
		t.Fatalf("exec litter 0: %v", err)
	}
	if left := entries(t, cfg.ExecDir); len(left) != 0 {
		t.Errorf("after a success the exec dir holds %v; want nothing", left)
	}
	_, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"litter","args":["4"]}`)
	var exitErr *ExecExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 4 || !strings.Contains(exitErr.StderrTail, cfg.ExecDir) {
		t.Fatalf("exec litter 4 = %v; want exit code 4 naming its directory", err)
	}
	if left := entries(t, cfg.ExecDir); len(left) != 0 {
		t.Errorf("after a failure the exec dir holds %v; want nothing", left)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := runBuiltin(ctx, t, r, "exec", `{"command":"hangs"}`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec hangs = %v; want a timeout", err)
	}
	if left := entries(t, cfg.ExecDir); len(left) != 0 {
		t.Errorf("after a timeout the exec dir holds %v; want nothing", left)
	}
}

// RegisterBuiltins creates the exec dir and says so when it cannot;
// SetPeer makes the peer's directory in it and removes the attempt
// directories a killed run of the peer left there, nothing else: not
// another peer's, not the exec dir's other entries.
func TestExecDirAtStart(t *testing.T) {
	cfg := execDirConfig(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.ExecDir = filepath.Join(file, "exec")
	if _, err := NewBuiltins(bad); !errors.Is(err, ErrBuiltins) || !strings.Contains(err.Error(), "exec dir "+bad.ExecDir) {
		t.Fatalf("NewBuiltins with an exec dir under a file = %v; want an error naming the exec dir", err)
	}
	noExec := BuiltinConfig{ExecDir: bad.ExecDir}
	r, err := NewBuiltins(noExec)
	if err != nil {
		t.Fatalf("NewBuiltins without exec commands = %v; want the exec dir unused", err)
	}
	if err := r.SetPeer("peerA"); err != nil {
		t.Fatalf("SetPeer without exec commands = %v; want nothing done", err)
	}
	for _, d := range []string{filepath.Join("peerA", execAttemptPrefix+"123", "ro"), filepath.Join("peerB", execAttemptPrefix+"9"),
		execAttemptPrefix + "7", "mine"} {
		if err := os.MkdirAll(filepath.Join(cfg.ExecDir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(cfg.ExecDir, "peerA", execAttemptPrefix+"123", "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
	r = MustBuiltins(t, cfg)
	if got := entries(t, cfg.ExecDir); !slices.Equal(got, []string{execAttemptPrefix + "7", "mine", "peerA", "peerB"}) {
		t.Errorf("exec dir holds %v after NewBuiltins; want it untouched", got)
	}
	if err := r.SetPeer("peerA"); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(cfg.ExecDir, "peerA")); len(got) != 0 {
		t.Errorf("the peer's directory holds %v after its start; want the leftover attempt removed", got)
	}
	if got := entries(t, cfg.ExecDir); !slices.Equal(got, []string{execAttemptPrefix + "7", "mine", "peerA", "peerB"}) {
		t.Errorf("exec dir holds %v after a start; want the rest kept", got)
	}
	if got := entries(t, filepath.Join(cfg.ExecDir, "peerB")); len(got) != 1 {
		t.Errorf("another peer's directory holds %v after this one's start; want its attempt kept", got)
	}
	for _, id := range []string{"", "..", "a/b"} {
		if err := r.SetPeer(id); err == nil {
			t.Errorf("SetPeer(%q) = nil; want an error", id)
		}
	}
}

// Two peers sharing an exec dir: the second one's start leaves the
// first's running attempt alone, and each runs its attempts in its own
// directory (audit s75, F5).
func TestExecDirShared(t *testing.T) {
	cfg := execDirConfig(t)
	cfg.Exec["slow"] = []string{"/bin/sh", "-c", `echo kept > work; sleep 0.6; cat work; printf '%s' "$PWD" >&2`}
	a := MustBuiltins(t, cfg)
	if err := a.SetPeer("12D3KooWpeerA"); err != nil {
		t.Fatal(err)
	}
	type res struct {
		out []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := runBuiltin(t.Context(), t, a, "exec", `{"command":"slow"}`)
		done <- res{out, err}
	}()
	time.Sleep(200 * time.Millisecond) // the attempt runs
	b := MustBuiltins(t, cfg)
	if err := b.SetPeer("12D3KooWpeerB"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	var er execResult
	if got.err != nil || json.Unmarshal(got.out, &er) != nil || er.Stdout != "kept\n" {
		t.Fatalf("peer A's attempt across peer B's start = %s, %v; want its file kept", got.out, got.err)
	}
	if want := filepath.Join(cfg.ExecDir, "12D3KooWpeerA") + "/"; !strings.HasPrefix(er.Stderr, want+execAttemptPrefix) {
		t.Errorf("peer A's attempt ran in %q; want a directory under %s", er.Stderr, want)
	}
	for _, id := range []string{"12D3KooWpeerA", "12D3KooWpeerB"} {
		if fi, err := os.Stat(filepath.Join(cfg.ExecDir, id)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("peer directory %s: %v, %v; want 0700", id, fi, err)
		}
	}
}

// A task that takes its owner's access to the directories above its
// attempt (chmod 000 .. or ../..) breaks neither the next attempt nor the
// next start: both get their mode back, 0700 (audit s75, F7).
func TestExecDirModeRestored(t *testing.T) {
	cfg := execDirConfig(t)
	cfg.Exec["lock"] = []string{"/bin/sh", "-c", `chmod 000 "$1"`, "sh"}
	r := MustBuiltins(t, cfg)
	if err := r.SetPeer("peerA"); err != nil {
		t.Fatal(err)
	}
	peerDir := filepath.Join(cfg.ExecDir, "peerA")
	t.Cleanup(func() { os.Chmod(cfg.ExecDir, 0o700); os.Chmod(peerDir, 0o700) })
	for _, up := range []string{"..", "../.."} {
		if _, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"lock","args":["`+up+`"]}`); err != nil {
			t.Fatalf("exec chmod 000 %s: %v", up, err)
		}
		out, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"greet","args":["again"]}`)
		if err != nil || !strings.Contains(string(out), "hello again") {
			t.Fatalf("exec after a task's chmod 000 %s = %s, %v; want it run", up, out, err)
		}
		for _, d := range []string{cfg.ExecDir, peerDir} {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o700 != 0o700 {
				t.Errorf("after chmod 000 %s and an attempt, %s: %v, %v; want it usable", up, d, fi, err)
			}
		}
	}
	// At start: the exec dir and the peer's directory locked.
	if _, err := runBuiltin(t.Context(), t, r, "exec", `{"command":"lock","args":[".."]}`); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.ExecDir, 0); err != nil {
		t.Fatal(err)
	}
	r2 := MustBuiltins(t, cfg)
	if err := r2.SetPeer("peerA"); err != nil {
		t.Fatalf("a start after the exec dir and its peer directory were made 000 = %v; want their mode back", err)
	}
	if out, err := runBuiltin(t.Context(), t, r2, "exec", `{"command":"greet","args":["again"]}`); err != nil {
		t.Fatalf("exec after the start = %s, %v", out, err)
	}
}
