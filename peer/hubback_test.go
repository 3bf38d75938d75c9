package peer

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// A task leased to a peer for a worker that polled it once and went on
// elsewhere (its free slot stands for a second after a poll) goes back to
// its owner once no worker there has asked for its handler for a while,
// and a worker polling another peer gets it: it waited for the first
// worker to be declared dead (--worker-ttl).
func TestMeshUnwantedRunGoesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	cfg := func(join []string) Config {
		return meshPeerConfig(t, t.TempDir(), func(c *Config) { c.Join, c.WorkerTTL = join, time.Minute })
	}
	p1 := startMeshPeerConfig(t, cfg(nil))
	p2 := startMeshPeerConfig(t, cfg([]string{p1.p.tr.Addrs()[0]}))
	waitLeading(t, p2)
	// Worker A polls p1 once, finds nothing, and polls no more.
	if tasks := poll(t, p1.c, "a", `"thumb"`, 1, "0s"); len(tasks) != 0 {
		t.Fatalf("A's first poll = %+v; want nothing", tasks)
	}
	res := submitRetrying(t, p1.c, `{"mode":"parallel","key":"unwanted","tasks":[{"handler":"thumb","payload":1}]}`)
	id := res.Group + ".0"
	var tk *api.Task
	waitFor(t, "the task leased for A's free slot", 30*time.Second, func() bool {
		var err error
		tk, err = p1.c.GetTask(t.Context(), id, 0)
		return err == nil && tk.State == "RUNNING"
	})
	if tk.Peer != p1.p.ID() {
		t.Skipf("leased to %s, not for A's slot on p1: nothing to show", tk.Peer)
	}
	// Worker B polls p2, for less than A's --worker-ttl.
	tasks := poll(t, p2.c, "b", `"thumb"`, 1, "30s")
	if len(tasks) != 1 || tasks[0].ID != id {
		t.Fatalf("B's poll on p2 = %+v; want %s, handed back by p1", tasks, id)
	}
	_, hist := wcall(t, p1.c, "GET", "/v1/tasks/"+id+"/events", "")
	var evs []struct {
		Type  string `json:"type"`
		Error string `json:"error"`
	}
	var body struct {
		Events json.RawMessage `json:"events"`
	}
	if json.Unmarshal(hist, &body) == nil {
		_ = json.Unmarshal(body.Events, &evs)
	}
	found := false
	for _, e := range evs {
		found = found || e.Type == "expired" && e.Error == fmt.Sprintf("no worker on peer %s asks for handler %q", p1.p.ID(), "thumb")
	}
	if !found {
		t.Errorf("history %s; want the hand-back with its reason", hist)
	}
	// B reports: else p2's stop waits out its 30 s drain for B's run.
	complete(t, p2.c, tasks[0].Lease)
}
