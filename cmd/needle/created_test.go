package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateCommandsPrintTheID holds every create command to one
// convention: the new id alone on stdout (id=$(needle ...) takes it), a
// summary on stderr, and with --json the API's answer alone. needle
// schedule add printed its summary on stdout.
func TestCreateCommandsPrintTheID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status := http.StatusCreated
		if strings.Contains(string(body), `"key":"again"`) {
			status = http.StatusOK // a repeated key
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/tasks":
			fmt.Fprint(w, `{"id":"g1.0","group":"g1"}`)
		case "POST /v1/groups":
			fmt.Fprint(w, `{"group":"g2","tasks":{"a":"g2.0","b":"g2.1"}}`)
		case "POST /v1/schedules":
			fmt.Fprint(w, `{"id":"s1","every":"30s","timezone":"UTC","overlap":"skip","misfire":"once","paused":false,"revision":"r",
				"created_at":"2026-01-02T03:04:05Z","group":{"mode":"parallel","handlers":["echo"]},"firings":[]}`)
		case "POST /v1/schedules/s1/trigger":
			fmt.Fprint(w, `{"schedule":"s1","group":"s1~1~t","tasks":{"t":"s1~1~t.0"}}`)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "g.json")
	if err := os.WriteFile(file, []byte(`{"mode":"parallel","tasks":[{"name":"a","handler":"echo"},{"name":"b","handler":"echo"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"submit", "--handler", "echo"}, "g1.0\n", "submitted task g1.0 (handler echo, group g1)"},
		{[]string{"submit", "--handler", "echo", "--key", "again"}, "g1.0\n", `task g1.0 was submitted before with key "again": nothing new`},
		{[]string{"submit", "-f", file}, "g2\n", "submitted group g2 (2 tasks)"},
		{[]string{"schedule", "add", "--every", "30s", "--handler", "echo"}, "s1\n", `added schedule s1 active "every 30s"`},
		{[]string{"schedule", "add", "--every", "30s", "--handler", "echo", "--key", "again"}, "s1\n", `schedule added before with key "again", nothing new: s1`},
		{[]string{"schedule", "trigger", "s1"}, "s1~1~t\n", "schedule s1 fired group s1~1~t (1 task)"},
		{[]string{"schedule", "trigger", "s1", "--key", "again"}, "s1~1~t\n", `schedule s1 fired group s1~1~t before with key "again": nothing new`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runCLI(t, srv.URL, "", tt.args...)
			if r.code != 0 || r.stdout != tt.stdout || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q, stderr containing %q", r.code, r.stdout, r.stderr, tt.stdout, tt.stderr)
			}
			r = runCLI(t, srv.URL, "", append(tt.args, "--json")...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "{") || r.stderr != "" {
				t.Errorf("--json: exit %d, stdout %q, stderr %q; want 0, the API's answer alone", r.code, r.stdout, r.stderr)
			}
		})
	}
}
