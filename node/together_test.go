package node_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

// initialOf names peers n1..n<size> as a mesh's initial membership.
func initialOf(size int) []node.PeerAddrs {
	out := make([]node.PeerAddrs, size)
	for i := range out {
		id := fmt.Sprintf("n%d", i+1)
		out[i] = node.PeerAddrs{ID: id, Addrs: []string{"/mem/" + id}}
	}
	return out
}

// startTogether configures every peer with the same initial membership.
func startTogether(initial []node.PeerAddrs) func(p *nodetest.Peer, cfg *node.NodeConfig) {
	return func(p *nodetest.Peer, cfg *node.NodeConfig) {
		cfg.Founder, cfg.Initial = false, initial
	}
}

// replicaMoves counts what a forming mesh moves: Raft snapshots sent and
// configuration changes proposed.
type replicaMoves struct{ snaps, confs int }

func (c *replicaMoves) watch(m *nodetest.Mesh) {
	m.OnSend = func(s nodetest.Sent) {
		if s.Msg.Type != node.MsgRaft {
			return
		}
		for _, r := range s.Msg.Raft {
			if r.Msg.Type == pb.MsgSnap {
				c.snaps++
			}
		}
	}
	m.OnDuty = func(p *nodetest.Peer, d node.Duty, rd *node.Ready) {
		if d != node.DutyPersist {
			return
		}
		for _, u := range rd.Persist.Updates {
			for _, e := range u.Entries {
				if e.Type == pb.EntryConfChange || e.Type == pb.EntryConfChangeV2 {
					c.confs++
				}
			}
		}
	}
}

// TestStartTogether: peers started with the same initial membership
// bootstrap each partition on its ring replicas, the replicas as voters:
// no configuration change, no snapshot sent, every partition served by
// its preferred owner, and a group runs. The same mesh founded by one
// peer moves every partition (the counters can fail).
func TestStartTogether(t *testing.T) {
	const size, parts = 5, 32
	initial := initialOf(size)
	var moves replicaMoves
	// Every other peer has the list in reverse: its order means nothing.
	reversed := slices.Clone(initial)
	slices.Reverse(reversed)
	m := nodetest.NewMeshWith(t, size, parts, func(p *nodetest.Peer, cfg *node.NodeConfig) {
		startTogether(initial)(p, cfg)
		if cfg.ID[len(cfg.ID)-1]%2 == 0 { // n2, n4
			cfg.Initial = reversed
		}
	})
	moves.watch(m)
	servedAll := func() bool {
		for part := range parts {
			if m.Server(part) == "" {
				return false
			}
		}
		return true
	}
	if !m.RunUntil(10*time.Second, servedAll) {
		t.Fatal("not every partition is served 10 s after the start")
	}
	m.Run(5 * time.Second) // what would move, moves
	cfg := ring.DefaultConfig()
	cfg.Partitions, cfg.Placement = parts, node.DefaultNodeConfig("x", "1").Placement
	ids := make([]ring.PeerID, size)
	for i, p := range initial {
		ids[i] = ring.PeerID(p.ID)
	}
	r, err := ring.New(cfg, 1, ids)
	if err != nil {
		t.Fatal(err)
	}
	for part := range parts {
		want := make([]string, 0, 3)
		for _, id := range r.Replicas(part) {
			want = append(want, string(id))
		}
		slices.Sort(want)
		for _, p := range m.Peers {
			info, held := p.Node.Replica(part)
			if held != slices.Contains(want, p.ID) {
				t.Fatalf("p%d: %s holds it %v; its ring replicas are %v", part, p.ID, held, want)
			}
			if voters := slices.Sorted(slices.Values(info.Voters)); held && !slices.Equal(voters, want) {
				t.Fatalf("p%d: %s has voters %v; want the ring's %v", part, p.ID, info.Voters, want)
			}
		}
	}
	if moves.snaps != 0 || moves.confs != 0 {
		t.Fatalf("a mesh started together sent %d snapshots and persisted %d configuration changes; want none", moves.snaps, moves.confs)
	}
	for _, p := range m.Peers {
		if got := len(p.Node.Members()); got != size {
			t.Fatalf("%s knows %d members; want %d", p.ID, got, size)
		}
	}
	spec := shard.GroupSpec{ID: "g", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Name: "t", Handler: "echo"}}}
	if r, ok := m.Submit(spec); !ok || r.Err != nil {
		t.Fatalf("submit: %+v %v", r, ok)
	}
	done := func() bool {
		v, err := m.MustPeer(m.Server(m.PartitionOf("g"))).Node.Group("g")
		return err == nil && v.State == shard.GroupSucceeded
	}
	if !m.RunUntil(10*time.Second, done) {
		t.Fatal("the group did not finish")
	}

	// The same mesh founded by n1: the founder hands every partition out.
	var founded replicaMoves
	f := nodetest.NewMesh(t, size, parts)
	founded.watch(f)
	f.Run(15 * time.Second)
	if founded.snaps == 0 || founded.confs == 0 {
		t.Fatalf("a mesh founded by one peer: %d snapshots, %d configuration changes; want some of both", founded.snaps, founded.confs)
	}
}

// TestStartTogetherNotNamed: a peer the initial membership does not name
// holds nothing at start (it joins); a named peer restarted with stored
// state ignores the list, and holds what it held.
func TestStartTogetherNotNamed(t *testing.T) {
	initial := initialOf(3)
	m := nodetest.NewMeshWith(t, 3, 8, startTogether(initial))
	if !m.RunUntil(10*time.Second, func() bool { return m.Server(0) != "" }) {
		t.Fatal("p0 not served")
	}
	stranger := m.AddPeer("n9")
	if held := stranger.Node.Held(); len(held) != 0 {
		t.Fatalf("n9, not in the initial membership, holds %v at start; want nothing", held)
	}
	n2 := m.MustPeer("n2")
	before := n2.Node.Held()
	m.Crash("n2", false)
	m.Restart("n2")
	if after := n2.Node.Held(); !slices.Equal(before, after) {
		t.Fatalf("n2 restarted holds %v; held %v", after, before)
	}
}

// TestInitialRefused: an initial membership with a peer named twice, an
// empty id, an id ValidID refuses, or set with Founder is refused.
func TestInitialRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial []node.PeerAddrs
		founder bool
		want    string
	}{
		{"twice", []node.PeerAddrs{{ID: "a"}, {ID: "b"}, {ID: "a"}}, false, "Initial[2]: peer a named twice"},
		{"twice in order", []node.PeerAddrs{{ID: "a"}, {ID: "b"}, {ID: "b"}, {ID: "c"}}, false, "Initial[2]: peer b named twice"},
		{"empty", []node.PeerAddrs{{ID: "a"}, {ID: ""}}, false, "Initial[1]: empty peer id"},
		{"invalid", []node.PeerAddrs{{ID: "a"}, {ID: "bad id"}}, false, `Initial[1]: "bad id" is not a peer id`},
		{"founder", []node.PeerAddrs{{ID: "a"}}, true, "exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := node.DefaultNodeConfig("a", "1")
			cfg.Initial, cfg.Founder = tc.initial, tc.founder
			cfg.ValidID = func(id string) bool { return !strings.Contains(id, " ") }
			_, err := node.NewNode(cfg, nil, nodetest.Epoch)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewNode: %v; want an error with %q", err, tc.want)
			}
		})
	}
}
