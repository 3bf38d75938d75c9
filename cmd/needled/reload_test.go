package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lineLog is a logger whose lines are sent on a channel, so that a test
// waits for the line it expects instead of sleeping.
func lineLog() (*slog.Logger, <-chan string) {
	lines := make(chan string, 16)
	return slog.New(slog.NewTextHandler(chanWriter(lines), nil)), lines
}

type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

func expectLine(t *testing.T, lines <-chan string, want ...string) {
	t.Helper()
	line := <-lines
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Fatalf("log line %q; want it to hold %q", line, w)
		}
	}
}

// TestReloadTokens: ReloadTokens makes the token file's tokens the ones
// accepted, and on a file that cannot be read, or holds no token, keeps
// the ones accepted and logs an error: a rotation never locks every
// client out.
func TestReloadTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api.token")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old-token-0123456789\n")
	m := NewMain()
	if err := m.ParseFlags([]string{"--api-token-file", file}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	tokens := m.Config.Tokens
	accepts := func(when string, want map[string]bool) {
		t.Helper()
		for tok, w := range want {
			if got := tokens.BearerOK("Bearer " + tok); got != w {
				t.Errorf("%s: %q accepted: %v; want %v", when, tok, got, w)
			}
		}
	}
	log, lines := lineLog()

	write("old-token-0123456789\n# the new one:\nnew-token-0123456789\n")
	m.ReloadTokens(log)
	expectLine(t, lines, "level=INFO", "tokens=2")
	accepts("old and new", map[string]bool{"old-token-0123456789": true, "new-token-0123456789": true})

	write("new-token-0123456789\n")
	m.ReloadTokens(log)
	expectLine(t, lines, "level=INFO", "tokens=1")
	accepts("new only", map[string]bool{"old-token-0123456789": false, "new-token-0123456789": true})

	write("# emptied by mistake\n")
	m.ReloadTokens(log)
	expectLine(t, lines, "level=ERROR", "empty", "tokens=1")
	accepts("after an empty file", map[string]bool{"new-token-0123456789": true, "# emptied by mistake": false})

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	m.ReloadTokens(log)
	expectLine(t, lines, "level=ERROR", "tokens=1")
	accepts("after a missing file", map[string]bool{"new-token-0123456789": true})
}

// TestReloadTokensNoFile: without a token file (NEEDLE_API_TOKEN, or no
// token) a SIGHUP reloads nothing and says so.
func TestReloadTokensNoFile(t *testing.T) {
	for _, env := range []string{"plain", ""} {
		m := NewMain()
		if err := m.ParseFlags(nil, func(k string) string { return map[string]string{"NEEDLE_API_TOKEN": env}[k] }); err != nil {
			t.Fatal(err)
		}
		log, lines := lineLog()
		m.hangup(log, nil)
		expectLine(t, lines, "level=INFO", "nothing to reload")
	}
}

