package node

import (
	"testing"
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
