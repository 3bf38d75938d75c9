package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// startLabeledDaemon starts a mesh peer with extra flags and environment.
// It returns the process and the API's address.
func startLabeledDaemon(t *testing.T, bin, join string, env []string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	return runDaemon(t, bin, env, append(meshArgs(t.TempDir(), join), extra...)...)
}

// TestPlacementProcesses runs three labeled daemons: tasks that require a
// label run on the peer carrying it, a pinned task on its peer, a
// broadcast once on every live peer (or every matching one), a task no
// live peer can run says why, bad selectors are 400s naming the field,
// and a task pinned to a peer killed and then forgotten fails, never run.
func TestPlacementProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	bin := buildNeedled(t)
	addrs := make([]string, 3)
	_, addrs[0] = startLabeledDaemon(t, bin, "", nil, "--label", "zone=a")
	join := selfAddr(t, addrs[0])
	_, addrs[1] = startLabeledDaemon(t, bin, join, []string{"NEEDLE_LABELS=zone=b,gpu=true"})
	third, a2 := startLabeledDaemon(t, bin, join, nil, "--label", "zone=a", "--label", "disk=ssd")
	addrs[2] = a2
	ids := make([]string, 3)
	for i, a := range addrs {
		ids[i] = peerID(t, a)
	}
	wantLabels := map[string][]string{ids[0]: {"zone=a"}, ids[1]: {"gpu=true", "zone=b"}, ids[2]: {"disk=ssd", "zone=a"}}
	for _, a := range addrs {
		waitUntil(t, "labels of every peer seen from "+a, func() bool {
			var ps api.Peers
			if getJSON(a, "/v1/peers", &ps) != nil || len(ps.Peers) != 3 {
				return false
			}
			for _, p := range ps.Peers {
				if p.State != "alive" || !slices.Equal(p.Labels, wantLabels[p.ID]) {
					return false
				}
			}
			return true
		})
	}
	ctx := t.Context()
	c := &api.Client{BaseURL: "http://" + addrs[0]}

	t.Run("require", func(t *testing.T) {
		body := `{"mode":"parallel","tasks":[`
		for i := range 12 {
			body += fmt.Sprintf(`{"handler":"sleep","payload":{"ms":30,"i":%d},"require":["gpu=true"]},`, i)
		}
		body += `{"handler":"sleep","payload":{"ms":30},"require":["zone=a","disk=ssd"]}]}`
		res := submitGroup(t, c, body)
		g := waitGroup(t, c, res.Group)
		for _, tk := range g.Tasks {
			want := ids[1]
			if slices.Contains(tk.Require, "disk=ssd") {
				want = ids[2]
			}
			if tk.Peer != want {
				t.Errorf("%s (require %v) ran on %s; want %s", tk.ID, tk.Require, tk.Peer, want)
			}
		}
	})
	t.Run("pin", func(t *testing.T) {
		c1 := &api.Client{BaseURL: "http://" + addrs[1]}
		res, err := c1.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo", Payload: []byte(`"x"`), Pin: ids[2]}})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := c1.GetTask(ctx, res.ID, 30*time.Second)
		if err != nil || tk.State != "SUCCEEDED" || tk.Peer != ids[2] || tk.Pin != ids[2] {
			t.Fatalf("pinned task = %+v, %v; want SUCCEEDED on %s", tk, err, ids[2])
		}
		// A pin no peer id could be (the daemon's check of a member's id)
		// is refused, where it would wait READY for ever.
		_, err = c1.SubmitGroupJSON(ctx, []byte(`{"mode":"parallel","tasks":[{"handler":"echo","pin":"`+ids[2]+`"},{"handler":"echo","pin":"`+ids[2][:len(ids[2])-3]+`"}]}`))
		var e *api.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Field != "tasks[1].pin" {
			t.Fatalf("a group pinning a task to a truncated peer id = %v; want 400 naming tasks[1].pin", err)
		}
	})
	t.Run("broadcast", func(t *testing.T) {
		for _, tt := range []struct {
			require string
			peers   []string
		}{
			{"", ids},
			{`,"require":["zone=a"]`, []string{ids[0], ids[2]}},
		} {
			res := submitGroup(t, c, `{"mode":"broadcast","tasks":[{"handler":"echo","payload":{"check":"disk"}`+tt.require+`}]}`)
			if got := slices.Sorted(maps.Keys(res.Tasks)); !slices.Equal(got, slices.Sorted(slices.Values(tt.peers))) {
				t.Errorf("broadcast%s named its copies %v; want the peers %v", tt.require, got, tt.peers)
			}
			g := waitGroup(t, c, res.Group)
			if g.Mode != "broadcast" || len(g.Tasks) != len(tt.peers) {
				t.Errorf("broadcast group = %s with %d tasks; want %d", g.Mode, len(g.Tasks), len(tt.peers))
			}
			for _, tk := range g.Tasks {
				if tk.Name != tk.Peer || tk.Pin != tk.Peer || tk.Attempt != 1 {
					t.Errorf("copy %s named %q pinned to %q ran on %q in %d attempts; want once on its peer", tk.ID, tk.Name, tk.Pin, tk.Peer, tk.Attempt)
				}
			}
		}
	})
	t.Run("broadcast key repeat", func(t *testing.T) {
		body := `{"mode":"broadcast","key":"bc-1","tasks":[{"handler":"echo","require":["zone=a"]}]}`
		first := submitGroup(t, c, body)
		again := submitGroup(t, &api.Client{BaseURL: "http://" + addrs[1]}, body)
		if again.Group != first.Group || !maps.Equal(again.Tasks, first.Tasks) {
			t.Errorf("repeat = %+v; want the first answer %+v", again, first)
		}
	})
	t.Run("waiting", func(t *testing.T) {
		res, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "echo", Require: []string{"tpu=v5"}}})
		if err != nil {
			t.Fatal(err)
		}
		var tk *api.Task
		waitUntil(t, "the task to say why it waits", func() bool {
			tk, err = c.GetTask(ctx, res.ID, 0)
			return err == nil && tk.Waiting != ""
		})
		if tk.State != "READY" || tk.Waiting != "no live peer has labels tpu=v5" {
			t.Errorf("task = %s waiting %q", tk.State, tk.Waiting)
		}
		// Lists say it too, through every peer (the owner's view).
		for _, a := range addrs {
			l, err := (&api.Client{BaseURL: "http://" + a}).ListTasks(ctx, url.Values{"state": {"READY"}, "handler": {"echo"}})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(l.Tasks, func(tk api.Task) bool { return tk.ID == res.ID })
			if i < 0 || l.Tasks[i].Waiting != "no live peer has labels tpu=v5" {
				t.Errorf("READY tasks listed through %s = %+v; want %s waiting", a, l.Tasks, res.ID)
			}
		}
		if _, err := c.CancelTask(ctx, res.ID); err != nil {
			t.Error(err)
		}
		// A handler no live worker serves: its READY tasks say so, and
		// so do the mesh's counts, through any peer.
		lone, err := c.SubmitTask(ctx, &api.SubmitTaskRequest{TaskFields: api.TaskFields{Handler: "e2e-nobody"}})
		if err != nil {
			t.Fatal(err)
		}
		const why = `no live worker serves handler "e2e-nobody"`
		for _, a := range addrs {
			waitUntil(t, "the counts to say why e2e-nobody waits through "+a, func() bool {
				st, err := (&api.Client{BaseURL: "http://" + a}).Stats(ctx)
				if err != nil {
					return false
				}
				i := slices.IndexFunc(st.Handlers, func(h api.HandlerCounts) bool { return h.Handler == "e2e-nobody" })
				return i >= 0 && st.Handlers[i].Waiting == why && st.Handlers[i].Counts["READY"] == 1
			})
		}
		if tk, err := c.GetTask(ctx, lone.ID, 0); err != nil || tk.Waiting != why {
			t.Errorf("task = %+v, %v; want waiting %q", tk, err, why)
		}
		if _, err := c.CancelTask(ctx, lone.ID); err != nil {
			t.Error(err)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, tt := range []struct{ body, field string }{
			{`{"mode":"parallel","tasks":[{"handler":"echo"},{"handler":"echo","require":["gpu"]}]}`, "tasks[1].require[0]"},
			{`{"mode":"broadcast","tasks":[{"handler":"echo","require":["zone=c"]}]}`, "tasks[0].require"},
		} {
			_, err := c.SubmitGroupJSON(ctx, []byte(tt.body))
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != tt.field {
				t.Errorf("POST %s = %v; want 400 naming %s", tt.body, err, tt.field)
			}
		}
	})
	// Last: it takes the third peer down for good.
	t.Run("pinned to a forgotten peer", func(t *testing.T) {
		_ = third.Process.Kill()
		_ = third.Wait()
		waitUntil(t, "the third peer seen dead", func() bool {
			var ps api.Peers
			if getJSON(addrs[0], "/v1/peers", &ps) != nil {
				return false
			}
			for _, p := range ps.Peers {
				if p.ID == ids[2] {
					return p.State == "dead"
				}
			}
			return false
		})
		var res *api.SubmitTaskResponse
		waitUntil(t, "a task pinned to the dead peer accepted", func() bool {
			var err error
			res, err = c.SubmitTask(ctx, &api.SubmitTaskRequest{Key: "pinned-to-dead",
				TaskFields: api.TaskFields{Handler: "echo", Payload: []byte(`1`), Pin: ids[2]}})
			return err == nil
		})
		var tk *api.Task
		waitUntil(t, "the task to wait for its peer", func() bool {
			var err error
			tk, err = c.GetTask(ctx, res.ID, 0)
			return err == nil && tk.Waiting != ""
		})
		if tk.State != "READY" || !strings.Contains(tk.Waiting, "not alive") {
			t.Fatalf("pinned to a dead peer: %s waiting %q; want READY, waiting for it", tk.State, tk.Waiting)
		}
		resp, err := http.Post("http://"+addrs[0]+"/v1/peers/"+ids[2]+"/forget?force=true", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("forget: %s", resp.Status)
		}
		waitUntil(t, "the task pinned to the forgotten peer to fail", func() bool {
			tk, err = c.GetTask(ctx, res.ID, 2*time.Second)
			return err == nil && tk.State != "READY"
		})
		if tk.State != "FAILED" || tk.Error == nil || !strings.Contains(*tk.Error, "left the mesh") || tk.Attempt != 0 {
			t.Fatalf("pinned to a forgotten peer: %s attempt %d error %v; want FAILED, never run, saying it left", tk.State, tk.Attempt, tk.Error)
		}
	})
}

