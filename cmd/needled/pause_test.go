package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// TestPausedHolderOutcomeIsFenced stops (SIGSTOP) a peer that holds running
// leases, past the point where the others declare it dead and run its tasks
// again, then resumes it: its late outcomes are refused by fencing, and every
// task completes exactly once from the owners' point of view.
func TestPausedHolderOutcomeIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	bin := buildNeedled(t)
	cmds, addrs := make([]*exec.Cmd, 3), make([]string, 3)
	cmds[0], addrs[0] = startMeshDaemon(t, bin, "")
	join := selfAddr(t, addrs[0])
	for i := 1; i < 3; i++ {
		cmds[i], addrs[i] = startMeshDaemon(t, bin, join)
	}
	c := &api.Client{BaseURL: "http://" + addrs[0]}
	ctx := t.Context()
	body := `{"mode":"parallel","tasks":[`
	for i := range 18 {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"handler":"sleep","payload":{"ms":1500,"i":%d}}`, i)
	}
	var res *api.SubmitGroupResponse
	waitUntil(t, "a submission", func() bool {
		var err error
		res, err = c.SubmitGroupJSON(ctx, []byte(body+"]}"))
		return err == nil
	})
	// Find a peer holding a running lease and stop it.
	var victim int = -1
	waitUntil(t, "a running lease", func() bool {
		g, err := c.GetGroup(ctx, res.Group, 0)
		if err != nil {
			return false
		}
		for _, tk := range g.Tasks {
			if tk.State == "RUNNING" {
				for i, a := range addrs {
					if i > 0 && peerID(t, a) == tk.Peer { // not the peer we query through
						victim = i
						return true
					}
				}
			}
		}
		return false
	})
	_ = cmds[victim].Process.Signal(syscall.SIGSTOP)
	time.Sleep(10 * time.Second) // the fault under test is time itself: past DeadAfter, an election and the tasks' run time
	_ = cmds[victim].Process.Signal(syscall.SIGCONT)
	// The resumed peer rejoins and partitions may move back to it: a read
	// in that window can get 503 (retry), as a client would.
	var g *api.Group
	var err error
	waitUntil(t, "the group after the pause", func() bool {
		g, err = c.GetGroup(ctx, res.Group, 10*time.Second)
		return err == nil && g.State != "RUNNING"
	})
	if g.State != "SUCCEEDED" {
		t.Fatalf("group after the pause = %+v", g)
	}
	for _, tk := range g.Tasks {
		evs, err := c.Events(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		accepted := 0
		for _, e := range evs {
			if e.Type == "succeeded" {
				accepted++
			}
		}
		if accepted != 1 {
			t.Errorf("%s has %d accepted outcomes; want 1", tk.ID, accepted)
		}
	}
	// The property is above: one accepted outcome per task. How the late
	// outcomes were refused depends on timing (fenced at the new owner and
	// counted there, or lost with the entries of a deposed owner that never
	// committed), so the counter is reported, not required.
	stale := 0
	for _, a := range addrs {
		var ps struct {
			Stats struct{ StaleOutcomes int } `json:"stats"`
		}
		if getJSON(a, "/v1/peers", &ps) == nil {
			stale += ps.Stats.StaleOutcomes
		}
	}
	t.Logf("stale outcomes refused across the mesh: %d", stale)
}

// startMeshDaemon starts a mesh peer (see meshArgs) joining join ("" for
// none): see runDaemon.
func startMeshDaemon(t *testing.T, bin, join string) (*exec.Cmd, string) {
	t.Helper()
	return runDaemon(t, bin, nil, meshArgs(t.TempDir(), join)...)
}

func getJSON(addr, path string, v any) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func peerID(t *testing.T, addr string) string {
	var ps struct{ Self string }
	if err := getJSON(addr, "/v1/peers", &ps); err != nil {
		t.Fatal(err)
	}
	return ps.Self
}

func selfAddr(t *testing.T, addr string) string {
	var ps struct {
		Self  string
		Peers []struct {
			ID    string
			Addrs []string
		}
	}
	if err := getJSON(addr, "/v1/peers", &ps); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.Peers {
		if p.ID == ps.Self && len(p.Addrs) > 0 {
			return p.Addrs[0]
		}
	}
	t.Fatal("no address for the first peer")
	return ""
}
