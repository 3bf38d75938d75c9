package node

import (
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Lease-ahead hides a commit behind short tasks and is off for long ones:
// a lease held ahead waits behind a whole run while its expiry runs.
func TestPacerAhead(t *testing.T) {
	for _, c := range []struct {
		run, commit time.Duration
		want        int
	}{
		{0, 0, 0}, // nothing measured yet
		{time.Millisecond, 2 * time.Millisecond, 4}, // 1 ms tasks, 2 ms commits: capped at slots*factor
		{20 * time.Millisecond, 2 * time.Millisecond, 1},
		{100 * time.Millisecond, 2 * time.Millisecond, 1}, // commit/run 2%: still worth one
		{500 * time.Millisecond, 2 * time.Millisecond, 0}, // 0.4%: not worth a lease's clock
		{5 * time.Second, 4 * time.Millisecond, 0},
	} {
		var p pacer
		p.ran(c.run)
		p.committed(c.commit)
		if c.commit == 0 {
			p.commit = 0
		}
		if got := p.ahead(2, 2); got != c.want {
			t.Errorf("run %v, commit %v: ahead(2 slots, factor 2) = %d; want %d", c.run, c.commit, got, c.want)
		}
	}
}

// The leader's Raft heartbeats must come at least four times per
// DeadAfter: an answer holds the read lease for 2/5 DeadAfter after its
// heartbeat left, and a replica that hears nothing from its leader for
// DeadAfter/2 votes for another.
func TestNodeConfigRaftHeartbeats(t *testing.T) {
	cfg := DefaultNodeConfig("p1", "1")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cfg.HeartbeatTicks = 10 // 1 s of 100 ms ticks, DeadAfter 3 s
	if err := cfg.Validate(); err == nil {
		t.Fatal("Raft heartbeats every 1 s with DeadAfter 3 s: want an error")
	}
}

// A leader abdicates only when the other voters can elect one without it:
// in a joint configuration whose old half is this voter alone, its silence
// would stop the partition instead.
func TestAbdicateOnlyWhenOthersCanElect(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	p := h.n.parts[0]
	if p == nil || !p.leader {
		t.Fatal("the lone peer does not lead its partition")
	}
	self := h.n.raftID
	h.now = h.now.Add(10 * time.Second)
	h.n.now = h.now
	p.leadSince = h.now.Add(-10 * time.Second)
	clear(p.acked)
	p.conf = &pb.ConfState{Voters: []uint64{self, 2, 3}, VotersOutgoing: []uint64{self}}
	if h.n.abdicate(p) {
		t.Fatal("abdicated in a joint configuration whose old half is itself alone")
	}
	p.conf = &pb.ConfState{Voters: []uint64{self, 2, 3}}
	if !h.n.abdicate(p) {
		t.Fatal("did not abdicate with no answer from 2 of 3 voters for 10 s")
	}
	if p.serving || h.n.stats.Abdications != 1 {
		t.Errorf("after abdicating: serving %v, abdications %d; want false, 1", p.serving, h.n.stats.Abdications)
	}
}

// The longest run lately seen rises to a longer run at once and decays
// toward shorter ones, a hundred of them taking it two thirds of the way.
func TestPacerSlow(t *testing.T) {
	var p pacer
	p.ran(20 * time.Millisecond)
	p.ran(400 * time.Millisecond)
	if p.slow != float64(400*time.Millisecond) {
		t.Fatalf("after a 400 ms run: slow %v, want 400ms", time.Duration(p.slow))
	}
	p.ran(20 * time.Millisecond)
	if s := time.Duration(p.slow); s >= 400*time.Millisecond || s < 390*time.Millisecond {
		t.Errorf("one 20 ms run after: slow %v, want just under 400ms", s)
	}
	for range 99 {
		p.ran(20 * time.Millisecond)
	}
	if s := time.Duration(p.slow); s < 150*time.Millisecond || s > 170*time.Millisecond {
		t.Errorf("a hundred 20 ms runs after: slow %v, want about 160ms", s)
	}
}
