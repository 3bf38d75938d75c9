package peer

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// A worker behind a load balancer holds leases of two peers and dies (its
// next process polls as another instance): the peer where it held one
// lease asks the other, which says the worker held one there too, so the
// death counts beside other tasks, not as a strike. A worker that held
// one lease in the whole mesh still strikes its task.
func TestWorkerDeathAcrossPeersIsNoStrike(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	a, b := peers[0].c, peers[1].c
	pollAs := func(c *api.Client, worker, instance string) []api.WorkerTask {
		t.Helper()
		status, data := wcall(t, c, "POST", "/v1/workers/poll",
			`{"worker": "`+worker+`", "instance": "`+instance+`", "handlers": ["lone"], "max": 1, "wait": "10s"}`)
		var res api.PollResult
		if err := json.Unmarshal(data, &res); status != http.StatusOK || err != nil {
			t.Fatalf("poll = %d %s", status, data)
		}
		return res.Tasks
	}
	submitted := 0
	leaseAs := func(c *api.Client, worker, instance string) string {
		t.Helper()
		submitted++ // a key each: a submission retried after a 503 is one task
		id := submitTaskRetrying(t, a, `{"handler": "lone", "payload": 1, "key": "lone-`+itoa(submitted)+`"}`)
		for {
			if tasks := pollAs(c, worker, instance); len(tasks) == 1 {
				if tasks[0].ID != id {
					t.Fatalf("polled %s; want %s", tasks[0].ID, id)
				}
				return id
			}
		}
	}
	deaths := func(id string) string {
		t.Helper()
		var got string
		waitFor(t, "the death in "+id, 30*time.Second, func() bool {
			tk, err := a.GetTask(t.Context(), id, 0)
			if err != nil || tk.WorkerDeaths == nil {
				return false
			}
			b, _ := json.Marshal(tk.WorkerDeaths)
			got = string(b)
			return true
		})
		return got
	}

	onA := leaseAs(a, "roamer", "i1")
	leaseAs(b, "roamer", "i1") // held at b: the same process
	pollAs(a, "roamer", "i2")  // it restarted: a buries i1's lease
	if got := deaths(onA); got != `{"shared":1,"alone":0}` {
		t.Errorf("deaths of %s = %s; want one beside other tasks (the worker held b's lease too)", onA, got)
	}

	alone := leaseAs(a, "homebody", "i1")
	pollAs(a, "homebody", "i2")
	if got := deaths(alone); got != `{"shared":0,"alone":1}` {
		t.Errorf("deaths of %s = %s; want a strike (the worker held nothing else anywhere)", alone, got)
	}
}
