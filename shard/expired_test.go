package shard

import (
	"strings"
	"testing"
	"time"
)

// An expiry that names no holder and no reason (the owner found the
// lease's holder gone, or the lease ran out) is recorded in the task's
// history with the lease's holder and why: it said "expired" with no peer
// and no error, and a user could not tell which peer died nor that the
// task runs again because of it. The same note is shared by the tasks of
// one holder's expiry, and survives a snapshot.
func TestExpiredHistorySaysWhoseLeaseAndWhy(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeParallel, Tasks: []TaskSpec{
		{Handler: "h", Timeout: time.Minute}, {Handler: "h", Timeout: time.Minute}, {Handler: "h", Timeout: time.Second}}})
	if ids := o.lease(2, "peerA#boot1"); len(ids) != 2 {
		t.Fatalf("leased %v", ids)
	}
	if ids := o.lease(1, "peerB#boot1"); len(ids) != 1 {
		t.Fatalf("leased %v", ids)
	}
	// peerA dies: the owner expires its leases before they ran out.
	o.commit(o.s.ExpireHolders(o.now, func(h string) bool { return HolderPeer(h) == "peerA" })...)
	// peerB's lease (1 s timeout + the grace) runs out.
	o.advance(time.Second + DefaultConfig().LeaseGrace)
	check := func(s *Shard, id TaskID, peer, says string) {
		t.Helper()
		evs, err := s.TaskEvents(id)
		if err != nil {
			t.Fatal(err)
		}
		e := evs[len(evs)-1]
		if e.Type != EvExpired || HolderPeer(e.Holder) != peer || !strings.Contains(e.Error, says) || !strings.Contains(e.Error, peer) {
			t.Errorf("%s's last event = %+v; want expired, holder %s, saying %q", id, e, peer, says)
		}
		if st := o.state(id); st != Ready {
			t.Errorf("%s is %v; want READY", id, st)
		}
	}
	for _, s := range []*Shard{o.s, restored(t, o.s)} {
		check(s, "g.0", "peerA", "died or restarted")
		check(s, "g.1", "peerA", "died or restarted")
		check(s, "g.2", "peerB", "ran out")
	}
	a, _ := o.s.TaskEvents("g.0")
	b, _ := o.s.TaskEvents("g.1")
	if o.s.event0(t, "g.0", len(a)-1).note != o.s.event0(t, "g.1", len(b)-1).note {
		t.Error("the two tasks of peerA's expiry hold a note each; want one shared")
	}
	// An expiry that says why (a worker died) keeps its own words.
	o = newOwner(t)
	o.submit(GroupSpec{ID: "w", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}})
	o.lease(1, "peerA#boot2")
	o.died("w.0", "peerA#boot2", DiedAlone)
	if evs, _ := o.s.TaskEvents("w.0"); evs[len(evs)-1].Type != EvExpired || strings.Contains(evs[len(evs)-1].Error, "died or restarted") {
		t.Errorf("a worker's death recorded as %q; want its own reason", evs[len(evs)-1].Error)
	}
}

func restored(t *testing.T, s *Shard) *Shard {
	t.Helper()
	r, _ := New(DefaultConfig())
	if err := r.Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	return r
}

// event0 returns task id's i-th history event as the task keeps it.
func (s *Shard) event0(t *testing.T, id TaskID, i int) taskEvent {
	t.Helper()
	tk, err := s.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	return tk.event(i)
}
