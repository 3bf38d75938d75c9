package shard

import (
	"testing"
	"time"
)

// TestLookupAfterGroupsChange: a task read just before its group is
// removed, or replaced by a new group of the same id, or by a restore,
// reads as the state now holds it (lookup keeps its last answer between
// calls).
func TestLookupAfterGroupsChange(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}})
	o.lease(1, "w")
	if err := o.report("g.0", "w", true, false); err != nil {
		t.Fatal(err)
	}
	if st := o.state("g.0"); st != Succeeded {
		t.Fatalf("g.0 is %v, want SUCCEEDED", st)
	}
	snap := o.s.Snapshot()

	o.advance(8 * 24 * time.Hour) // past retention: g is removed
	if o.s.HasGroup("g") {
		t.Fatal("g kept after retention")
	}
	if v, err := o.s.Task("g.0"); err == nil {
		t.Fatalf("g.0 reads %v after its group was removed", v.State)
	}

	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}})
	if st := o.state("g.0"); st != Ready {
		t.Fatalf("g.0 of the new group g is %v, want READY", st)
	}

	if err := o.s.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if st := o.state("g.0"); st != Succeeded {
		t.Fatalf("g.0 after the restore is %v, want SUCCEEDED", st)
	}
}
