package peer

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// post503 posts body to path on mp and returns the 503's message; it
// fails the test unless the answer is a 503 unavailable with Retry-After.
func post503(t *testing.T, mp *memPeer, what, path, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", mp.c.BaseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := mp.c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(data, &eb) != nil || eb.Error == nil ||
		eb.Error.Code != api.CodeUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("%s = %d %s (Retry-After %q); want 503 unavailable with Retry-After 1", what, resp.StatusCode, data, resp.Header.Get("Retry-After"))
	}
	return eb.Error.Message
}

// A 503 says which partition and group, why, and that the request did
// nothing and may be retried, with Retry-After; it said "api: unavailable;
// peer: unavailable" whatever the cause. Here: a peer whose mesh is still
// forming (its join target does not answer), and a peer whose link to a
// group's owner, or to the peer that handed out a lease, is cut.
func TestMemMeshUnavailableSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn, peers := startMemMesh(t, 3, 16)
		lonely := startMemPeer(t, newMemNet(), "lonely", Config{Slots: 1, Join: []string{"/memory/nobody"}}) // a mesh of its own, unreachable
		msg := post503(t, lonely, "a submission to a peer that has not joined", "/v1/tasks", `{"handler":"echo","key":"k1"}`)
		g := GroupIDFor("k1")
		want := fmt.Sprintf("partition %d (group %s) is not served now: this peer has not joined a mesh yet", lonely.p.node.PartitionOf(g), g)
		if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "the request did nothing: retry it") {
			t.Errorf("message = %q; want it to open with %q and end telling to retry", msg, want)
		}

		// A lease p1 handed out, and a group owned by p1, asked through p0
		// with their link cut.
		submitTask(t, peers[0].c, `{"handler": "resize"}`)
		var lease string
		for lease == "" {
			if tasks := poll(t, peers[1].c, "w1", `"resize"`, 1, "10s"); len(tasks) == 1 {
				lease = tasks[0].Lease
			}
		}
		var key string
		for i := 0; key == ""; i++ {
			var owner string
			_ = peers[0].p.read(t.Context(), func(n *node.Node) error { owner = n.Owner(GroupIDFor(fmt.Sprint("cut-", i))); return nil })
			if owner == "p1" {
				key = fmt.Sprint("cut-", i)
			}
		}
		mn.setCut("p0", "p1", true)
		msg = post503(t, peers[0], "a heartbeat of a lease whose peer is cut off", "/v1/leases/"+lease+"/heartbeat", "")
		if want := "lease " + lease + " was handed out by peer p1, which does not answer"; !strings.HasPrefix(msg, want) ||
			!strings.HasSuffix(msg, "the call did nothing: retry it") {
			t.Errorf("message = %q; want it to open with %q and end telling to retry", msg, want)
		}
		g = GroupIDFor(key)
		msg = post503(t, peers[0], "a submission whose owner is cut off", "/v1/groups",
			fmt.Sprintf(`{"mode":"parallel","key":%q,"tasks":[{"handler":"echo"}]}`, key))
		want = fmt.Sprintf("partition %d (group %s) is not served now: its owner p1 does not answer", peers[0].p.node.PartitionOf(g), g)
		if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "the request did nothing: retry it") {
			t.Errorf("message = %q; want it to open with %q and end telling to retry", msg, want)
		}
	})
}
