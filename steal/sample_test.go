package steal

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSampleAsksBlindWhenNobodyAdvertisesWork(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(3, 4))
	th, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	self := Load{Peer: "a", Slots: 2}
	th.Observe(Load{Peer: "b", Ready: 0, Slots: 2, At: t0}) // an announcement that went stale
	members := []string{"a", "b", "c", "d"}
	live := func(i int) bool { return members[i] != "d" }
	if _, _, ok := th.Next(t0, self); ok {
		t.Fatal("Next asked a peer that advertises nothing")
	}
	if _, ok := th.NextAt(t0, "a"); ok {
		t.Fatal("NextAt woke before any blind ask")
	}
	v, n, ok := th.Sample(t0, self, members, live)
	if !ok || (v != "b" && v != "c") || n != 2 {
		t.Fatalf("Sample = %q %d %v, want b or c (not self, not the dead d), 2 tasks", v, n, ok)
	}
	th.Refused(t0.Add(time.Millisecond), v)
	if _, _, ok := th.Sample(t0.Add(100*time.Millisecond), self, members, live); ok {
		t.Fatal("Sample asked again within SampleMin")
	}
	if at, ok := th.NextAt(t0.Add(100*time.Millisecond), "a"); !ok || !at.Equal(t0.Add(cfg.SampleMin)) {
		t.Fatalf("NextAt = %v %v, want the end of the sample wait %v", at, ok, t0.Add(cfg.SampleMin))
	}
	// The wait doubles after a fruitless ask; the peer refused is in backoff.
	t1 := t0.Add(cfg.SampleMin)
	v2, _, ok := th.Sample(t1, self, members, live)
	if !ok || v2 == v {
		t.Fatalf("Sample at %v = %q %v, want the peer not in backoff", t1, v2, ok)
	}
	th.Granted(t1.Add(time.Millisecond), v2, 1) // the wait already drawn (doubled) stands; the next starts at SampleMin
	t2 := t1.Add(2 * cfg.SampleMin)
	if _, _, ok := th.Sample(t2.Add(-time.Millisecond), self, members, live); ok {
		t.Fatal("Sample ignored the doubled wait")
	}
	if _, _, ok := th.Sample(t2, self, members, live); !ok {
		t.Fatal("Sample did not ask after the doubled wait")
	}
	th.Granted(t2.Add(time.Millisecond), "c", 1)
	th.Granted(t2.Add(time.Millisecond), "b", 1)
	if _, _, ok := th.Sample(t2.Add(cfg.SampleMin), self, members, live); !ok {
		t.Fatal("a grant did not reset the wait to SampleMin")
	}
}

func TestSampleWithNobodyToAskDoesNotWake(t *testing.T) {
	cfg := DefaultConfig()
	th, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	self := Load{Peer: "a", Slots: 2}
	if _, _, ok := th.Sample(t0, self, []string{"a"}, func(int) bool { return true }); ok {
		t.Fatal("a lone peer asked itself")
	}
	if _, ok := th.NextAt(t0, "a"); ok {
		t.Fatal("a lone peer's thief wants to wake")
	}
	busy := Load{Peer: "a", Slots: 2, Running: 2}
	if _, _, ok := th.Sample(t0, busy, []string{"a", "b"}, func(int) bool { return true }); ok {
		t.Fatal("a peer without a free slot asked")
	}
}

func TestSampleFindsTheOneMemberItMayAsk(t *testing.T) {
	th, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for i := range 50 {
		members = append(members, fmt.Sprintf("p%02d", i))
	}
	live := func(i int) bool { return members[i] == "p37" } // the others are dead or unknown
	v, _, ok := th.Sample(time.Unix(1000, 0), Load{Peer: "p00", Slots: 1}, members, live)
	if !ok || v != "p37" {
		t.Fatalf("Sample = %q %v, want p37, the only live member", v, ok)
	}
}

// A thief records only the peers with READY work or refused asking: idle
// peers it hears of cost it nothing, a peer it asked blind and that
// refused backs off although its idle load was never recorded, and a
// refusal nobody asked for (a late reply) records nothing.
func TestIdlePeersAreNotRecorded(t *testing.T) {
	th := mustThief(t, 7, nil)
	t0 := time.Unix(1000, 0)
	members := []string{"self"}
	for i := range 1000 {
		id := fmt.Sprint("p", i)
		members = append(members, id)
		th.Observe(Load{Peer: id, Slots: 2, At: t0})
	}
	if len(th.peers) != 0 || len(th.byID) != 0 {
		t.Fatalf("%d idle peers recorded; want none", len(th.peers))
	}
	th.Observe(Load{Peer: "p7", Ready: 4, Slots: 2, At: t0})
	th.Observe(Load{Peer: "p7", Ready: 0, Slots: 2, At: t0.Add(time.Millisecond)})
	if len(th.peers) != 1 || th.loaded != 0 {
		t.Fatalf("a peer that had READY work and has none: %d recorded, %d loaded; want 1, 0", len(th.peers), th.loaded)
	}
	self := Load{Peer: "self", Slots: 2}
	v, _, ok := th.Sample(t0, self, members, func(int) bool { return true })
	if !ok {
		t.Fatal("Sample asked nobody")
	}
	th.Refused(t0.Add(time.Millisecond), v)
	if !th.BackoffUntil(v).After(t0) {
		t.Errorf("%s refused a blind ask and is not in backoff", v)
	}
	th.Refused(t0.Add(time.Millisecond), "p999") // not asked
	if !th.BackoffUntil("p999").IsZero() {
		t.Error("a refusal nobody asked for put its sender in backoff")
	}
}
