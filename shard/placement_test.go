package shard

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func constrained(name string, prio int32, pin string, require ...string) TaskSpec {
	ts := echo(name)
	ts.Priority, ts.Pin, ts.Require = prio, pin, require
	return ts
}

func (o *owner) leaseFor(n int, holder string, at Placement) []TaskID {
	evs := o.s.LeaseFor(o.now, n, holder, at, nil)
	o.commit(evs...)
	return taskIDs(evs)
}

func taskIDs(evs []Event) []TaskID {
	ids := make([]TaskID, len(evs))
	for i, e := range evs {
		ids[i] = e.Task
	}
	return ids
}

func TestLeaseForPlacement(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{
		constrained("plain0", 0, ""),
		constrained("gpu", 5, "", "gpu=true"),
		constrained("pinB", 3, "b"),
		constrained("plain1", 1, ""),
		constrained("gpuZoneA", 4, "", "gpu=true", "zone=a"),
	}})
	a := Placement{Peer: "a", Labels: map[string]string{"zone": "a"}}
	b := Placement{Peer: "b", Labels: map[string]string{"gpu": "true", "zone": "b"}}
	if got, want := o.s.ReadyFor(a), 2; got != want {
		t.Errorf("ReadyFor(a) = %d; want %d", got, want)
	}
	if got, want := o.s.Stranded(a), 3; got != want {
		t.Errorf("Stranded(a) = %d; want %d", got, want)
	}
	if prio, _, ok := o.s.HeadFor(a); !ok || prio != 1 {
		t.Errorf("HeadFor(a) = %d, %v; want 1, true", prio, ok)
	}
	if got, want := o.leaseFor(10, "a#1", a), []TaskID{"g.3", "g.0"}; !slices.Equal(got, want) {
		t.Errorf("LeaseFor(a) = %v; want %v (plain tasks only, priority order)", got, want)
	}
	if got := o.s.ReadyLen(); got != 3 {
		t.Errorf("ReadyLen = %d; want 3 constrained tasks left queued", got)
	}
	// b may run gpu and pinB, not gpuZoneA (zone=b); a may run none of them.
	if got, want := taskIDs(o.s.LeaseStranded(o.now, 10, "b#1", b, a)), []TaskID{"g.1", "g.2"}; !slices.Equal(got, want) {
		t.Errorf("LeaseStranded(b, a) = %v; want %v", got, want)
	}
	o.s.Unlease(o.s.LeaseStranded(o.now, 10, "b#1", b, a)) // nothing left to give b; a no-op
	if got := o.s.ReadyLen(); got != 1 {
		t.Errorf("ReadyLen = %d; want 1 (g.4 for a gpu peer in zone a)", got)
	}
	c := Placement{Peer: "c", Labels: map[string]string{"gpu": "true", "zone": "a"}}
	if got, want := o.leaseFor(10, "c#1", c), []TaskID{"g.4"}; !slices.Equal(got, want) {
		t.Errorf("LeaseFor(c) = %v; want %v", got, want)
	}
}

func TestLeaseForUnleaseRequeues(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{
		constrained("p", 0, "b"), constrained("q", 0, "b"), constrained("r", 0, ""),
	}})
	b := Placement{Peer: "b"}
	evs := o.s.LeaseFor(o.now, 10, "b#1", b, nil)
	if len(evs) != 3 || o.s.ReadyLen() != 0 {
		t.Fatalf("LeaseFor(b) = %d events, %d left; want 3, 0", len(evs), o.s.ReadyLen())
	}
	o.s.Unlease(evs)
	if got, want := o.s.ReadyFor(Placement{Peer: "a"}), 1; got != want || o.s.ReadyLen() != 3 {
		t.Errorf("after Unlease: ReadyFor(a) = %d (want %d), ReadyLen = %d (want 3)", got, want, o.s.ReadyLen())
	}
	// A canceled READY task leaves its class; an emptied class is dropped.
	evs, err := o.s.Cancel(o.now, "g", "", "test")
	if err != nil {
		t.Fatal(err)
	}
	o.commit(evs...)
	if o.s.ReadyLen() != 0 || len(o.s.ready.classes) != 0 {
		t.Errorf("after cancel: ReadyLen %d, classes %d; want 0, 0", o.s.ReadyLen(), len(o.s.ready.classes))
	}
}

