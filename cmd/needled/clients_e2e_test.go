package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonClient runs the Python client's tests (clients/python/tests:
// unit tests against an in-memory peer, and integration tests with a
// worker serving handlers of a real needled, with an API token). It skips
// only when python3 is missing; .ci/run installs it.
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	bin := buildNeedled(t)
	addr := freeAddr(t)
	const token = "python-client-test-token"
	runDaemon(t, bin, addr, []string{"NEEDLE_API_TOKEN=" + token}, "--data", t.TempDir(), "--http", addr,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2")
	dir, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), py, "-m", "unittest", "discover", "-v", "-s", "tests")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NEEDLE_TEST_URL=http://"+addr, "NEEDLE_URL=http://"+addr,
		"NEEDLE_API_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("python3 -m unittest: %v", err)
	}
}
