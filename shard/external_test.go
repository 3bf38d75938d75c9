package shard

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// newExternalOwner is newOwner with handler "resize" external.
func newExternalOwner(tb testing.TB) *owner {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(7, 7))
	cfg.External = func(h string) bool { return h == "resize" }
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.SetLeader(true, t0)
	return &owner{tb: tb, s: s, now: t0}
}

func external(name string, prio int32, require ...string) TaskSpec {
	ts := constrained(name, prio, "", require...)
	ts.Handler = "resize"
	return ts
}

// Tasks of an external handler go only to a placement that serves it: not
// to a peer's own slots, not to a thief, and they are not stranded work.
func TestLeaseExternal(t *testing.T) {
	o := newExternalOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{
		constrained("plain", 0, ""),
		external("x0", 1),
		external("x1", 2),
		external("xa", 3, "zone=a"),
	}})
	self := Placement{Peer: "a"}
	if got := o.s.ExternalReady(); got != 3 {
		t.Errorf("ExternalReady = %d; want 3", got)
	}
	if got := o.s.Stranded(self); got != 0 {
		t.Errorf("Stranded = %d; want 0 (external tasks wait for workers, not thieves)", got)
	}
	if got := o.leaseFor(10, "a#1", self); !slices.Equal(got, []TaskID{"g.0"}) {
		t.Errorf("LeaseFor(own slots) = %v; want the built-in task only", got)
	}
	if got := taskIDs(o.s.LeaseStranded(o.now, 10, "b#1", Placement{Peer: "b", Handlers: []string{"resize"}}, self)); len(got) != 0 {
		t.Errorf("LeaseStranded = %v; want none", got)
	}
	workers := Placement{Peer: "b", Handlers: []string{"resize"}}
	if got := o.leaseFor(10, "b#1", workers); !slices.Equal(got, []TaskID{"g.2", "g.1"}) {
		t.Errorf("LeaseFor(workers without labels) = %v; want g.2, g.1 (priority order, not the one requiring zone=a)", got)
	}
	zoned := Placement{Peer: "c", Labels: map[string]string{"zone": "a"}, Handlers: []string{"resize"}}
	if got := o.leaseFor(10, "c#1", zoned); !slices.Equal(got, []TaskID{"g.3"}) {
		t.Errorf("LeaseFor(workers in zone a) = %v; want g.3", got)
	}
	if got := o.s.ExternalReady(); got != 0 {
		t.Errorf("ExternalReady after leasing = %d; want 0", got)
	}
}

// A replica restored from a snapshot classifies the READY tasks as the
// shard it came from: external ones stay out of its own slots.
func TestRestoreKeepsExternal(t *testing.T) {
	o := newExternalOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{external("x", 0), constrained("plain", 0, "")}})
	back := newExternalOwner(t)
	if err := back.s.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	back.s.SetLeader(true, t0)
	if got := back.leaseFor(10, "a#1", Placement{Peer: "a"}); !slices.Equal(got, []TaskID{"g.1"}) {
		t.Errorf("LeaseFor(own slots) after Restore = %v; want the built-in task only", got)
	}
	if got := back.s.ExternalReady(); got != 1 {
		t.Errorf("ExternalReady after Restore = %d; want 1", got)
	}
}