// TestHangupReloads: a SIGHUP sent to the process is caught, not the
// default's instant exit (this test process would die), and reaches
// ReloadTokens through Main.Hangup as Run serves it.
func TestHangupReloads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(file, []byte("old-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := NewMain()
	if err := m.ParseFlags([]string{"--api-token-file", file}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	m.Hangup = notifyHangup()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log, lines := lineLog()
	go m.serveHangups(ctx, log, nil)
	if err := os.WriteFile(file, []byte("old-token-0123456789\nnew-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	expectLine(t, lines, "level=INFO", "SIGHUP", "tokens=2")
	if !m.Config.Tokens.BearerOK("Bearer new-token-0123456789") {
		t.Error("new token refused after SIGHUP")
	}
}

// fakeTLS is a tlsReloader answering err, or a reload until notAfter.
type fakeTLS struct {
	notAfter time.Time
	err      error
}

func (f fakeTLS) ReloadTLS() (bool, time.Time, error) { return f.err == nil, f.notAfter, f.err }

// A SIGHUP reloads the TLS certificate too: the new one's expiry is
// logged at INFO, a failure at ERROR (the certificate served stays).
func TestHangupReloadsTLS(t *testing.T) {
	m := NewMain()
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	log, lines := lineLog()
	m.hangup(log, fakeTLS{notAfter: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)})
	expectLine(t, lines, "level=INFO", "TLS certificate reloaded", "not_after=2027-03-01T00:00:00Z")
	m.hangup(log, fakeTLS{err: errors.New("peer: --tls-cert x: no such file")})
	expectLine(t, lines, "level=ERROR", "the one served stays", "no such file")
}

// TestTokenFileScopes: the token file's lines name and scope tokens; a
// bad line stops the start with an error naming the file and the line,
// never a token; on SIGHUP a bad line keeps every token accepted as it
// was, scopes and names included, and the log names tokens without
// showing one.
func TestTokenFileScopes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api.token")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	parse := func() (*Main, error) {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		return m, m.ParseFlags([]string{"--api-token-file", file}, func(string) string { return "" })
	}
	for body, want := range map[string]string{
		"# tokens\nsecret-a-0123456789 name=ci\nsecret-b-0123456789 scope=wrtie\n":  file + ": line 3: unknown scope \"wrtie\"",
		"secret-a-0123456789 name=ci\nsecret-b-0123456789 name=ci scope=read\n":     file + ": line 2: name \"ci\" is the name of line 1 too",
		"\n\nsecret-a-0123456789 extra\n":                                           file + ": line 3: field 2 is not",
		"secret-a-0123456789 name=ci scope=read\nsecret-a-0123456789 scope=admin\n": file + ": line 2: the same token as line 1",
	} {
		write(body)
		_, err := parse()
		if err == nil || !strings.Contains(err.Error(), "--api-token-file: "+want) {
			t.Errorf("file %q: ParseFlags = %v; want an error holding %q", body, err, want)
		} else if strings.Contains(err.Error(), "secret-") {
			t.Errorf("file %q: the error shows a token: %v", body, err)
		}
	}

	write("secret-old-0123456789 name=ci scope=submit\nsecret-dash-0123456789 name=dash scope=read\n")
	m, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	tokens := m.Config.Tokens
	match := func(secret string) string {
		tok, ok := tokens.Match("Bearer " + secret)
		if !ok {
			return "refused"
		}
		return tok.String()
	}
	before := map[string]string{"secret-old-0123456789": `token "ci" (scope submit)`, "secret-dash-0123456789": `token "dash" (scope read)`, "secret-new-0123456789": "refused"}
	check := func(when string, want map[string]string) {
		t.Helper()
		for secret, w := range want {
			if got := match(secret); got != w {
				t.Errorf("%s: %s is %s; want %s", when, secret, got, w)
			}
		}
	}
	check("at start", before)
	log, lines := lineLog()
	// A rotation half done wrong: the new line is bad. Nothing changes,
	// the old line's scope included.
	write("secret-old-0123456789 name=ci scope=read\nsecret-new-0123456789 name=ci2 scope=sumbit\n")
	m.ReloadTokens(log)
	line := <-lines
	for _, w := range []string{"level=ERROR", "not reloaded", "line 2", `unknown scope \"sumbit\"`, "tokens=2"} {
		if !strings.Contains(line, w) {
			t.Errorf("log %q; want it to hold %q", line, w)
		}
	}
	check("after a bad file", before)
	write("secret-old-0123456789 name=ci scope=submit\nsecret-new-0123456789 name=ci2 scope=submit\n")
	m.ReloadTokens(log)
	line = <-lines
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "names=ci,ci2") || strings.Contains(line, "secret-") {
		t.Errorf("log %q; want INFO naming ci,ci2 and no token", line)
	}
	check("after the reload", map[string]string{"secret-old-0123456789": `token "ci" (scope submit)`, "secret-new-0123456789": `token "ci2" (scope submit)`, "secret-dash-0123456789": "refused"})
}

