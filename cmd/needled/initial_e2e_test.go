package main

import (
	"bytes"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// TestMeshInitialPeersE2E starts a mesh the way docs/operations.md
// (Starting a mesh together) does: needled --init in each data dir prints
// the peer's id and listen address; then three daemons start, in any
// order, with the same NEEDLE_INITIAL_PEERS naming all three and no
// --join. Each is a voter of every partition and a group submitted
// through one is read through another. A second --init on a data dir in
// use by nobody prints the same id.
func TestMeshInitialPeersE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	bin := buildNeedled(t)
	const n = 3
	// The initial peers' mesh addresses are known before any starts:
	// ports found free, which may be taken before their peers bind them.
	_, https := startRetrying(t, func() []*daemon {
		var dirs, listens, initial []string
		for range n {
			dir := t.TempDir()
			_, port, _ := net.SplitHostPort(freeAddr(t))
			listen := "/ip4/127.0.0.1/tcp/" + port
			args := []string{"--init", "--data", dir, "--partitions", "32", "--listen", listen}
			out := runInit(t, bin, args)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 || lines[1] != listen+"/p2p/"+lines[0] {
				t.Fatalf("needled --init printed %q; want the id and %s/p2p/<id>", out, listen)
			}
			if again := runInit(t, bin, args); again != out {
				t.Fatalf("needled --init again printed %q; want %q", again, out)
			}
			dirs, listens, initial = append(dirs, dir), append(listens, listen), append(initial, lines[1])
		}
		env := "NEEDLE_INITIAL_PEERS=" + strings.Join(initial, ",")
		ds := make([]*daemon, n)
		for _, i := range []int{2, 0, 1} {
			ds[i] = spawnDaemon(t, bin, []string{env}, "--data", dirs[i], "--http", anyPort, "--listen", listens[i],
				"--partitions", "32", "--slots", "2", "--drain-timeout", "-1s")
		}
		return ds
	})
	clients := make([]*api.Client, n)
	for i, a := range https {
		clients[i] = &api.Client{BaseURL: "http://" + a}
		waitUntil(t, "a voter in every partition: "+a, func() bool {
			var ps struct{ Node struct{ Voter int } }
			return getJSON(a, "/v1/peers", &ps) == nil && ps.Node.Voter == 32
		})
	}
	body := `{"mode":"parallel","tasks":[{"handler":"echo","payload":1},{"handler":"echo","payload":2}]}`
	res := submitGroup(t, clients[0], body)
	waitGroup(t, clients[1], res.Group)
}

// runInit runs needled with args (--init) and returns what it printed.
func runInit(t *testing.T, bin string, args []string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("needled %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}
