package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// TestKill9Restart runs the real daemon, kills it with SIGKILL while tasks
// run, restarts it on the same data dir and checks that every acknowledged
// task is there and finishes, and that the ones that were RUNNING ran again
// in a later round.
func TestKill9Restart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	bin := buildNeedled(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	cmd := startDaemon(t, bin, dir, addr)
	c := &api.Client{BaseURL: "http://" + addr}
	ctx := t.Context()
	var ids []string
	for i := range 40 {
		res, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{
			Handler: "sleep", Payload: json.RawMessage(fmt.Sprintf(`{"ms":300,"i":%d}`, i))}})
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		ids = append(ids, res.ID)
	}
	running := map[string]uint64{}
	waitUntil(t, "a task RUNNING", func() bool {
		for _, id := range ids {
			if tk, err := c.GetTask(ctx, id, 0); err == nil && tk.State == "RUNNING" {
				running[id] = tk.Round
			}
		}
		return len(running) > 0
	})
	killAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	startDaemon(t, bin, dir, addr)
	for _, id := range ids {
		tk, err := c.GetTask(ctx, id, 30*time.Second)
		if err != nil || tk.State != "SUCCEEDED" {
			t.Fatalf("after restart %s = %+v, %v", id, tk, err)
		}
		// A task seen RUNNING may have finished between the look and the
		// kill (the looks take time on a loaded machine): only one still
		// running at the kill must run again.
		if r, ok := running[id]; ok && tk.Round <= r && (tk.FinishedAt == nil || tk.FinishedAt.After(killAt)) {
			t.Errorf("%s was RUNNING in round %d at the kill and finished in round %d after it; want a later round", id, r, tk.Round)
		}
	}
}

var (
	portMu   sync.Mutex
	portUsed = map[int]bool{}
)

// freeAddr returns a loopback address that is free now, on a port below
// the kernel's ephemeral range (32768-60999 on Linux). A port from
// net.Listen(":0"), released for the daemon to bind, is an ephemeral one,
// and the daemons' own listeners on port 0 (libp2p) draw from that range
// too: one of them took such a port before its daemon bound it, which
// then exited with "address already in use".
func freeAddr(t *testing.T) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if portUsed[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		ln.Close()
		portUsed[port] = true
		return addr
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}

func startDaemon(t *testing.T, bin, dir, addr string) *exec.Cmd {
	t.Helper()
	return runDaemon(t, bin, addr, nil, "--data", dir, "--http", addr, "--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "4")
}

// runDaemon starts needled with args and extra environment (its output on
// the test's stderr), stops it when the test ends (resuming it first, in
// case the test paused it), and waits until its /healthz answers 200.
func runDaemon(t *testing.T, bin, addr string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := spawnDaemon(t, bin, env, args...)
	waitHealthy(t, addr)
	return cmd
}

// spawnDaemon starts needled with args and extra environment and stops it
// when the test ends; it does not wait for it to serve.
func spawnDaemon(t *testing.T, bin string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// waitHealthy waits until the /healthz of the daemon at addr answers 200.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	waitUntil(t, "healthz of "+addr, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// meshArgs are the flags of a mesh peer in these tests: small, and quick
// to drain.
func meshArgs(dir, addr, join string) []string {
	args := []string{"--data", dir, "--http", addr, "--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2",
		"--partitions", "32", "--drain-timeout", "-1s"}
	if join != "" {
		args = append(args, "--join", join)
	}
	return args
}

// waitUntil polls a condition of a separate process (there is no event to
// wait on across processes), bounded.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
