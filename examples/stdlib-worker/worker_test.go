// Package stdlibworker tests worker.py and client.py, a worker and a
// client written from docs/api.md alone (Python's standard library, no
// needle client), against a real mesh of three peers: the contract a team
// without a needle library writes to.
package stdlibworker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer"
)

// TestStdlibWorker runs client.py's tour (tasks, a parallel group, DAGs,
// waits, retries by policy and by hand, a cancel of a running task, lists
// and filters, errors) against worker.py serving its handler, the worker
// polling one peer and the client asking another. Then it stops the
// worker while it runs a task: the task is released (READY again, no
// attempt spent) and the worker exits 0.
func TestStdlibWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a mesh of three peers and python3")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found") // .ci/run installs it
	}
	apis := startMesh(t, 3)

	var werr bytes.Buffer
	worker := exec.Command(py, "worker.py", "--addr", apis[1], "--handlers", "demo", "--id", "stdlib-test",
		"--wait", "5s", "--grace", "0.5")
	worker.Stdout, worker.Stderr = &werr, &werr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	defer func() {
		if worker.ProcessState == nil {
			_ = worker.Process.Kill()
			<-exited
		}
		t.Logf("worker.py:\n%s", werr.String())
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "client.py", "--addr", apis[2], "--handler", "demo").CombinedOutput()
	t.Logf("client.py:\n%s", out)
	if err != nil {
		t.Fatalf("client.py: %v", err)
	}

	// Stopped while it runs a task, the worker hands the task back.
	var sub struct{ ID string }
	call(t, "POST", apis[0]+"/v1/tasks", `{"handler":"demo","payload":{"sleep":60,"log":["started"]}}`, &sub)
	var task struct {
		State string
		Round int
	}
	for task.State != "RUNNING" {
		call(t, "GET", apis[0]+"/v1/tasks/"+sub.ID, "", &task)
		if ctx.Err() != nil {
			t.Fatalf("task %s is %s, never RUNNING", sub.ID, task.State)
		}
		time.Sleep(20 * time.Millisecond) // polling the peer's state, not waiting for it
	}
	if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("worker.py on SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("worker.py did not exit on SIGTERM")
	}
	// The task is READY again, no attempt spent, its line kept. (An owner
	// on another peer may lease it to the worker's peer once more before
	// it hears the worker wants no more; that peer hands it back within
	// 2 s: docs/api.md, POST /v1/leases/{lease}/release.)
	var after struct {
		State   string
		Attempt int
	}
	for after.State != "READY" {
		call(t, "GET", apis[0]+"/v1/tasks/"+sub.ID, "", &after)
		if ctx.Err() != nil {
			t.Fatalf("task %s after the stop: %+v; want READY", sub.ID, after)
		}
		time.Sleep(20 * time.Millisecond) // polling the peer's state
	}
	var evs struct {
		Events []struct{ Type, Error string }
	}
	call(t, "GET", apis[0]+"/v1/tasks/"+sub.ID+"/events", "", &evs)
	released := slices.ContainsFunc(evs.Events, func(e struct{ Type, Error string }) bool {
		return e.Type == "expired" && strings.HasPrefix(e.Error, "released by worker stdlib-test: ")
	})
	var logs struct{ Lines []struct{ Text string } }
	call(t, "GET", apis[0]+"/v1/tasks/"+sub.ID+"/logs?attempt=1", "", &logs)
	if !released || after.Attempt != 0 || len(logs.Lines) == 0 || logs.Lines[0].Text != "started" {
		t.Fatalf("task %s after the stop: %+v, events %+v, log %+v; want it released by the worker, no attempt spent, its line kept",
			sub.ID, after, evs.Events, logs.Lines)
	}
}

// startMesh starts n peers in this process, the first founding the mesh
// and the others joining it, and returns their API URLs once every peer
// is healthy and sees them all alive. Each peer binds port 0 itself (a
// port found free, released and bound again may be taken in between);
// the others join the first at the address its GET /v1/peers names.
func startMesh(t *testing.T, n int) []string {
	t.Helper()
	var apis, join []string
	for i := range n {
		cfg := peer.Config{InMemory: true, HTTPAddr: "127.0.0.1:0", Slots: 2, Partitions: 16,
			Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Join: join,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
		p, err := peer.New(cfg)
		if err != nil {
			t.Fatalf("peer %d: %v", i, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		select {
		case <-p.Ready():
		case err := <-done:
			t.Fatalf("peer %d: Run: %v", i, err)
		}
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("peer %d: Run: %v", i, err)
			}
		})
		apis = append(apis, "http://"+p.Addr())
		if i == 0 {
			join = selfAddrs(t, apis[0])
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, api := range apis {
		for !meshFormed(api, n) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the mesh of %d did not form in a minute", api, n)
			}
			time.Sleep(50 * time.Millisecond) // polling the peer's view
		}
	}
	return apis
}

// meshFormed reports whether the peer at api is healthy and sees n peers
// alive.
func meshFormed(api string, n int) bool {
	resp, err := http.Get(api + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	resp, err = http.Get(api + "/v1/peers")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v struct{ Peers []struct{ State string } }
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return false
	}
	alive := 0
	for _, p := range v.Peers {
		if p.State == "alive" {
			alive++
		}
	}
	return alive == n
}

// selfAddrs returns the mesh addresses (multiaddrs ending in /p2p/<id>)
// the peer at api listens on, as its GET /v1/peers names them.
func selfAddrs(t *testing.T, api string) []string {
	t.Helper()
	var v struct {
		Self  string
		Peers []struct {
			ID    string
			Addrs []string
		}
	}
	call(t, "GET", api+"/v1/peers", "", &v)
	for _, p := range v.Peers {
		if p.ID == v.Self && len(p.Addrs) > 0 {
			return p.Addrs
		}
	}
	t.Fatalf("%s: GET /v1/peers names no address of itself (%s)", api, v.Self)
	return nil
}

// call sends one API request and decodes its 2xx answer into out.
func call(t *testing.T, method, url, body string, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s = %d %s", method, url, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s %s: %v (%s)", method, url, err, data)
	}
}
