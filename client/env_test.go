package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The token comes from NEEDLE_API_TOKEN or the file NEEDLE_API_TOKEN_FILE
// names, as the CLI and the Python client read them; the URL from
// NEEDLE_URL, else NEEDLE_ADDR, else the default.
func TestFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name, url, addr, token, file string
		wantURL, wantToken, err      string
	}{
		{name: "nothing", wantURL: DefaultURL},
		{name: "token", token: "tok-env", wantURL: DefaultURL, wantToken: "tok-env"},
		{name: "token file", file: file("mounted", "tok-file-0123456789\n"), wantURL: DefaultURL, wantToken: "tok-file-0123456789"},
		{name: "both", token: "tok-env", file: file("both", "tok-file"), err: "both set"},
		{name: "missing file", file: filepath.Join(dir, "none"), err: "NEEDLE_API_TOKEN_FILE"},
		{name: "empty file", file: file("empty", " \n"), err: "is empty"},
		{name: "two lines", file: file("two", "a\nb\n"), err: "more than one line"},
		{name: "a peer's line", file: file("peer", "tok-0123456789abcdef name=ci scope=submit\n"), err: "a line of a peer's token file"},
		{name: "url first", url: "https://mesh.example:7443/", addr: "10.0.0.1:7070", wantURL: "https://mesh.example:7443"},
		{name: "addr", addr: "10.0.0.1:7070", wantURL: "http://10.0.0.1:7070"},
		{name: "bad url", url: "ftp://x", err: "NEEDLE_URL: want http(s)://host:port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NEEDLE_URL", tt.url)
			t.Setenv("NEEDLE_ADDR", tt.addr)
			t.Setenv("NEEDLE_API_TOKEN", tt.token)
			t.Setenv("NEEDLE_API_TOKEN_FILE", tt.file)
			c, err := FromEnv()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("FromEnv = %+v, %v; want an error saying %q", c, err, tt.err)
				}
				return
			}
			if err != nil || c.BaseURL != tt.wantURL || c.Token != tt.wantToken {
				t.Fatalf("FromEnv = %+v, %v; want %s with token %q", c, err, tt.wantURL, tt.wantToken)
			}
		})
	}

	// New reads the token file too (it read NEEDLE_API_TOKEN alone).
	t.Setenv("NEEDLE_API_TOKEN", "")
	t.Setenv("NEEDLE_API_TOKEN_FILE", file("new", "tok-new-0123456789\n"))
	if c := New("http://127.0.0.1:1"); c.Token != "tok-new-0123456789" {
		t.Fatalf("New with NEEDLE_API_TOKEN_FILE: token %q; want the file's", c.Token)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A worker whose client New made while NEEDLE_API_TOKEN_FILE cannot be
// read fails at once, saying why, where it polled into 401s.
func TestWorkerTokenFileUnreadable(t *testing.T) {
	t.Setenv("NEEDLE_API_TOKEN", "")
	t.Setenv("NEEDLE_API_TOKEN_FILE", filepath.Join(t.TempDir(), "none"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	requests := 0
	c := New("http://peer")
	c.HTTP = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		requests++
		cancel() // the worker would poll on; one request is enough to know
		return nil, errors.New("401 unauthorized")
	})}
	w := &Worker{Client: c, Handlers: map[string]HandlerFunc{"echo": func(context.Context, Task) (json.RawMessage, error) { return nil, nil }}}
	err := w.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "NEEDLE_API_TOKEN_FILE") || requests != 0 {
		t.Fatalf("Run = %v after %d requests; want an error naming NEEDLE_API_TOKEN_FILE before any", err, requests)
	}
	// A client given its token does not read the environment.
	c.Token = "tok-given"
	if err := (&Worker{Client: c, Handlers: w.Handlers}).Validate(); err != nil {
		t.Fatalf("Validate with a token: %v", err)
	}
}
