package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/p2p"
)

// TestMeshJoinByName runs three daemons configured the way deploy/ does,
// through NEEDLE_* variables only: a private mesh (swarm key, API token,
// both read from files as compose and Kubernetes mount their secrets),
// every peer given the same NEEDLE_JOIN naming the first by DNS name
// without its peer id, and NEEDLE_SELF_NAME telling the first that the name
// is its own (a StatefulSet pod's name). The joiners start first, as they
// may in compose or Kubernetes. A group submitted through one peer is read
// through another, the first is stopped with SIGTERM (a drain), and the
// group is read again through the two left.
func TestMeshJoinByName(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	bin := buildNeedled(t)
	var key bytes.Buffer
	if err := p2p.GenerateSwarmKey(&key); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(keyFile, key.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "test-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	// Every peer's --join names the seed's mesh port, known before it
	// starts: a port found free that may be taken before the seed binds it.
	ds, addrs := startRetrying(t, func() []*daemon {
		_, seedPort, _ := net.SplitHostPort(freeAddr(t))
		ds := make([]*daemon, 3)
		for _, i := range []int{1, 2, 0} {
			listen := "/ip4/127.0.0.1/tcp/0"
			self := "needle-" + string(rune('0'+i))
			if i == 0 {
				listen, self = "/ip4/127.0.0.1/tcp/"+seedPort, "localhost"
			}
			ds[i] = spawnDaemon(t, bin, []string{
				"NEEDLE_DATA=" + t.TempDir(), "NEEDLE_HTTP=" + anyPort, "NEEDLE_LISTEN=" + listen,
				"NEEDLE_JOIN=/dns4/localhost/tcp/" + seedPort, "NEEDLE_SELF_NAME=" + self,
				"NEEDLE_SWARM_KEY=" + keyFile, "NEEDLE_API_TOKEN_FILE=" + tokenFile,
				"NEEDLE_PARTITIONS=32", "NEEDLE_SLOTS=2", "NEEDLE_DRAIN_TIMEOUT=8s",
			})
		}
		return ds
	})
	cmds := make([]*exec.Cmd, 3)
	for i, d := range ds {
		cmds[i] = d.cmd
	}
	clients := make([]*api.Client, 3)
	for i, a := range addrs {
		clients[i] = &api.Client{BaseURL: "http://" + a, Token: token}
		waitUntil(t, "three live peers seen from "+a, func() bool {
			ps, err := clients[i].Peers(t.Context())
			return err == nil && len(ps.Peers) == 3 && allAlive(ps.Peers)
		})
	}
	// Replicas move to the joiners after they join: stopping the seed
	// before they vote everywhere would take partitions down with it.
	for _, a := range addrs {
		waitUntil(t, "a voter in every partition: "+a, func() bool {
			var ps struct{ Node struct{ Voter int } }
			return getJSONToken(a, "/v1/peers", token, &ps) == nil && ps.Node.Voter == 32
		})
	}
	resp, err := http.Get("http://" + addrs[0] + "/v1/peers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/peers without the token = %d; want 401", resp.StatusCode)
	}

	body := `{"mode":"parallel","tasks":[` +
		`{"handler":"sleep","payload":{"ms":20,"i":1}},{"handler":"sleep","payload":{"ms":20,"i":2}},` +
		`{"handler":"sleep","payload":{"ms":20,"i":3}},{"handler":"sleep","payload":{"ms":20,"i":4}}]}`
	res := submitGroup(t, clients[1], body)
	waitGroup(t, clients[2], res.Group)

	if err := cmds[0].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmds[0].Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("the seed drained and exited with %v; want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the seed did not exit within 30 s of SIGTERM (drain timeout 8 s)")
	}
	for _, i := range []int{1, 2} {
		if g := waitGroup(t, clients[i], res.Group); len(g.Tasks) != 4 {
			t.Errorf("group read through peer %d after the seed left has %d tasks; want 4", i, len(g.Tasks))
		}
	}
	after := submitGroup(t, clients[2], body)
	waitGroup(t, clients[1], after.Group)
}

func getJSONToken(addr, path, token string, v any) error {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func allAlive(peers []api.Peer) bool {
	for _, p := range peers {
		if p.State != "alive" {
			return false
		}
	}
	return true
}
