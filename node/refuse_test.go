package node

import (
	"errors"
	"testing"
	"time"

	"github.com/needle-mesh/needle/ring"
)

// A peer whose heartbeat was refused (another --replicas) enters the
// membership by no other way: not from a member list, not from a probe's
// update, not by its own probes; a member that sends such a heartbeat (it
// restarted with other flags) is dead here and stays dead whatever others
// say, until a heartbeat of it is taken.
func TestRefusedPeerNotLearnedSecondHand(t *testing.T) {
	_, n, now := loneNode(t)
	hb := func(replicas int, members ...string) Message {
		return Message{Type: MsgHeartbeat, Heartbeat: &Heartbeat{Boot: "b", Partitions: 16, Features: Features,
			Members: members, Replicas: replicas, Placement: ring.PlacementCircle}}
	}
	news := func(u Update) Message {
		return Message{Type: MsgProbe, Probe: &Probe{Kind: ProbeNews, Boot: "b", Inc: 1, Features: Features, Updates: []Update{u}}}
	}
	state := func(id string) (PeerState, bool) { return n.PeerState(id) }
	step := func(from string, m Message) error {
		now = now.Add(100 * time.Millisecond)
		n.Tick(now)
		return n.Step(from, m)
	}

	if err := step("r5", hb(5, "r5")); !errors.Is(err, ErrReplicas) {
		t.Fatalf("Step(r5 with 5 replicas) = %v; want ErrReplicas", err)
	}
	// An older release (Replicas 0, unchecked) took it and names it.
	if err := step("old", hb(0, "old", "p1", "r5")); err != nil {
		t.Fatalf("Step(old) = %v", err)
	}
	if _, member := state("r5"); member {
		t.Error("r5 became a member from another's member list")
	}
	if err := step("old", news(Update{ID: "r5", Boot: "b", Inc: 9, State: PeerAlive})); err != nil {
		t.Fatalf("Step(old's news) = %v", err)
	}
	if _, member := state("r5"); member {
		t.Error("r5 became a member from a probe's update")
	}
	if err := step("r5", news(Update{ID: "r5", Boot: "b", Inc: 9, State: PeerAlive})); !errors.Is(err, ErrNotMember) {
		t.Errorf("Step(r5's probe) = %v; want ErrNotMember", err)
	}

	// A member restarted with other flags.
	if err := step("m", hb(3, "m", "p1")); err != nil {
		t.Fatalf("Step(m) = %v", err)
	}
	if err := step("m", hb(5, "m")); !errors.Is(err, ErrReplicas) {
		t.Fatalf("Step(m with 5 replicas) = %v; want ErrReplicas", err)
	}
	if st, _ := state("m"); st != PeerDead {
		t.Errorf("m after a refused heartbeat is %v; want dead", st)
	}
	if err := step("m", news(Update{ID: "m", Boot: "b", Inc: 1 << 50, State: PeerAlive})); !errors.Is(err, ErrNotMember) {
		t.Errorf("Step(m's probe) = %v; want ErrNotMember", err)
	}
	if err := step("old", news(Update{ID: "m", Boot: "b", Inc: 1 << 50, State: PeerAlive})); err != nil {
		t.Fatalf("Step(old's news) = %v", err)
	}
	if st, _ := state("m"); st != PeerDead {
		t.Errorf("m after a refutation heard second-hand is %v; want dead", st)
	}

	// Restarted with the mesh's flags, each is taken.
	for _, id := range []string{"m", "r5"} {
		if err := step(id, hb(3, id, "p1")); err != nil {
			t.Fatalf("Step(%s with 3 replicas) = %v", id, err)
		}
		if st, member := state(id); !member || st != PeerAlive {
			t.Errorf("%s with the mesh's flags is %v (member %v); want alive", id, st, member)
		}
	}
}
