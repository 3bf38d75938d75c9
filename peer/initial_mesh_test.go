package peer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/internal/loopport"
	"github.com/needle-mesh/needle/node"
)

// TestMeshInitialPeersBootstrap starts three real peers together, each
// with Initial naming all three (their identities made first with Init,
// as needled --init does): the mesh forms with every partition on three
// voters and leadership on every peer, with no founder and no join, and a
// submission through any peer completes.
func TestMeshInitialPeersBootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	const n = 3
	// The initial peers' addresses are known before any starts: ports
	// found free, which another process may take before a peer binds its
	// own; then all start again on new ports.
	var peers []*meshPeer
	for try := 1; peers == nil; try++ {
		var err error
		if peers, err = startInitialPeers(t, n); err != nil {
			if !strings.Contains(err.Error(), "address already in use") || try == 5 {
				t.Fatalf("start %d: %v", try, err)
			}
			t.Logf("start %d: %v: again on other ports", try, err)
		}
	}
	waitFor(t, "3 voters of every partition, leadership on every peer", 30*time.Second, func() bool {
		for _, mp := range peers {
			var st node.Stats
			_ = mp.p.read(t.Context(), func(nd *node.Node) error { st = nd.Stats(); return nil })
			if st.Held != 32 || st.Voter != 32 || st.Leading == 0 {
				return false
			}
		}
		return true
	})
	for i, mp := range peers {
		body := fmt.Sprintf(`{"mode":"parallel","key":"initial-%d","tasks":[{"handler":"echo","payload":%d}]}`, i, i)
		res := submitRetrying(t, mp.c, body)
		// Read through the next peer, which may answer 503 while it
		// catches up (a loaded machine): asked again until it answers.
		reader := peers[(i+1)%n].c
		waitFor(t, fmt.Sprintf("group %s submitted through peer %d SUCCEEDED", res.Group, i), 30*time.Second, func() bool {
			g, err := reader.GetGroup(t.Context(), res.Group, time.Second)
			return err == nil && g.State == "SUCCEEDED"
		})
	}
}

// startInitialPeers starts n peers whose Initial names all n, each
// listening on a port found free: an error (of New) when one could not
// start, the peers started before it stopped.
func startInitialPeers(t *testing.T, n int) ([]*meshPeer, error) {
	t.Helper()
	var dirs, listen, initial []string
	for range n {
		dir := t.TempDir()
		port, err := loopport.Free()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
		id, _, err := Init(meshPeerConfig(t, dir, func(c *Config) { c.Listen = []string{addr} }))
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		dirs, listen, initial = append(dirs, dir), append(listen, addr), append(initial, addr+"/p2p/"+id)
	}
	var peers []*meshPeer
	for i := range n {
		p, err := New(meshPeerConfig(t, dirs[i], func(c *Config) {
			c.Listen, c.Initial = []string{listen[i]}, initial
		}))
		if err != nil {
			for _, mp := range peers {
				mp.stop()
			}
			return nil, err
		}
		mp := runMeshPeer(t, p)
		// Its replicas are its own from the start, voters all (R = 3 of
		// 3 peers: every partition), not handed over by a founder later.
		var st node.Stats
		_ = mp.p.read(t.Context(), func(nd *node.Node) error { st = nd.Stats(); return nil })
		if st.Held != 32 || st.Voter != 32 {
			t.Fatalf("peer %d at start: holds %d partitions, a voter of %d; want 32 and 32", i, st.Held, st.Voter)
		}
		peers = append(peers, mp)
	}
	return peers, nil
}
