package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "needle.conf")
	body := "# a config file\nslots = 7\nhttp = 127.0.0.1:9000\nretention = 1h\nhttp-allow = http://a/\nhttp-allow = http://b/\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NEEDLE_HTTP": "127.0.0.1:8000", "NEEDLE_API_TOKEN": "s3cret"}
	m := NewMain()
	m.Stderr = &strings.Builder{}
	if err := m.ParseFlags([]string{"--config", cfg, "--slots", "3"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.Slots != 3 || c.HTTPAddr != "127.0.0.1:8000" || c.Retention != time.Hour || c.Token != "s3cret" {
		t.Errorf("config = slots %d http %q retention %v token %q; want flag 3, env 127.0.0.1:8000, file 1h, env token",
			c.Slots, c.HTTPAddr, c.Retention, c.Token)
	}
	if got := c.Builtins.HTTPAllow; len(got) != 2 {
		t.Errorf("http-allow = %v; want two prefixes from the file", got)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.conf")
	_ = os.WriteFile(bad, []byte("nope = 1\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "bogus"},
		{"bad duration", []string{"--retention", "soon"}, "retention"},
		{"bad exec allow", []string{"--exec-allow", "noequals"}, "exec-allow"},
		{"unknown flag in file", []string{"--config", bad}, `unknown flag "nope"`},
		{"missing file", []string{"--config", "/nonexistent/x"}, "--config"},
		{"stray argument", []string{"extra"}, "unexpected argument"},
		{"zero retention", []string{"--retention", "0"}, "--retention 0s: want a positive value (the default is 168h0m0s)"},
		{"negative payload", []string{"--max-payload", "-1"}, "--max-payload -1: want a positive value"},
		{"zero replicas", []string{"--replicas", "0"}, "--replicas 0"},
		{"zero forget-after", []string{"--forget-after", "0"}, "--forget-after 0s"},
		{"zero conns per client", []string{"--max-conns-per-client", "0"}, "--max-conns-per-client 0: want a positive value (the default is 256)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = &strings.Builder{}
			err := m.ParseFlags(tt.args, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFlags(%v) = %v; want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
	// A value given reaches the peer's Config.
	m := NewMain()
	m.Stderr = &strings.Builder{}
	if err := m.ParseFlags([]string{"--max-conns-per-client", "5"}, func(string) string { return "" }); err != nil || m.Config.MaxConnsPerClient != 5 {
		t.Errorf("--max-conns-per-client 5: ParseFlags = %v, MaxConnsPerClient %d", err, m.Config.MaxConnsPerClient)
	}
	// The same from the environment.
	m = NewMain()
	m.Stderr = &strings.Builder{}
	env := map[string]string{"NEEDLE_RETENTION": "0"}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "--retention 0s") {
		t.Errorf("NEEDLE_RETENTION=0: ParseFlags = %v; want the --retention error", err)
	}
}

func TestVersionFlag(t *testing.T) {
	m := NewMain()
	m.Stderr = &strings.Builder{}
	if err := m.ParseFlags([]string{"--version"}, func(string) string { return "" }); !errors.Is(err, ErrVersion) {
		t.Fatalf("ParseFlags(--version) = %v; want ErrVersion", err)
	}
	if v := Version(); !strings.HasPrefix(v, "needled ") || !strings.Contains(v, "commit ") {
		t.Errorf("Version() = %q; want \"needled <version> (commit <commit>, <go>)\"", v)
	}
}

// TestOpenHTTPRefused: --http on every interface without a token stops the
// daemon before it opens anything, saying how to fix it.
func TestOpenHTTPRefused(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		ok   bool
	}{
		{[]string{"--http", "0.0.0.0:0"}, nil, false},
		{[]string{"--http", "0.0.0.0:0"}, map[string]string{"NEEDLE_API_TOKEN": "t"}, true},
		{[]string{"--http", "0.0.0.0:0", "--insecure-open-api"}, nil, true},
	} {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		if err := m.ParseFlags(append(tt.args, "--data", t.TempDir()), func(k string) string { return tt.env[k] }); err != nil {
			t.Fatal(err)
		}
		err := m.Config.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%v env %v: Validate() = %v; want ok %v", tt.args, tt.env, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "NEEDLE_API_TOKEN") {
			t.Errorf("%v: error %q does not say to set NEEDLE_API_TOKEN", tt.args, err)
		}
	}
}

func TestParseFlagsTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o400); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file := write("api.token", "from-a-secret-0123456789\n")
	// A rotation's file: the new token added, the old one still there.
	several := write("rotating", "# needle API tokens\n\n  new-token-0123456789  \nold-token-0123456789\n# old-token2\n\n")
	empty := write("empty", "")
	comments := write("comments", "# no token\n\n   \n")
	tests := []struct {
		name, env string // env: NEEDLE_API_TOKEN
		args      []string
		want      []string // accepted
		refused   []string
		err       string
	}{
		{"env file", "", nil, []string{"from-a-secret-0123456789"}, []string{"", "x"}, ""},
		{"flag", "", []string{"--api-token-file", file}, []string{"from-a-secret-0123456789"}, []string{"", "x"}, ""},
		{"several", "", []string{"--api-token-file", several}, []string{"new-token-0123456789", "old-token-0123456789"},
			[]string{"", "# needle API tokens", "old-token2", "# old-token2"}, ""},
		{"token alone", "plain", nil, []string{"plain"}, []string{"", "x"}, ""},
		{"both", "plain", []string{"--api-token-file", file}, nil, nil, "both set"},
		{"empty file", "", []string{"--api-token-file", empty}, nil, nil, "empty"},
		{"comments only", "", []string{"--api-token-file", comments}, nil, nil, "empty"},
		{"missing file", "", []string{"--api-token-file", file + ".x"}, nil, nil, "--api-token-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = &strings.Builder{}
			env := map[string]string{"NEEDLE_API_TOKEN": tt.env}
			if tt.name == "env file" {
				env["NEEDLE_API_TOKEN_FILE"] = file
			}
			err := m.ParseFlags(tt.args, func(k string) string { return env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseFlags = %v; want an error mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// As the peer takes them: Validate makes Token a set of one.
			c := m.Config
			c.InMemory = true
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, tok := range tt.want {
				if !c.Tokens.BearerOK("Bearer " + tok) {
					t.Errorf("token %q refused; want accepted", tok)
				}
			}
			for _, tok := range tt.refused {
				if c.Tokens.BearerOK("Bearer " + tok) {
					t.Errorf("token %q accepted; want refused", tok)
				}
			}
		})
	}
}

// A NEEDLE_* variable that no flag reads (a typo) is named, to be logged
// at start; flags' variables and the others needle reads are not.
func TestUnknownEnv(t *testing.T) {
	m := NewMain()
	m.Stderr = &strings.Builder{}
	m.Environ = func() []string {
		return []string{"NEEDLE_JION=10.0.0.1:4001", "NEEDLE_SLOTS=4", "NEEDLE_HTTP_ALLOW=a", "NEEDLE_API_TOKEN=t",
			"NEEDLE_ADDR=x", "NEEDLE_SLOST=8", "NEEDLE_BENCH_WORKER=1", "PATH=/bin", "NEEDLE_JION=again", "NEEDLE_EXEC_DIR=/x",
			"NEEDLE_HEALTH_LISTEN=127.0.0.1:0"}
	}
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"NEEDLE_JION", "NEEDLE_SLOST"}; !slices.Equal(m.UnknownEnv, want) {
		t.Fatalf("UnknownEnv = %v; want %v", m.UnknownEnv, want)
	}
}

// The error that stops the daemon is a line of text, or with
// --log-format json a JSON record a log collector parses.
func TestFatalFormat(t *testing.T) {
	for format, want := range map[string]string{"text": "needled: boom\n", "json": `"level":"ERROR","msg":"needled stopped","err":"boom"}`} {
		var out strings.Builder
		m := &Main{Stderr: &out, LogFormat: format}
		m.fatal(errors.New("boom"))
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s: %q; want it to hold %q", format, out.String(), want)
		}
	}
}

