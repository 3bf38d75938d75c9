package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/p2p"
)

// Every error of the configuration as given exits 2, whether ParseFlags
// or the start finds it: a flag's value, a file a flag names, an OTEL_*
// variable. A failure to start (here a data dir that cannot be made)
// exits 1.
func TestConfigErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "swarm.key")
	f, err := os.Create(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := p2p.GenerateSwarmKey(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		env  string // an OTEL_TRACES_EXPORTER
		want int
	}{
		{name: "replicas", args: []string{"--replicas", "20"}, want: 2},
		{name: "slots", args: []string{"--slots", "-1"}, want: 2},
		{name: "rate", args: []string{"--rate", "-1"}, want: 2},
		{name: "tls pair", args: []string{"--tls-cert", filepath.Join(dir, "none.pem")}, want: 2},
		{name: "tls file", args: []string{"--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", filepath.Join(dir, "none.key")}, want: 2},
		{name: "open api", args: []string{"--http", "0.0.0.0:0"}, want: 2},
		{name: "initial peers", args: []string{"--initial-peers", "bad"}, want: 2},
		{name: "notify", args: []string{"--notify-allow", "https://hooks.example/"}, want: 2},
		{name: "log format", args: []string{"--log-format", "xml"}, want: 2},
		{name: "log level", args: []string{"--log-level", "loud"}, want: 2},
		{name: "swarm key missing", args: []string{"--swarm-key", filepath.Join(dir, "none.key")}, want: 2},
		{name: "swarm key malformed", args: []string{"--swarm-key", bad}, want: 2},
		{name: "listen", args: []string{"--swarm-key", key, "--listen", "/bad/addr"}, want: 2},
		{name: "join", args: []string{"--swarm-key", key, "--join", "notanaddr"}, want: 2},
		{name: "otel", env: "zipkin", want: 2},
		{name: "data dir", args: []string{"--data", "/proc/needle-test/data"}, want: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_EXPORTER", tt.env)
			m := NewMain()
			m.Stderr, m.HugePages = io.Discard, false
			args := append([]string{"--data", filepath.Join(t.TempDir(), "data"), "--http", "127.0.0.1:0"}, tt.args...)
			err := m.ParseFlags(args, func(string) string { return "" })
			code := 2 // main: every error of ParseFlags
			if err == nil {
				if err = m.Run(t.Context()); err == nil {
					t.Fatal("Run = nil; want an error")
				}
				code = ExitCode(err)
			}
			if code != tt.want {
				t.Errorf("needled %s: %v: exit %d; want %d", strings.Join(tt.args, " "), err, code, tt.want)
			}
		})
	}
}

// The binary exits with ExitCode: 2 for a value Validate refuses, which
// exited 1 where a value the flag parser refuses exited 2.
func TestConfigErrorExitsBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	bin := buildNeedled(t)
	cmd := exec.Command(bin, "--data", t.TempDir(), "--http", "127.0.0.1:0", "--replicas", "20")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "--replicas 20 out of range") {
		t.Errorf("needled --replicas 20: %v, stderr %q; want exit 2 naming the flag", err, stderr.String())
	}
}

// A value a flag cannot read, on the command line, in the environment or
// in the config file, says what the flag wants ("parse error" said none).
func TestBadFlagValueSaysWhatItWants(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "needled.conf")
	if err := os.WriteFile(cfg, []byte("worker-ttl = 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := `want a duration such as "30s"`
	for _, c := range []struct {
		args []string
		env  map[string]string
		head string
	}{
		{[]string{"--worker-ttl", "5"}, nil, `invalid value "5" for --worker-ttl: `},
		{nil, map[string]string{"NEEDLE_WORKER_TTL": "5"}, `NEEDLE_WORKER_TTL="5": `},
		{[]string{"--config", cfg}, nil, cfg + `:1: worker-ttl: `},
	} {
		m := NewMain()
		m.Stderr = io.Discard
		err := m.ParseFlags(append(c.args, "--data", t.TempDir()), func(k string) string { return c.env[k] })
		if err == nil || !strings.HasPrefix(err.Error(), c.head+want) {
			t.Errorf("ParseFlags(%v, env %v) = %v; want %s%s...", c.args, c.env, err, c.head, want)
		}
	}
}

// A mistyped flag is refused naming the flag it was probably meant to be.
func TestUnknownFlagSuggests(t *testing.T) {
	m := NewMain()
	m.Stderr = io.Discard
	err := m.ParseFlags([]string{"--data-dir", t.TempDir()}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "-data-dir (did you mean --data?)") {
		t.Errorf("ParseFlags(--data-dir) = %v; want the undefined flag and a suggestion of --data", err)
	}
}

// A flag error is one line, the caller's: the flag package's own message
// and the whole usage text are not written before it; --help writes the
// usage to standard output, not to standard error.
func TestFlagErrorIsOneLine(t *testing.T) {
	for _, args := range [][]string{{"--worker-ttl", "5"}, {"--bogus"}, {"--data-dir", "x"}, {"extra"}} {
		var stderr, stdout strings.Builder
		m := NewMain()
		m.Stderr, m.Stdout = &stderr, &stdout
		err := m.ParseFlags(args, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "see 'needled --help'") {
			t.Errorf("ParseFlags(%v) = %v; want an error pointing at --help", args, err)
		}
		if stderr.Len() > 0 || stdout.Len() > 0 {
			t.Errorf("ParseFlags(%v) wrote %q to stderr and %q to stdout; want nothing (main prints the error)", args, stderr.String(), stdout.String())
		}
	}
	var stderr, stdout strings.Builder
	m := NewMain()
	m.Stderr, m.Stdout = &stderr, &stdout
	if err := m.ParseFlags([]string{"--help"}, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("ParseFlags(--help) = %v; want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(stdout.String(), "usage: needled [flags]") || !strings.Contains(stdout.String(), "-worker-ttl duration") || stderr.Len() > 0 {
		t.Errorf("--help wrote stdout %.60q..., stderr %.60q; want the usage on stdout only", stdout.String(), stderr.String())
	}
}

// A port in use fails the start before the data dir is created: it was
// created, with the peer's identity key, and left behind.
func TestHTTPPortInUseCreatesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := filepath.Join(t.TempDir(), "data")
	m := NewMain()
	m.Stderr, m.HugePages = io.Discard, false
	if err := m.ParseFlags([]string{"--data", data, "--http", busy.Addr().String()}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	err = m.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "(--http)") || ExitCode(err) != 1 {
		t.Errorf("Run with --http %s in use = %v (exit %d); want a listen error naming --http, exit 1", busy.Addr(), err, ExitCode(err))
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data dir after the failed start: %v; want none created", err)
	}
}
