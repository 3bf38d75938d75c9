package peer

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/needle-mesh/needle/node"
)

// TestDrainUnderLoad drains one of three peers (in memory, on the virtual
// clock) while tasks run: it hands its partitions over and exits, and
// every task finishes, none lost.
func TestDrainUnderLoad(t *testing.T) { synctest.Test(t, testDrainUnderLoad) }

func testDrainUnderLoad(t *testing.T) {
	_, peers := startMemMesh(t, 3, 32)
	p1, p2, p3 := peers[0], peers[1], peers[2]
	ctx := t.Context()
	var groups []string
	for i := range 9 {
		body := fmt.Sprintf(`{"mode":"parallel","key":"drain-%d","tasks":[{"handler":"sleep","payload":{"ms":100,"i":%d}},{"handler":"sleep","payload":{"ms":150}},{"handler":"echo","payload":%d}]}`, i, i, i)
		groups = append(groups, submitRetrying(t, peers[i%3].c, body).Group)
	}
	// Drained through the API, the drain is in the audit trail, which
	// another peer reads after the drained one is gone.
	if status, data := wcall(t, p2.c, "POST", "/v1/drain", ""); status != http.StatusAccepted || string(data) != `{"draining":true,"audited":true}` {
		t.Fatalf("POST /v1/drain = %d %s; want 202, audited", status, data)
	}
	select {
	case <-p2.done:
		if p2.err != nil {
			t.Fatalf("drained peer's Run: %v", p2.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("p2 did not finish draining")
	}
	for _, g := range groups {
		gv, err := p1.c.GetGroup(ctx, g, 20*time.Second)
		if err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("group %s after the drain = %+v, %v", g, gv, err)
		}
	}
	want := `"action":"peer_drained","subject":"` + p2.p.ID() + `"`
	if status, data := wcall(t, p3.c, "GET", "/v1/audit", ""); status != http.StatusOK || !strings.Contains(string(data), want) {
		t.Fatalf("audit after the drain = %d %s; want %s", status, data, want)
	}
	waitFor(t, "p1 and p3 to lead every partition", 15*time.Second, func() bool {
		total := 0
		for _, mp := range []*memPeer{p1, p3} {
			var st node.Stats
			_ = mp.p.read(t.Context(), func(n *node.Node) error { st = n.Stats(); return nil })
			total += st.Leading
		}
		return total == 32
	})
}
