package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

func TestSubmitNotify(t *testing.T) {
	f := &fakeBackend{}
	lim := api.Limits{Notify: func(u string) error {
		if strings.HasPrefix(u, "https://hooks.example/") {
			return nil
		}
		return errors.New("not under an allowed prefix")
	}}
	addr := mustServer(t, f, api.HandlerOptions{Limits: lim})
	runCLI(t, addr, "", "submit", "--handler", "echo", "--notify", "https://hooks.example/a").check(t, 0, "g1.0\n", "")
	file := filepath.Join(t.TempDir(), "group.json")
	if err := os.WriteFile(file, []byte(`{"mode": "parallel", "notify": "https://old/", "tasks": [{"handler": "echo"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, addr, "", "submit", "-f", file, "--notify", "https://hooks.example/b").check(t, 0, "g2\n", "")
	specs := f.submitted()
	if len(specs) != 2 || specs[0].Notify != "https://hooks.example/a" || specs[1].Notify != "https://hooks.example/b" {
		t.Fatalf("submitted notify = %q, %q", specs[0].Notify, specs[len(specs)-1].Notify)
	}
	r := runCLI(t, addr, "", "submit", "--handler", "echo", "--notify", "https://evil.example/")
	r.check(t, 1, "", "400 invalid_argument: notify: not under an allowed prefix")
	if len(f.submitted()) != 2 {
		t.Fatal("a refused notify created a group")
	}
}

// --concurrency sets a -f group's bound (over the file's own); without -f,
// or below 1, it is a usage error and nothing is submitted.
func TestSubmitConcurrency(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	file := filepath.Join(t.TempDir(), "group.json")
	if err := os.WriteFile(file, []byte(`{"mode": "parallel", "concurrency": 9, "tasks": [{"handler": "echo"}, {"handler": "echo"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, addr, "", "submit", "-f", file, "--concurrency", "2").check(t, 0, "g1\n", "")
	if specs := f.submitted(); len(specs) != 1 || specs[0].Concurrency != 2 {
		t.Fatalf("submitted %+v; want one group of concurrency 2", specs)
	}
	runCLI(t, addr, "", "submit", "--handler", "echo", "--concurrency", "2").check(t, 2, "", "--concurrency is for a group (-f)")
	runCLI(t, addr, "", "submit", "-f", file, "--concurrency", "0").check(t, 2, "", "--concurrency must be >= 1")
	if len(f.submitted()) != 1 {
		t.Fatal("a refused --concurrency submitted a group")
	}
}
