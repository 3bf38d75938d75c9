package peer

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// The log of a task whose runner is dead is answered at once, saying so:
// a read asked the dead runner over the mesh and waited (minutes, behind
// the messages queued to it) before it said the runner did not answer.
func TestMeshLogsOfADeadRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	p1, p3 := peers[0], peers[2]
	res := submitRetrying(t, p1.c, fmt.Sprintf(`{"mode":"parallel","key":"logs-dead","tasks":[{"handler":"echo","payload":1,"pin":%q}]}`, p3.p.ID()))
	id := res.Group + ".0"
	waitFor(t, "the pinned task to succeed", 20*time.Second, func() bool {
		tk, err := p1.c.GetTask(t.Context(), id, time.Second)
		return err == nil && tk.State == "SUCCEEDED"
	})
	p3.stop()
	waitFor(t, "p1 to hold p3 dead", 20*time.Second, func() bool {
		var st node.PeerState
		_ = p1.p.read(t.Context(), func(n *node.Node) error { st, _ = n.PeerState(p3.p.ID()); return nil })
		return st == node.PeerDead
	})
	resp, err := http.Get("http://" + p1.p.Addr() + "/v1/tasks/" + id + "/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var logs api.TaskLogs
	if resp.StatusCode != 200 || json.Unmarshal(body, &logs) != nil || !strings.Contains(logs.Unavailable, "is dead") || logs.Peer != p3.p.ID() {
		t.Fatalf("logs = %d %s; want 200 saying the runner %s is dead", resp.StatusCode, body, p3.p.ID())
	}
}
