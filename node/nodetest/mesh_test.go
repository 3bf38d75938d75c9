package nodetest_test

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/node/nodetest"
)

// TestMeshForms: three peers form a mesh and replicate every partition on
// all three, through the shared driver.
func TestMeshForms(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 4)
	m.Run(15 * time.Second)
	for _, p := range m.Peers {
		if got := len(p.Node.Members()); got != 3 {
			t.Fatalf("%s sees %d members; want 3", p.ID, got)
		}
	}
	for part := range 4 {
		srv := m.Server(part)
		if srv == "" {
			t.Fatalf("nobody serves p%d", part)
		}
		r, _ := m.MustPeer(srv).Node.Replica(part)
		if len(r.Voters) != 3 {
			t.Fatalf("p%d voters %v; want 3", part, r.Voters)
		}
	}
}
