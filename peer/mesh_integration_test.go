package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// meshPeer is a real peer (Badger in a temp dir, libp2p on loopback, HTTP)
// run inside the test process.
type meshPeer struct {
	p      *Peer
	c      *api.Client
	cancel context.CancelFunc
	done   chan error
}

func startMeshPeer(t *testing.T, dir string, join []string) *meshPeer {
	t.Helper()
	return startMeshPeerConfig(t, meshPeerConfig(t, dir, func(c *Config) { c.Join = join }))
}

// meshPeerConfig is the Config of a startMeshPeer peer in dir (32
// partitions, loopback), changed by edit.
func meshPeerConfig(t *testing.T, dir string, edit func(*Config)) Config {
	c := Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", Slots: 2, Partitions: 32,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	edit(&c)
	return c
}

// startMeshPeerConfig starts a real peer of cfg and stops it at the end of
// the test.
func startMeshPeerConfig(t *testing.T, cfg Config) *meshPeer {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return runMeshPeer(t, p)
}

// runMeshPeer runs p (made by New) until the test ends.
func runMeshPeer(t *testing.T, p *Peer) *meshPeer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mp := &meshPeer{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { mp.done <- p.Run(ctx) }()
	<-p.Ready()
	mp.c = &api.Client{BaseURL: "http://" + p.Addr()}
	track(mp)
	t.Cleanup(mp.stop)
	return mp
}

func (mp *meshPeer) stop() {
	if mp.cancel == nil {
		return
	}
	untrack(mp)
	mp.cancel()
	<-mp.done
	mp.cancel = nil
}

// waitFor polls cond until it holds or the deadline passes: the mesh forms
// over real heartbeats, so there is no single event to wait on.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; the running peers see:\n%s", d, what, meshState())
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not standing in for one
	}
}

// submitRetrying submits body through c as a client would: a 503 (a
// partition between owners, as while a young mesh moves leadership to the
// ring's owners) is retried; anything else but success fails the test.
// Bodies carry an idempotency key, so a retried submission is one group.
func submitRetrying(t *testing.T, c *api.Client, body string) *api.SubmitGroupResponse {
	t.Helper()
	var res *api.SubmitGroupResponse
	var last error
	defer func() {
		if t.Failed() && last != nil {
			t.Logf("the last refusal: %v", last)
		}
	}()
	waitFor(t, "a submission to be accepted", 20*time.Second, func() bool {
		var err error
		res, err = c.SubmitGroupJSON(t.Context(), []byte(body))
		if ae := (*api.Error)(nil); errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
			last = err
			return false
		}
		if err != nil {
			t.Fatalf("submit %s: %v", body, err)
		}
		return true
	})
	return res
}

// submitTaskRetrying is submitRetrying for POST /v1/tasks: a 503 is
// retried, anything else but 201 fails the test; it returns the task's
// id. Bodies carry an idempotency key, so a retried submission is one
// task.
func submitTaskRetrying(t *testing.T, c *api.Client, body string) string {
	t.Helper()
	var id string
	var last []byte
	defer func() {
		if t.Failed() && last != nil {
			t.Logf("the last refusal: %s", last)
		}
	}()
	waitFor(t, "a submission to be accepted", 30*time.Second, func() bool {
		status, data := wcall(t, c, "POST", "/v1/tasks", body)
		switch status {
		case http.StatusServiceUnavailable:
			last = data
			return false
		case http.StatusCreated:
			var r api.SubmitTaskResponse
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			id = r.ID
			return true
		}
		t.Fatalf("submit %s = %d %s", body, status, data)
		return false
	})
	return id
}

// getGroupRetrying reads group id through c, waiting for it to finish up
// to wait, as a client would: a 503 (the group's partition between owners,
// as while a young mesh moves leadership to the ring's owners) is read
// again, for 20 s at most; the last answer is returned.
func getGroupRetrying(t *testing.T, c *api.Client, id string, wait time.Duration) (g *api.Group, err error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		g, err = c.GetGroup(t.Context(), id, wait)
		ae := (*api.Error)(nil)
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return g, err
		}
		t.Logf("group %s: %v; reading again", id, err)
		time.Sleep(50 * time.Millisecond) // a client's pause before it asks again
	}
}

// TestMeshRealPeers runs three real peers on loopback: they form a mesh,
// replicate every partition three ways, spread leadership, and serve a
// submission through any peer; when a peer stops, the others take over its
// partitions and finish the work.
func TestMeshRealPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	p1, p2, p3 := peers[0], peers[1], peers[2]
	ctx := t.Context()
	var groups []string
	for i := range 6 {
		body := fmt.Sprintf(`{"mode":"parallel","key":"mesh-%d","tasks":[{"handler":"echo","payload":%d},{"handler":"sleep","payload":{"ms":50}}]}`, i, i)
		groups = append(groups, submitRetrying(t, peers[i%3].c, body).Group)
	}
	for _, g := range groups {
		gv, err := getGroupRetrying(t, p2.c, g, 30*time.Second)
		if err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("group %s through p2 = %+v, %v", g, gv, err)
		}
	}
	p3.stop()
	for i := range 6 {
		body := fmt.Sprintf(`{"mode":"parallel","tasks":[{"handler":"echo","payload":%d}]}`, i)
		var res *api.SubmitGroupResponse
		waitFor(t, "a submission after p3 stopped", 30*time.Second, func() bool {
			var err error
			res, err = p1.c.SubmitGroupJSON(ctx, []byte(body))
			return err == nil
		})
		g, err := getGroupRetrying(t, p1.c, res.Group, 30*time.Second)
		if err != nil || g.State != "SUCCEEDED" {
			t.Fatalf("group %s after p3 stopped = %+v, %v", res.Group, g, err)
		}
	}
	var tk *api.Task
	tk, err := p1.c.GetTask(ctx, groups[0]+".0", 0)
	if err != nil || string(tk.Result) != "0" {
		t.Fatalf("old result after failover = %+v, %v", tk, err)
	}
}

// startMesh3 starts three real peers (32 partitions) and waits until every
// partition has three voters and every peer leads some.
func startMesh3(t *testing.T) []*meshPeer {
	t.Helper()
	return startMesh3With(t, func(*Config) {})
}

// startMesh3With is startMesh3 with each peer's Config changed by edit.
func startMesh3With(t *testing.T, edit func(*Config)) []*meshPeer {
	t.Helper()
	start := func(join []string) *meshPeer {
		return startMeshPeerConfig(t, meshPeerConfig(t, t.TempDir(), func(c *Config) { c.Join = join; edit(c) }))
	}
	p1 := start(nil)
	join := []string{p1.p.tr.Addrs()[0]}
	peers := []*meshPeer{p1, start(join), start(join)}
	waitFor(t, "3 replicas of every partition, leadership on every peer", 30*time.Second, func() bool {
		for _, mp := range peers {
			var st node.Stats
			_ = mp.p.read(t.Context(), func(n *node.Node) error { st = n.Stats(); return nil })
			if st.Voter != 32 || st.Leading == 0 {
				return false
			}
		}
		return true
	})
	return peers
}
