package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/internal/loopport"
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
	cmd, addr := startDaemon(t, bin, dir)
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
	_, addr = startDaemon(t, bin, dir)
	c.BaseURL = "http://" + addr
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

// freeAddr returns a loopback address free a moment ago (see loopport),
// for a listener whose address must be known before its daemon starts
// (the mesh port of --initial-peers or of a seed): start such daemons
// with startRetrying.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := loopport.Free()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// anyPort is the --http (and --health-listen) of the daemons these tests
// start: the daemon binds a port of its own choosing and its log names it
// (daemon.addr). A port found free here, released, and bound by the daemon
// later could be taken in between by another process of a shared machine
// (other test packages start libp2p hosts and HTTP servers on loopback),
// and the daemon then failed to start.
const anyPort = "127.0.0.1:0"

// daemon is a needled started by these tests.
type daemon struct {
	cmd     *exec.Cmd
	serving chan struct{} // closed when it logs "serving"
	exited  chan struct{} // closed when its stderr ends: it (and its children) exited

	mu         sync.Mutex
	addr       string // the API's address, as its "serving" line names it
	healthAddr string // the --health-listen address, as its log names it
	stopped    string // its last "needled: " line, when it exited
}

// spawnDaemon starts needled with args and extra environment (its output
// on the test's stderr) and stops it when the test ends (resuming it
// first, in case the test paused it); it does not wait for it to serve.
func spawnDaemon(t *testing.T, bin string, env []string, args ...string) *daemon {
	t.Helper()
	return spawnDaemonLog(t, bin, nil, env, args...)
}

// spawnDaemonLog is spawnDaemon copying the daemon's stderr to log too
// (when not nil).
func spawnDaemonLog(t *testing.T, bin string, log io.Writer, env []string, args ...string) *daemon {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: exec.Command(bin, args...), serving: make(chan struct{}), exited: make(chan struct{})}
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = os.Stderr, w
	err = d.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	go d.readLog(r, log)
	t.Cleanup(d.stop)
	return d
}

// readLog copies the daemon's stderr to the test's and notes the addresses
// its log names and the error it stopped with.
func (d *daemon) readLog(r *os.File, log io.Writer) {
	defer close(d.exited)
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			os.Stderr.WriteString(line)
			if log != nil {
				io.WriteString(log, line)
			}
			d.mu.Lock()
			switch {
			case strings.Contains(line, ` msg="serving health checks" `):
				d.healthAddr = logField(line, "http")
			case strings.Contains(line, " msg=serving "):
				if d.addr == "" {
					d.addr = logField(line, "http")
					close(d.serving)
				}
			case strings.HasPrefix(line, "needled: "):
				d.stopped = strings.TrimSpace(line)
			}
			d.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// logField returns the value of key in a text log line (unquoted values).
func logField(line, key string) string {
	_, v, _ := strings.Cut(line, " "+key+"=")
	v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
	return v
}

// errAddrInUse is what serve returns when the daemon exited because an
// address it was to listen on was in use.
var errAddrInUse = errors.New("a listen address was in use")

// serve waits until the daemon logs that it serves, and returns the API's
// address; or until it exits, and returns why (errAddrInUse when a listen
// address was taken).
func (d *daemon) serve(t *testing.T) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	select {
	case <-d.serving:
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.addr, nil
	case <-d.exited:
		d.mu.Lock()
		defer d.mu.Unlock()
		if strings.Contains(d.stopped, "address already in use") {
			return "", fmt.Errorf("%w: %s", errAddrInUse, d.stopped)
		}
		return "", fmt.Errorf("needled exited before serving: %q", d.stopped)
	case <-ctx.Done():
		return "", errors.New("needled did not serve within 60 s")
	}
}

// stop kills the daemon (resumed first, in case the test paused it) and
// waits for it.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGCONT)
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
}

// startDaemon runs a single-peer daemon on dir: see runDaemon.
func startDaemon(t *testing.T, bin, dir string) (*exec.Cmd, string) {
	t.Helper()
	return runDaemon(t, bin, nil, "--data", dir, "--http", anyPort, "--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "4")
}

// runDaemon starts needled with args, whose listeners are on port 0
// (anyPort, /tcp/0), and extra environment, and waits until its /healthz
// answers 200; it returns the process and the API's address.
func runDaemon(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	d := spawnDaemon(t, bin, env, args...)
	addr, err := d.serve(t)
	if err != nil {
		t.Fatalf("needled %v: %v", args, err)
	}
	waitHealthy(t, addr)
	return d.cmd, addr
}

// startRetrying starts daemons that listen on fixed ports (start chooses
// them, anew on each call, with freeAddr) and waits until all serve, in
// order. A port chosen free and released can be taken by another process
// before the daemon binds it: when one exits because an address was in
// use, all are stopped and started again on new ports, up to 5 times.
// It returns the daemons and their API addresses.
func startRetrying(t *testing.T, start func() []*daemon) ([]*daemon, []string) {
	t.Helper()
	for try := 1; ; try++ {
		ds := start()
		addrs := make([]string, len(ds))
		errs := make(chan error, len(ds))
		for i, d := range ds {
			go func() {
				var err error
				addrs[i], err = d.serve(t)
				errs <- err
			}()
		}
		var err error
		for range ds {
			if err = <-errs; err != nil {
				break // the first to fail: the others may wait for it
			}
		}
		if err == nil {
			for _, a := range addrs {
				waitHealthy(t, a)
			}
			return ds, addrs
		}
		for _, d := range ds {
			d.stop()
		}
		if !errors.Is(err, errAddrInUse) || try == 5 {
			t.Fatalf("start %d: %v", try, err)
		}
		t.Logf("start %d: %v: again on other ports", try, err)
	}
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
func meshArgs(dir, join string) []string {
	args := []string{"--data", dir, "--http", anyPort, "--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2",
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