// blockedHead is an owner of one group: 10,000 high-priority tasks that
// only a gpu=true peer may run, then one plain task (g.10000).
func blockedHead(tb testing.TB) *owner {
	o := newOwner(tb)
	tasks := make([]TaskSpec, 0, 10_001)
	for i := range 10_000 {
		tasks = append(tasks, constrained(fmt.Sprint("gpu", i), 9, "", "gpu=true"))
	}
	tasks = append(tasks, constrained("plain", 0, ""))
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: tasks})
	return o
}

// TestLeaseForBlockedHeadIsCheap: thousands of tasks at the head of the
// queue that this peer may not run cost a lease no per-task work.
func TestLeaseForBlockedHeadIsCheap(t *testing.T) {
	o := blockedHead(t)
	a := Placement{Peer: "a"}
	allocs := testing.AllocsPerRun(20, func() {
		o.s.Unlease(o.s.LeaseFor(o.now, 1, "a#1", a, nil))
	})
	if allocs > 8 {
		t.Errorf("LeaseFor past 10,000 blocked tasks: %.0f allocations; want a handful (no per-task work)", allocs)
	}
	if got := o.leaseFor(1, "a#1", a); !slices.Equal(got, []TaskID{"g.10000"}) {
		t.Errorf("LeaseFor(a) = %v; want the plain task", got)
	}
}

func TestSnapshotKeepsClasses(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{
		constrained("p", 0, "b"), constrained("q", 2, "", "zone=a"), constrained("r", 1, ""),
	}})
	snap := o.s.Snapshot()
	s2, err := New(o.s.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	s2.SetLeader(true, o.now)
	got := taskIDs(s2.LeaseFor(o.now, 10, "x#1", Placement{Peer: "x", Labels: map[string]string{"zone": "a"}}, nil))
	if want := []TaskID{"g.1", "g.2"}; !slices.Equal(got, want) {
		t.Errorf("LeaseFor after restore = %v; want %v", got, want)
	}
}

func BenchmarkLeaseForBlockedHead(b *testing.B) {
	o := blockedHead(b)
	a := Placement{Peer: "a"}
	for b.Loop() {
		o.s.Unlease(o.s.LeaseFor(o.now, 1, "a#1", a, nil))
	}
}

