package main

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/needle-mesh/needle/client"
	"github.com/needle-mesh/needle/peer/api"
)

// The test binary doubles as an external worker process (see TestMain):
// with workerURLEnv set it serves workerHandlerEnv on that peer and prints
// what it does on stdout, one JSON workerEvent a line, so that a test can
// follow it without sharing memory with it.
const (
	workerURLEnv     = "NEEDLE_E2E_WORKER"         // the peer it polls
	workerIDEnv      = "NEEDLE_E2E_WORKER_ID"      // its worker id
	workerHandlerEnv = "NEEDLE_E2E_WORKER_HANDLER" // the handler it serves
	// workerOnceEnv set: take one task, hold it for the payload's
	// "hold_ms", then report it with POST /v1/leases/{lease}/complete and
	// print the answer ("complete"), then exit. Unset: a client.Worker
	// that runs 4 tasks at a time, each for the payload's "ms".
	workerOnceEnv = "NEEDLE_E2E_WORKER_ONCE"
)

// workerEvent is a line a worker process prints: "start" when a handler
// starts (task, round, lease), "complete" with the answer to its late
// complete (status, body).
type workerEvent struct {
	Ev     string `json:"ev"`
	Task   string `json:"task"`
	Round  uint64 `json:"round"`
	Lease  string `json:"lease,omitempty"`
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
}

// workerPayload is the payload of the tasks of the test workers' handler.
type workerPayload struct {
	MS     int  `json:"ms"`      // how long a client.Worker runs it
	HoldMS int  `json:"hold_ms"` // how long a once worker holds it
	Crash  bool `json:"crash"`   // the handler kills its worker process
}

func TestMain(m *testing.M) {
	if url := os.Getenv(workerURLEnv); url != "" {
		if err := serveTestWorker(url); err != nil {
			fmt.Fprintln(os.Stderr, "test worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveTestWorker is the worker process's main.
func serveTestWorker(url string) error {
	id, handler := os.Getenv(workerIDEnv), os.Getenv(workerHandlerEnv)
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e workerEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
	if os.Getenv(workerOnceEnv) != "" {
		return holdOne(url, id, handler, emit)
	}
	w := &client.Worker{Client: client.New(url), ID: id, Concurrency: 4, PollWait: time.Second,
		Heartbeat: 300 * time.Millisecond, Handlers: map[string]client.HandlerFunc{
			handler: func(ctx context.Context, t client.Task) (json.RawMessage, error) {
				emit(workerEvent{Ev: "start", Task: t.ID, Round: t.Round, Lease: t.Lease})
				var p workerPayload
				if err := json.Unmarshal(t.Payload, &p); err != nil {
					return nil, client.Permanent(err)
				}
				if p.Crash {
					os.Exit(3) // as a segfault or the OOM killer would end it
				}
				select { // the work
				case <-time.After(time.Duration(p.MS) * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return json.Marshal(map[string]string{"by": id})
			}}}
	return w.Run(context.Background())
}

// holdOne polls until it gets one task, holds it for its hold_ms (the test
// stops the process meanwhile), then completes it and prints the answer.
func holdOne(url, id, handler string, emit func(workerEvent)) error {
	body := fmt.Sprintf(`{"worker":%q,"handlers":[%q],"max":1,"wait":"1s"}`, id, handler)
	for {
		status, data, err := postRaw(url+"/v1/workers/poll", body)
		if err != nil {
			return err
		}
		var res api.PollResult
		if status != http.StatusOK || json.Unmarshal(data, &res) != nil {
			return fmt.Errorf("poll = %d %s", status, data)
		}
		if len(res.Tasks) == 0 {
			continue
		}
		t := res.Tasks[0]
		emit(workerEvent{Ev: "start", Task: t.ID, Round: t.Round, Lease: t.Lease})
		var p workerPayload
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return err
		}
		time.Sleep(time.Duration(p.HoldMS) * time.Millisecond) // the work, no heartbeat
		status, data, err = postRaw(url+"/v1/leases/"+t.Lease+"/complete", fmt.Sprintf(`{"result":{"by":%q}}`, id))
		if err != nil {
			return err
		}
		emit(workerEvent{Ev: "complete", Task: t.ID, Round: t.Round, Status: status, Body: string(data)})
		return nil
	}
}

func postRaw(url, body string) (int, []byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// workerProc is a worker process started by a test, with the events it
// printed so far.
type workerProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []workerEvent
	exited chan struct{}
}

// startWorkerProc starts the test binary as worker id of handler on the
// peer at addr (once: a holdOne worker) and kills it when the test ends.
func startWorkerProc(t *testing.T, addr, id, handler string, once bool) *workerProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), workerURLEnv+"=http://"+addr, workerIDEnv+"="+id, workerHandlerEnv+"="+handler)
	if once {
		cmd.Env = append(cmd.Env, workerOnceEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workerProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e workerEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				p.mu.Lock()
				p.events = append(p.events, e)
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// seen returns the events of kind ev printed so far.
func (p *workerProc) seen(ev string) []workerEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []workerEvent
	for _, e := range p.events {
		if e.Ev == ev {
			out = append(out, e)
		}
	}
	return out
}

// signal sends sig to the worker process.
func (p *workerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}
