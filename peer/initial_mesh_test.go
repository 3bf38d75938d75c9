package peer

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
)

// freeLoopbackPort returns a TCP port free on 127.0.0.1 a moment ago: the
// initial peers' addresses must be known before any of them starts. It is
// below the kernel's ephemeral range (32768-60999 on Linux): a port from
// net.Listen(":0"), released until its peer starts, is an ephemeral one,
// which a connection of the peers started before it (or of another test
// process) may take first, and the peer's listen then fails, "address
// already in use" (cmd/needled's freeAddr met it).
func freeLoopbackPort(t *testing.T) int {
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
		ln.Close()
		portUsed[port] = true
		return port
	}
	t.Fatal("no free loopback port in 20000-31999")
	return 0
}

var (
	portMu   sync.Mutex
	portUsed = map[int]bool{}
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
	var dirs, listen, initial []string
	for range n {
		dir := t.TempDir()
		addr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", freeLoopbackPort(t))
		id, _, err := Init(meshPeerConfig(t, dir, func(c *Config) { c.Listen = []string{addr} }))
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		dirs, listen, initial = append(dirs, dir), append(listen, addr), append(initial, addr+"/p2p/"+id)
	}
	var peers []*meshPeer
	for i := range n {
		mp := startMeshPeerConfig(t, meshPeerConfig(t, dirs[i], func(c *Config) {
			c.Listen, c.Initial = []string{listen[i]}, initial
		}))
		// Its replicas are its own from the start, voters all (R = 3 of
		// 3 peers: every partition), not handed over by a founder later.
		var st node.Stats
		_ = mp.p.read(t.Context(), func(nd *node.Node) error { st = nd.Stats(); return nil })
		if st.Held != 32 || st.Voter != 32 {
			t.Fatalf("peer %d at start: holds %d partitions, a voter of %d; want 32 and 32", i, st.Held, st.Voter)
		}
		peers = append(peers, mp)
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
