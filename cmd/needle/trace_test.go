package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// TestSubmitTraceparent: needle submit sends --traceparent, else the
// TRACEPARENT of its environment (an exec task's), as the traceparent
// header, so that the submission joins that trace; without either, none.
func TestSubmitTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	runCLI(t, addr, "", "submit", "--handler", "echo", "--traceparent", tp).check(t, 0, "g1.0\n", "")
	file := filepath.Join(t.TempDir(), "group.json")
	if err := os.WriteFile(file, []byte(`{"mode": "parallel", "tasks": [{"handler": "echo"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	g := &Globals{Addr: addr, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Traceparent: tp}
	if code := run(t.Context(), g, []string{"submit", "-f", file}); code != 0 {
		t.Fatalf("submit -f with TRACEPARENT: exit %d: %s", code, errOut.String())
	}
	runCLI(t, addr, "", "submit", "--handler", "echo").check(t, 0, "", "")
	specs := f.submitted()
	if len(specs) != 3 || specs[0].Trace != tp || specs[1].Trace != tp || specs[2].Trace != "" {
		t.Fatalf("submitted traces = %+v; want %s, %s (from the environment), none", specs, tp, tp)
	}
}
