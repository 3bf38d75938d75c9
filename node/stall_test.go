package node

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A partition of two voters whose other voter died cannot commit, and no
// other voter can be elected: its leader stops serving (stalled) instead
// of taking writes that hang, so requests fail at once and the partition
// counts as unowned (/healthz not ready); it serves again when the voter
// comes back.
func TestLeaderWithoutMajorityStalls(t *testing.T) {
	const parts = 4
	c := newCluster(t, 2, parts) // R=3 on two peers: two voters each
	c.run(15 * time.Second)
	n1 := c.node("n1").n
	part, follower := c.ledBy("n1", parts)
	if follower != "n2" {
		t.Fatalf("follower = %s", follower)
	}
	if n := n1.Stalled(); n != 0 {
		t.Fatalf("Stalled = %d with both voters up", n)
	}
	var logs bytes.Buffer
	n1.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c.node("n2").down = true
	c.run(2 * n1.cfg.DeadAfter)
	if n := n1.Stalled(); n == 0 {
		t.Fatal("no partition stalled with its other voter dead")
	}
	// The warning names the voters as the operator knows them: peer ids.
	_, after, _ := strings.Cut(logs.String(), "partition leader stalled")
	if line, _, _ := strings.Cut(after, "\n"); !strings.Contains(line, `voters="[n1 n2]"`) {
		t.Fatalf("stall logged %q; want its voters as peer ids [n1 n2]", line)
	}
	if n1.Unsettled() == 0 {
		t.Fatal("Unsettled = 0 with stalled partitions: /healthz would say ready")
	}
	if got, dead := n1.LostMajority(); got != parts || !slices.Equal(dead, []string{"n2"}) {
		t.Fatalf("LostMajority = %d %v with the other of two voters dead; want %d [n2]", got, dead, parts)
	}
	g := groupIn(t, n1, part)
	if gotPart, dead := n1.LostMajorityOf(g); gotPart != part || !slices.Equal(dead, []string{"n2"}) {
		t.Fatalf("LostMajorityOf(%s) = %d %v with the other of two voters dead; want %d [n2]", g, gotPart, dead, part)
	}
	if n1.Serving(g) {
		t.Fatalf("n1 still serves partition %d without a majority", part)
	}
	req := n1.NextRequest()
	n1.Submit(req, &shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(1)})
	c.step(10 * time.Millisecond)
	if r, ok := c.node("n1").replies[req]; !ok || !errors.Is(r.Err, ErrUnavailable) {
		t.Fatalf("submit to a stalled partition = %+v (answered %v); want ErrUnavailable at once", r, ok)
	}

	c.node("n2").down = false
	for i := 0; n1.Stalled() > 0; i++ {
		if i > 3000 {
			t.Fatalf("%d partitions still stalled 30 s after the voter came back", n1.Stalled())
		}
		c.step(10 * time.Millisecond)
	}
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(1)}); r.Err != nil {
		t.Fatalf("submit after the voter came back = %v", r.Err)
	}
}

// Two of three voters dead together: the leaders abdicate instead of
// stalling (Stalled stays 0), so LostMajority is what tells /healthz that
// the partitions lost their majority, and names the dead voters: the
// peers to restart or, their disks lost, to forget with --unsafe-recover.
// One voter of three dead loses no majority.
func TestLostMajorityCountsAbdicatedPartitions(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	n1 := c.node("n1").n
	if got, dead := n1.LostMajority(); got != 0 || len(dead) != 0 {
		t.Fatalf("LostMajority = %d %v with every voter up", got, dead)
	}
	g := groupIn(t, n1, 1)
	c.node("n3").down = true
	c.run(2 * n1.cfg.DeadAfter)
	if got, dead := n1.LostMajority(); got != 0 || len(dead) != 0 {
		t.Fatalf("LostMajority = %d %v with one voter of three dead", got, dead)
	}
	if _, dead := n1.LostMajorityOf(g); dead != nil {
		t.Fatalf("LostMajorityOf(%s) = %v with one voter of three dead; want none", g, dead)
	}
	c.node("n2").down = true
	c.run(2 * n1.cfg.DeadAfter)
	got, dead := n1.LostMajority()
	if got != parts || !slices.Equal(dead, []string{"n2", "n3"}) {
		t.Fatalf("LostMajority = %d %v with two voters of three dead; want %d [n2 n3]", got, dead, parts)
	}
	if part, dead := n1.LostMajorityOf(g); part != 1 || !slices.Equal(dead, []string{"n2", "n3"}) {
		t.Fatalf("LostMajorityOf(%s) = %d %v with two voters of three dead; want 1 [n2 n3]", g, part, dead)
	}
	if n1.Unsettled() == 0 {
		t.Fatal("Unsettled = 0 with no majority anywhere")
	}
	c.node("n2").down = false
	for i := 0; ; i++ {
		if got, _ := n1.LostMajority(); got == 0 {
			break
		}
		if i > 3000 {
			t.Fatal("partitions still without a majority 30 s after a voter came back")
		}
		c.step(10 * time.Millisecond)
	}
}

// A peer that does not hold a partition judges it by the replicas the
// ring places it on: with two of those three dead, a request it forwards
// finds no owner, and LostMajorityOf names the dead ones for the 503.
func TestLostMajorityOfAPartitionHeldElsewhere(t *testing.T) {
	const parts = 8
	c := newCluster(t, 4, parts)
	c.run(15 * time.Second)
	n1 := c.node("n1").n
	part := -1
	for i := range parts {
		if n1.parts[i] == nil {
			part = i
			break
		}
	}
	if part < 0 {
		t.Fatal("n1 holds every partition of a 4-peer mesh with 3 replicas")
	}
	var others []string
	for _, id := range n1.mesh.ring.Replicas(part) {
		others = append(others, string(id))
	}
	slices.Sort(others)
	g := groupIn(t, n1, part)
	if _, dead := n1.LostMajorityOf(g); dead != nil {
		t.Fatalf("LostMajorityOf(%s) = %v with every replica up", g, dead)
	}
	c.node(others[0]).down = true
	c.run(2 * n1.cfg.DeadAfter)
	if _, dead := n1.LostMajorityOf(g); dead != nil {
		t.Fatalf("LostMajorityOf(%s) = %v with one replica of three dead", g, dead)
	}
	c.node(others[1]).down = true
	c.run(2 * n1.cfg.DeadAfter)
	if got, dead := n1.LostMajorityOf(g); got != part || !slices.Equal(dead, others[:2]) {
		t.Fatalf("LostMajorityOf(%s) = %d %v with two replicas of three dead; want %d %v", g, got, dead, part, others[:2])
	}
}