// A token file line that lost its token, or with a short token, stops
// the start naming the line; NEEDLE_API_TOKEN holding white space (a line
// of a token file put there) stops it too, and a short one is a WARN at
// start (audit s75, F1).
func TestWeakTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api.tokens")
	for body, want := range map[string]string{
		"good-token-0123456789\nname=ops\n":      file + ": line 2: the line has no token: the token comes first",
		"name=grafana scope=read\n":              file + ": line 1: the line has no token",
		"good-token-0123456789\n\nx\n":           file + ": line 3: the token is shorter than 16 bytes: make one with needle keygen --token-file",
		"good-token-0123456789 # admin\nshort\n": file + ": line 2: the token is shorter",
	} {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		err := NewMain().ParseFlags([]string{"--api-token-file", file}, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("file %q: ParseFlags = %v; want an error holding %q", body, err, want)
		}
	}
	for _, env := range []string{"envtok123456789 name=ci scope=read", "tok\n", " tok"} {
		err := NewMain().ParseFlags(nil, func(k string) string { return map[string]string{"NEEDLE_API_TOKEN": env}[k] })
		if err == nil || !strings.Contains(err.Error(), "NEEDLE_API_TOKEN holds white space: it takes one token alone (admin); names and scopes go in --api-token-file") {
			t.Errorf("NEEDLE_API_TOKEN=%q: ParseFlags = %v; want a white space error", env, err)
		} else if strings.Contains(err.Error(), "envtok") || strings.Contains(err.Error(), "tok\n") {
			t.Errorf("NEEDLE_API_TOKEN=%q: the error shows the token: %v", env, err)
		}
	}
	for env, warn := range map[string]bool{"secret": true, "0123456789abcdef": false} {
		m := NewMain()
		if err := m.ParseFlags(nil, func(k string) string { return map[string]string{"NEEDLE_API_TOKEN": env}[k] }); err != nil {
			t.Fatalf("NEEDLE_API_TOKEN=%q: %v; want it taken", env, err)
		}
		log, lines := lineLog()
		m.warnTokens(log)
		select {
		case line := <-lines:
			if !warn || !strings.Contains(line, "level=WARN") || !strings.Contains(line, "NEEDLE_API_TOKEN is shorter than 16 bytes") ||
				!strings.Contains(line, "needle keygen") || strings.Contains(line, env) {
				t.Errorf("NEEDLE_API_TOKEN=%q: logged %q", env, line)
			}
		default:
			if warn {
				t.Errorf("NEEDLE_API_TOKEN=%q: no WARN", env)
			}
		}
	}
}

// A token file others can read is a WARN at start and at each reload,
// naming the file and its mode; a 0600 one is not (audit s75, F18). A
// file reached through a symbolic link (a Kubernetes Secret's) may be
// group-readable.
func TestTokenFileModeWarns(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "api.tokens")
	if err := os.WriteFile(file, []byte("mode-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := NewMain()
	if err := m.ParseFlags([]string{"--api-token-file", file}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	log, lines := lineLog()
	quiet := func(when string) {
		t.Helper()
		select {
		case line := <-lines:
			if strings.Contains(line, "WARN") {
				t.Errorf("%s: logged %q; want no WARN", when, line)
			}
		default:
		}
	}
	m.warnTokens(log)
	quiet("start, mode 0600")
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	m.warnTokens(log)
	expectLine(t, lines, "level=WARN", "API token file is readable by others", "file="+file, "mode=0644")
	m.ReloadTokens(log)
	expectLine(t, lines, "level=INFO", "reloaded")
	expectLine(t, lines, "level=WARN", "readable by others", "mode=0644")

	if err := os.Chmod(file, 0o440); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	warnTokenFileMode(log, link)
	quiet("a link to a 0440 file")
	warnTokenFileMode(log, file)
	expectLine(t, lines, "level=WARN", "mode=0440")
}
