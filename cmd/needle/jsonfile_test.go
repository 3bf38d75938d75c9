package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

func TestJSONSyntaxPosition(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1}`, ""},
		{"{\"mode\":\"dag\",\"tasks\":[\n{\"name\":\"a\"},\n{\"name\":\"b\" \"deps\":[\"a\"]}]}", `3:13: invalid character '"' after object key:value pair`},
		{"{\"a\":\n  [1,2,}", "2:8: invalid character '}' looking for beginning of value"},
		{"{\"a\":1", "1:7: unexpected end of JSON input"},
		{"", "1:1: unexpected end of JSON input"},
		{"{} {}", "1:4: invalid character '{' after top-level value"},
	} {
		err := jsonSyntax([]byte(tt.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("jsonSyntax(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestSubmitFileSyntaxError(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	r := runCLI(t, addr, "{\"mode\":\"parallel\",\n\"tasks\":[{\"handler\":\"echo\",}]}", "submit", "-f", "-")
	r.check(t, 2, "", `needle: submit: stdin:2:28: invalid character '}' looking for beginning of object key string`)
	if n := len(f.submitted()); n != 0 {
		t.Errorf("%d groups submitted; want none", n)
	}
	if !strings.Contains(r.stderr, "stdin:2:") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// A file the command line names that cannot be read is a usage error
// (exit 2), as one that is not JSON is, and nothing is sent: `submit -f`
// exited 2 for bad JSON but 1 for a missing file (trial s82).
func TestInputFileErrorsExit2(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tasks": [}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"submit", "-f", missing},
		{"submit", "-f", bad},
		{"submit", "-f", dir}, // a directory: read fails
		{"submit", "--handler", "echo", "--payload", "@" + missing},
		{"submit", "--handler", "echo", "--payload", "@" + bad},
		{"schedule", "add", "--every", "1h", "-f", missing},
	} {
		want := "missing.json: no such file or directory"
		switch {
		case strings.Contains(strings.Join(args, " "), bad):
			want = "bad.json:1:12: invalid character"
		case args[len(args)-1] == dir:
			want = "is a directory"
		}
		runCLI(t, addr, "", args...).check(t, 2, "", want)
	}
	if n := len(f.submitted()); n != 0 {
		t.Errorf("%d groups submitted; want none", n)
	}
}