func TestBadLabelExits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	bin := buildNeedled(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--data", t.TempDir(), "--http", anyPort, "--label", "gpu")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), `"gpu" is not key=value`) {
		t.Errorf("needled --label gpu: %v, stderr %q; want exit 2 naming the label", err, stderr.String())
	}
}

func submitGroup(t *testing.T, c *api.Client, body string) *api.SubmitGroupResponse {
	t.Helper()
	res, err := retryUnavailable(func() (*api.SubmitGroupResponse, error) { return c.SubmitGroupJSON(t.Context(), []byte(body)) })
	if err != nil {
		t.Fatalf("submit %s: %v", body, err)
	}
	return res
}

func waitGroup(t *testing.T, c *api.Client, id string) *api.Group {
	t.Helper()
	g, err := retryUnavailable(func() (*api.Group, error) { return c.GetGroup(t.Context(), id, 60*time.Second) })
	if err != nil || g.State != "SUCCEEDED" {
		t.Fatalf("group %s = %+v, %v; want SUCCEEDED", id, g, err)
	}
	return g
}

// retryUnavailable calls f again while it answers 503, for up to 30 s, as
// a client does: a partition between two leaders (a leadership handed to a
// joiner, a replica slow on a loaded machine) answers 503 for a moment.
func retryUnavailable[T any](f func() (T, error)) (T, error) {
	deadline := time.Now().Add(30 * time.Second)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		v, err := f()
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(wait) // backoff between retries, not a synchronisation
	}
}
