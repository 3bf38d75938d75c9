package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/p2p"
)

// TestJoinWithOtherPartitionsExits: a peer started with another
// --partitions than the mesh it joins exits with an error naming the flag,
// instead of waiting forever.
func TestJoinWithOtherPartitionsExits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons")
	}
	bin := buildNeedled(t)
	_, a := startMeshDaemon(t, bin, "")
	args := meshArgs(t.TempDir(), selfAddr(t, a))
	for i, arg := range args {
		if arg == "--partitions" {
			args[i+1] = "64"
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the joiner exited 0; want an error")
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("a joiner with other --partitions still runs after 60 s:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "--partitions 32") {
		t.Errorf("stderr does not say which --partitions to use:\n%s", stderr.String())
	}
}

// TestWALLostIdentityKept: a peer of a 3-peer mesh whose WAL is gone but
// whose identity key is left refuses to start, every time (no crash loop
// that half-starts), naming `needle forget` and the steps. After them
// (forget through a live peer, delete the key, start with --join) it
// joins as a new peer, takes replicas again, and the mesh runs groups.
func TestWALLostIdentityKept(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons")
	}
	bin := buildNeedled(t)
	addrs := make([]string, 3)
	_, addrs[0] = startMeshDaemon(t, bin, "")
	join := selfAddr(t, addrs[0])
	_, addrs[1] = startMeshDaemon(t, bin, join)
	dir := t.TempDir()
	lost, a2 := startMeshDaemonDir(t, bin, dir, join)
	addrs[2] = a2
	waitVoters(t, addrs)
	id := peerID(t, addrs[2])
	kill9(lost)
	wipeAllBut(t, dir, p2p.IdentityFile)
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		out, err := exec.CommandContext(ctx, bin, meshArgs(dir, join)...).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("a peer without its WAL started (%v):\n%s", err, out)
		}
		for _, want := range []string{"needle forget " + id, p2p.IdentityFile, "--join"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("the error does not say %q:\n%s", want, out)
			}
		}
	}

	live := &api.Client{BaseURL: "http://" + addrs[0]}
	// The peer is down; force: the others may not hold it dead yet.
	if err := live.ForgetPeer(t.Context(), id, true); err != nil {
		t.Fatalf("needle forget %s: %v", id, err)
	}
	if err := os.Remove(filepath.Join(dir, p2p.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	_, addrs[2] = startMeshDaemonDir(t, bin, dir, join) // on a new port
	if got := peerID(t, addrs[2]); got == id {
		t.Fatalf("the peer came back as %s; want a new identity", got)
	}
	waitVoters(t, addrs)
	ps, err := live.Peers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps.Peers {
		if p.ID == id {
			t.Errorf("the forgotten peer %s is still listed: %+v", id, ps.Peers)
		}
	}
	body := `{"mode":"parallel","tasks":[{"handler":"sleep","payload":{"ms":10,"i":1}},{"handler":"sleep","payload":{"ms":10,"i":2}}]}`
	back := &api.Client{BaseURL: "http://" + addrs[2]}
	waitGroup(t, live, submitGroup(t, back, body).Group)
}

// waitVoters waits until every peer at addrs sees three live peers and is
// a voter of every partition (32 in meshArgs).
func waitVoters(t *testing.T, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		c := &api.Client{BaseURL: "http://" + a}
		waitUntil(t, "three live peers, a voter everywhere: "+a, func() bool {
			var ps struct{ Node struct{ Voter int } }
			got, err := c.Peers(t.Context())
			return err == nil && len(got.Peers) == 3 && allAlive(got.Peers) &&
				getJSON(a, "/v1/peers", &ps) == nil && ps.Node.Voter == 32
		})
	}
}

// wipeAllBut deletes everything in dir but the file keep.
func wipeAllBut(t *testing.T, dir, keep string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}