// TestFailPinnedToGonePeer: READY tasks pinned to a peer that left the
// mesh fail for good (no attempt counted, dependents canceled, the group
// finishes); tasks pinned to a live peer, or only requiring labels, stay;
// a lease applied first fences the failure out; a dropped proposal puts
// the tasks back; a replica replaying the log holds the same state.
func TestFailPinnedToGonePeer(t *testing.T) {
	o := newOwner(t)
	after := constrained("after", 0, "")
	after.Deps = []string{"gone0"}
	o.submit(GroupSpec{ID: "g", Mode: ModeDAG, Tasks: []TaskSpec{
		constrained("gone0", 0, "x"), constrained("gone1", 2, "x"), constrained("live", 0, "y"),
		constrained("labels", 0, "", "gpu=true"), after,
	}})
	gone := func(p string) bool { return p == "x" }
	if evs := o.s.FailPinnedTo(o.now, func(string) bool { return false }); len(evs) != 0 {
		t.Fatalf("nobody gone: %v", evs)
	}
	evs := o.s.FailPinnedTo(o.now, gone)
	if got, want := taskIDs(evs), []TaskID{"g.1", "g.0"}; !slices.Equal(got, want) {
		t.Fatalf("FailPinnedTo = %v; want %v (the class's queue order)", got, want)
	}
	if again := o.s.FailPinnedTo(o.now, gone); len(again) != 0 {
		t.Fatalf("proposed twice before applying: %v", again)
	}
	o.s.Unlease(evs) // the proposal was dropped: the tasks are READY again
	if got := o.s.ReadyLen(); got != 4 {
		t.Fatalf("ReadyLen after Unlease = %d; want 4", got)
	}
	evs = o.s.FailPinnedTo(o.now, gone)
	o.commit(evs...)
	for id, want := range map[TaskID]State{"g.0": Failed, "g.1": Failed, "g.2": Ready, "g.3": Ready, "g.4": Canceled} {
		if got := o.state(id); got != want {
			t.Errorf("%s = %v; want %v", id, got, want)
		}
	}
	v, err := o.s.Task("g.0")
	if err != nil || v.Attempt != 0 || !strings.Contains(v.Error, "pinned to peer x, which left the mesh") {
		t.Errorf("g.0 = %+v, %v; want 0 attempts and the reason", v, err)
	}
	// A failure proposed while a lease was in flight loses to the lease.
	o2 := newOwner(t)
	o2.submit(GroupSpec{ID: "h", Mode: ModeSingle, Tasks: []TaskSpec{constrained("p", 0, "x")}})
	fail := o2.s.FailPinnedTo(o2.now, gone)
	o2.s.Unlease(fail)
	o2.leaseFor(1, "x#1", Placement{Peer: "x"})
	o2.commit(fail...)
	if got := o2.state("h.0"); got != Running {
		t.Errorf("h.0 after a lease then a stale failure = %v; want RUNNING", got)
	}
	// A task whose pinned peer failed an attempt before leaving: the
	// failure takes the next round, so each round keeps one outcome.
	o3 := newOwner(t)
	retried := constrained("r", 0, "x")
	retried.Retry = Retry{MaxAttempts: 3, Backoff: time.Second}
	o3.submit(GroupSpec{ID: "k", Mode: ModeSingle, Tasks: []TaskSpec{retried}})
	o3.leaseFor(1, "x#1", Placement{Peer: "x"})
	if err := o3.report("k.0", "x#1", false, false); err != nil {
		t.Fatal(err)
	}
	o3.advance(time.Minute)
	o3.commit(o3.s.FailPinnedTo(o3.now, gone)...)
	if v, _ := o3.s.Task("k.0"); v.State != Failed || v.Round != 2 || v.Attempt != 1 {
		t.Errorf("k.0 = %v round %d attempt %d; want FAILED in round 2 after 1 attempt", v.State, v.Round, v.Attempt)
	}
	// Followers apply the same events to the same state.
	rep, _ := New(o.s.Config())
	rep.Apply(o.log)
	if !bytes.Equal(rep.Snapshot(), o.s.Snapshot()) {
		t.Fatal("a replica replaying the log differs")
	}
}

// StrandedRunners names the peers that may run what self may not: the
// pinned peer, and the peers whose labels a requirement matches.
func TestStrandedRunners(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{
		constrained("plain", 0, ""),
		constrained("pinB", 0, "b"),
		constrained("gpuZoneA", 0, "", "gpu=true", "zone=a"),
		constrained("pinA", 0, "a"),
	}})
	self := Placement{Peer: "a", Labels: map[string]string{"zone": "a"}}
	cands := []Placement{
		{Peer: "b", Labels: map[string]string{"zone": "b"}},
		{Peer: "c", Labels: map[string]string{"gpu": "true", "zone": "a"}},
		{Peer: "d", Labels: map[string]string{"gpu": "true", "zone": "b"}},
	}
	got := slices.Sorted(maps.Keys(o.s.StrandedRunners(self, cands, nil)))
	if want := []string{"b", "c"}; !slices.Equal(got, want) {
		t.Errorf("StrandedRunners = %v; want %v (pinB for b, gpuZoneA for c; pinA is self's)", got, want)
	}
}
