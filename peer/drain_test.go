package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
)

// TestDrainUnderLoad drains one of three real peers while tasks run: it
// hands its partitions over and exits, and every task finishes, none lost.
func TestDrainUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	peers := startMesh3(t)
	p1, p2, p3 := peers[0], peers[1], peers[2]
	ctx := t.Context()
	var groups []string
	for i := range 9 {
		body := fmt.Sprintf(`{"mode":"parallel","key":"drain-%d","tasks":[{"handler":"sleep","payload":{"ms":100,"i":%d}},{"handler":"sleep","payload":{"ms":150}},{"handler":"echo","payload":%d}]}`, i, i, i)
		groups = append(groups, submitRetrying(t, peers[i%3].c, body).Group)
	}
	p2.p.RequestDrain()
	select {
	case err := <-p2.done:
		if err != nil {
			t.Fatalf("drained peer's Run: %v", err)
		}
		p2.cancel = nil
	case <-time.After(30 * time.Second):
		t.Fatal("p2 did not finish draining")
	}
	for _, g := range groups {
		gv, err := p1.c.GetGroup(ctx, g, 20*time.Second)
		if err != nil || gv.State != "SUCCEEDED" {
			t.Fatalf("group %s after the drain = %+v, %v", g, gv, err)
		}
	}
	waitFor(t, "p1 and p3 to lead every partition", 15*time.Second, func() bool {
		total := 0
		for _, mp := range []*meshPeer{p1, p3} {
			var st node.Stats
			_ = mp.p.read(t.Context(), func(n *node.Node) error { st = n.Stats(); return nil })
			total += st.Leading
		}
		return total == 32
	})
}