// --exec-dir (NEEDLE_EXEC_DIR) is where exec attempts run, DATA/exec by
// default; one that cannot be created stops the daemon at start, naming it.
func TestExecDirFlag(t *testing.T) {
	data := t.TempDir()
	m := NewMain()
	m.Stderr = &strings.Builder{}
	if err := m.ParseFlags([]string{"--data", data}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if _, err := m.prepare(); err != nil {
		t.Fatal(err)
	}
	if got, want := m.Config.Builtins.ExecDir, filepath.Join(data, "exec"); got != want {
		t.Errorf("default exec dir = %q; want %q", got, want)
	}
	m = NewMain()
	m.Stderr = &strings.Builder{}
	env := map[string]string{"NEEDLE_EXEC_DIR": "/srv/needle-exec"}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil || m.Config.Builtins.ExecDir != "/srv/needle-exec" {
		t.Errorf("NEEDLE_EXEC_DIR: ParseFlags = %v, ExecDir %q", err, m.Config.Builtins.ExecDir)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m = NewMain()
	m.Stderr = &strings.Builder{}
	m.Environ = func() []string { return nil }
	bad := filepath.Join(file, "exec")
	args := []string{"--data", filepath.Join(t.TempDir(), "data"), "--http", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0",
		"--exec-allow", "echo=/bin/echo", "--exec-dir", bad}
	if err := m.ParseFlags(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	err := m.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "exec dir "+bad) || !strings.Contains(err.Error(), "--exec-dir") {
		t.Fatalf("Run with an exec dir under a file = %v; want a start error naming it", err)
	}
}
