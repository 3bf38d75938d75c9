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

// TestMeshLinks: a one-way cut loses what crosses it in that direction
// only; a held link keeps messages until Release delivers them (or
// DropHeld loses them); a crash that loses unsynced writes restarts the
// peer as a new incarnation.
func TestMeshLinks(t *testing.T) {
	m := nodetest.NewMesh(t, 3, 4)
	m.Run(15 * time.Second)
	fates := map[string]int{}
	m.OnSend = func(s nodetest.Sent) { fates[s.From+">"+s.To+" "+s.Fate]++ }
	m.Cut("n1", "n2", true)
	m.Hold("n3", "n2", 0)
	m.Run(2 * time.Second)
	if fates["n1>n2 cut"] == 0 || fates["n2>n1 "] == 0 || fates["n2>n1 cut"] != 0 {
		t.Fatalf("one-way cut n1->n2: fates %v", fates)
	}
	if fates["n3>n2 held"] == 0 || fates["n3>n2 "] != 0 {
		t.Fatalf("held n3->n2: fates %v", fates)
	}
	if n := m.Release("n3", "n2"); n != fates["n3>n2 held"] {
		t.Fatalf("released %d; want the %d held", n, fates["n3>n2 held"])
	}
	m.Hold("n3", "n2", 0)
	m.Run(2 * time.Second) // Raft heartbeats, probes
	if n := m.DropHeld("n3", "n2"); n == 0 {
		t.Fatalf("dropped %d held messages; want some", n)
	}
	m.Heal()
	holder := m.MustPeer("n2").Node.Holder()
	m.Crash("n2", true)
	m.Restart("n2")
	if h := m.MustPeer("n2").Node.Holder(); h == holder {
		t.Fatalf("restarted n2 holds as %s, its former incarnation", h)
	}
	m.Run(10 * time.Second)
	for part := range 4 {
		if m.Server(part) == "" {
			t.Fatalf("nobody serves p%d after the heal and the restart", part)
		}
	}
}
