package peer

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// A worker behind a load balancer: it polls one peer and its reports,
// heartbeats and log lines reach others, which forward each to the peer
// that holds the lease (the token's tag names it). The holder answers as
// if called itself: a complete, a repeat of it, a heartbeat, log lines, a
// permanent fail, a release; a batch mixing two holders' leases and a
// token the holder does not know is answered entry by entry.
func TestWorkerReportsThroughAnyPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	via, holder, other := peers[0].c, peers[1].c, peers[2].c
	submitted := 0
	leaseAt := func(c *api.Client, worker string) (string, string) {
		t.Helper()
		submitted++ // a key each: a submission retried after a 503 is one task
		id := submitTaskRetrying(t, via, `{"handler": "lb", "payload": 1, "key": "lb-`+itoa(submitted)+`"}`)
		for {
			tasks := poll(t, c, worker, `"lb"`, 1, "10s")
			if len(tasks) == 1 && tasks[0].ID == id {
				if !strings.HasSuffix(tasks[0].Lease, leaseTag(peerOf(peers, c).ID())) {
					t.Fatalf("lease %s does not end with its holder's tag", tasks[0].Lease)
				}
				return id, tasks[0].Lease
			}
			if len(tasks) != 0 {
				t.Fatalf("poll = %+v; want %s", tasks, id)
			}
		}
	}
	expect := func(c *api.Client, path, body string, want int, has string) {
		t.Helper()
		status, data := wcall(t, c, "POST", path, body)
		if status != want || !strings.Contains(string(data), has) {
			t.Fatalf("POST %s = %d %s; want %d with %q", path, status, data, want, has)
		}
	}

	id, lease := leaseAt(holder, "w1")
	expect(other, "/v1/leases/"+lease+"/heartbeat", "", http.StatusOK, `"canceled":false`)
	expect(via, "/v1/leases/"+lease+"/logs", `{"lines": ["resizing"]}`, http.StatusOK, `"ok":true`)
	expect(other, "/v1/leases/"+lease+"/complete", `{"result": {"w": 640}}`, http.StatusOK, `"ok":true`)
	expect(via, "/v1/leases/"+lease+"/complete", `{"result": {"w": 640}}`, http.StatusOK, `"ok":true`) // a repeat
	expect(via, "/v1/leases/"+lease+"/fail", `{"error": "late"}`, http.StatusConflict, `lease_lost`)
	tk, err := via.GetTask(t.Context(), id, 30*time.Second)
	if err != nil || tk.State != "SUCCEEDED" || string(tk.Result) != `{"w":640}` {
		t.Fatalf("task %s = %s %s, %v; want SUCCEEDED with the worker's result", id, tk.State, tk.Result, err)
	}

	id, lease = leaseAt(holder, "w1")
	expect(other, "/v1/leases/"+lease+"/fail", `{"error": "corrupt", "permanent": true}`, http.StatusOK, `"ok":true`)
	if tk, err := via.GetTask(t.Context(), id, 30*time.Second); err != nil || tk.State != "FAILED" || tk.Error == nil || *tk.Error != "corrupt" {
		t.Fatalf("task %s = %+v, %v; want FAILED corrupt", id, tk, err)
	}

	id, lease = leaseAt(holder, "w1")
	expect(via, "/v1/leases/"+lease+"/release", `{"reason": "moving"}`, http.StatusOK, `"ok":true`)
	waitFor(t, "the release in the task's history", 30*time.Second, func() bool {
		_, evs := wcall(t, via, "GET", "/v1/tasks/"+id+"/events", "")
		return strings.Contains(string(evs), "released by worker w1: moving")
	})

	// A batch through a third peer: the holder's lease, that peer's own,
	// and a token with the holder's tag that the holder never handed out.
	var next string
	for next == "" { // the released task again, once w1 asks
		if tasks := poll(t, holder, "w1", `"lb"`, 1, "10s"); len(tasks) == 1 {
			next = tasks[0].Lease
		}
	}
	_, heldThere := leaseAt(other, "w2")
	unknown := strings.Repeat("0", tokenRandHex) + leaseTag(peers[1].p.ID())
	status, data := wcall(t, other, "POST", "/v1/leases/report", `{"done": [`+
		`{"lease": "`+next+`", "result": 1}, {"lease": "`+heldThere+`", "result": 2}, {"lease": "`+unknown+`", "error": "x"}]}`)
	var res api.ReportResult
	if err := json.Unmarshal(data, &res); status != http.StatusOK || err != nil || len(res.Done) != 3 {
		t.Fatalf("report = %d %s, %v", status, data, err)
	}
	for i, want := range []int{200, 200, 404} {
		if res.Done[i].Status != want {
			t.Errorf("done[%d] = %+v; want %d", i, res.Done[i], want)
		}
	}
	// A token of no known peer's tag, or without a tag (an older peer's),
	// is answered by the peer asked: it does not know the lease.
	expect(other, "/v1/leases/"+strings.Repeat("ab", 24)+"/complete", ``, http.StatusNotFound, `not_found`)
	expect(other, "/v1/leases/"+strings.Repeat("ab", 16)+"/complete", ``, http.StatusNotFound, `not_found`)
}

// peerOf is the peer of mesh whose API c calls.
func peerOf(mesh []*meshPeer, c *api.Client) *Peer {
	for _, mp := range mesh {
		if mp.c == c {
			return mp.p
		}
	}
	return nil
}
