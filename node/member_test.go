package node

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// A member must stay small: every peer keeps one for every other, a
// million in the simulator's 1,000-peer runs and 25 million at 5,000 (it
// took 400 bytes with six time.Time fields and the rarely set labels,
// stranded tasks and workers inline).
func TestMemberSize(t *testing.T) {
	if n := unsafe.Sizeof(member{}); n > 200 {
		t.Errorf("member takes %d bytes; want at most 200", n)
	}
}

// A member's rare part exists only while some of it is set, and gives
// back what its heartbeats said, nil and empty alike.
func TestMemberRare(t *testing.T) {
	mb := &member{id: "p2"}
	mb.setStranded(0, nil)
	mb.setWorkers(nil)
	mb.setLabels(nil)
	mb.setLabels([]string{}) // as nil: the labels are unchanged
	if mb.rare != nil {
		t.Fatal("a member with nothing rare set got a rare part")
	}
	if mb.labels() != nil || mb.labelList() != nil || mb.stranded() != 0 || mb.strandedFor() != nil || mb.workers() != nil || mb.offered("k") != 0 {
		t.Fatal("a member without a rare part reads something set")
	}

	mb.setStranded(3, []string{})
	if mb.stranded() != 3 || mb.strandedFor() == nil || len(mb.strandedFor()) != 0 {
		t.Errorf("stranded %d for %#v; want 3 for an empty, not nil, list", mb.stranded(), mb.strandedFor())
	}
	mb.setStranded(0, nil)
	if mb.rare != nil {
		t.Error("the rare part stayed once nothing of it was set")
	}

	ws := []WorkerAd{{Handler: "h", Want: 2}}
	mb.setWorkers(ws)
	mb.offer("k", 1)
	mb.offer("k", 2)
	if len(mb.workers()) != 1 || mb.offered("k") != 3 {
		t.Errorf("workers %v offered %d; want one, 3", mb.workers(), mb.offered("k"))
	}
	mb.setWorkers(ws) // a new heartbeat: what was offered is forgotten
	if mb.offered("k") != 0 {
		t.Errorf("offered %d after a heartbeat; want 0", mb.offered("k"))
	}
	mb.setLabels([]string{"zone=a"})
	mb.setWorkers(nil)
	if mb.rare == nil || mb.labels()["zone"] != "a" || len(mb.labelList()) != 1 {
		t.Fatalf("labels %v (%v) lost with the workers", mb.labels(), mb.labelList())
	}
	mb.setLabels(nil)
	if mb.rare != nil {
		t.Error("the rare part stayed once nothing of it was set")
	}
}

// A forget heard second-hand for a member alive here waits for this
// peer to hold it dead, then applies at once, from either kind of news
// (a piggybacked update, a heartbeat's Forgotten list). Before, it was
// dropped, and the member stayed until a membership exchange brought the
// forget again, up to syncEvery after its death: a peer that restarted as
// another peer left kept it in its ring for 20 s while the others had
// dropped it (simulate: seed 490089, --peers 5 --workload w4).
func TestForgetHeardWhileAliveAppliesAtDeath(t *testing.T) {
	for _, news := range []string{"update", "heartbeat"} {
		c := newCluster(t, 4, 4)
		c.run(10 * time.Second)
		n1, n4 := c.node("n1"), c.node("n4")
		n4.down = true
		m := &n1.n.mesh
		switch news {
		case "update":
			m.apply(Update{ID: "n4", State: peerForgotten}, n1.n.now)
		case "heartbeat":
			m.learn("n2", &Heartbeat{Members: []string{"n1", "n2", "n3"}, Forgotten: []string{"n4"}}, n1.n.now)
		}
		if m.members["n4"] == nil || m.forgotten["n4"] {
			t.Fatalf("%s: n1 forgot n4 on news of a forget while n4 was alive to it", news)
		}
		for i := 0; m.members["n4"] != nil; i++ {
			if i > 1000 {
				t.Fatalf("%s: n1 still has n4 (%v) 10 s after it stopped", news, m.members["n4"].state)
			}
			c.step(10 * time.Millisecond)
		}
		if !m.forgotten["n4"] {
			t.Fatalf("%s: n4 left n1's membership without being forgotten", news)
		}
	}
}

// A member's version is rare like its labels: set by its heartbeats,
// capped, and dropped with the rest when it is empty.
func TestMemberVersion(t *testing.T) {
	mb := &member{id: "p2"}
	mb.setVersion("")
	if mb.rare != nil || mb.version() != "" {
		t.Fatal("an empty version set a rare part")
	}
	mb.setVersion("v1.2.3")
	if mb.version() != "v1.2.3" {
		t.Fatalf("version %q; want v1.2.3", mb.version())
	}
	mb.setVersion(strings.Repeat("x", 1000))
	if len(mb.version()) != maxVersion {
		t.Errorf("a long version kept %d bytes; want %d", len(mb.version()), maxVersion)
	}
	mb.setVersion("")
	if mb.rare != nil {
		t.Error("the rare part stayed once the version was unset")
	}
}
