package node

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// A peer that holds the swarm key can send any grant, for any task, with
// any round. Only the owner's grants start a run (a forged one could start
// a task whose dependencies have not finished), and none keeps the task's
// committed lease from running: no lease expires while its holder lives,
// so the task stayed RUNNING on its live owner for good (found by needle
// hostile). A grant for a thief's former run: restarted_thief_grant.txt.
func TestForgedGrantKeepsNoLeaseFromRunning(t *testing.T) {
	for _, tc := range []struct {
		name string
		led  bool // the forged grant reaches the node while it leads g's partition
	}{{"to its leader", true}, {"before it led", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1)
			h.tick(time.Second)
			beatFrom(t, h, "stranger")
			p := h.n.parts[h.n.PartitionOf("g")]
			p.serving = tc.led
			for _, round := range []shard.Round{1, math.MaxUint64} {
				forged := Message{Type: MsgGrant, From: "stranger", Holder: h.n.Holder(),
					Grants: []Grant{{Task: "g.0", Round: round, Handler: "echo", Payload: []byte("forged"), Timeout: time.Second}}}
				if err := h.n.Step("stranger", forged); err != nil {
					t.Fatal(err)
				}
			}
			h.stabilize()
			forgedRuns := len(h.runs)
			if forgedRuns != 0 {
				t.Fatalf("a grant from a peer that does not own the partition ran: %v", h.runs)
			}
			p.serving = true
			if r := h.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(1)}); r.Err != nil {
				t.Fatal(r.Err)
			}
			for i := 0; i < 10 && h.groupState("g") == shard.GroupRunning; i++ {
				h.step()
			}
			if st := h.groupState("g"); st != shard.GroupSucceeded {
				v, _ := h.n.Task("g.0")
				t.Fatalf("group %v after a forged grant (%d forged runs); task %+v", st, forgedRuns, v)
			}
			if v, _ := h.n.Task("g.0"); string(v.Result) != "0" {
				t.Fatalf("result %q, want the task's own payload", v.Result)
			}
		})
	}
}

// beatFrom steps a heartbeat from peer id into h's one-partition node,
// which makes id a member of its mesh.
func beatFrom(t *testing.T, h *harness, id string) {
	t.Helper()
	hb := Message{Type: MsgHeartbeat, From: id, Heartbeat: &Heartbeat{Boot: "1", Partitions: 1,
		Load: Load{Slots: 2}, Members: []string{"p1", id}}}
	if err := h.n.Step(id, hb); err != nil {
		t.Fatal(err)
	}
}

// A grant can pass grantable and still not be the lease's: from a peer
// this node took for the owner (a keyed host the ring made one), with a
// round from the future. The committed lease runs all the same.
func TestClaimedGrantYieldsToCommittedLease(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	if !h.n.claimGrant("g.0", math.MaxUint64, time.Time{}, "stranger") {
		t.Fatal("a first claim was refused")
	}
	if r := h.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(1)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := 0; i < 10 && h.groupState("g") == shard.GroupRunning; i++ {
		h.step()
	}
	if st := h.groupState("g"); st != shard.GroupSucceeded {
		v, _ := h.n.Task("g.0")
		t.Fatalf("group %v after a stranger's claim; task %+v", st, v)
	}
	if h.n.claimLease("g.0", 1, time.Time{}, h.n.Holder()) {
		t.Fatal("a committed lease started twice")
	}
}

// A run of a later round, started by a grant that was not the lease's
// (forged, with a round from the future), is under way when the committed
// lease of an earlier round applies: the lease runs all the same, since
// the later run's outcome is stale against it, and the later run's
// outcome is dropped here. Before, the lease waited for the run under
// way, whose outcome the owner refused, and the task stayed RUNNING until
// its timeout (needle hostile, seed 7).
func TestLaterForgedRunYieldsToCommittedLease(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	const forged = shard.Round(7)
	if !h.n.claimGrant("g.0", forged, time.Time{}, "stranger") {
		t.Fatal("a first claim was refused")
	}
	h.n.busy++
	h.n.startRun("g.0", forged) // its handler is running
	if !h.n.claimLease("g.0", 1, time.Time{}, "owner/1") {
		t.Fatal("the committed lease of round 1 did not start while a forged run of round 7 is under way")
	}
	h.n.busy++
	h.n.startRun("g.0", 1)
	if err := h.n.Report(shard.Outcome{Task: "g.0", Round: forged, OK: true}); !errors.Is(err, shard.ErrStaleRound) {
		t.Fatalf("the forged run's outcome: %v, want it dropped as stale", err)
	}
	if r, ok := h.n.running["g.0"]; !ok || r != 1 {
		t.Fatalf("running %v %v after the forged run ended, want round 1 still running", r, ok)
	}
	if h.n.claimLease("g.0", 1, time.Time{}, "owner/1") {
		t.Fatal("the committed lease started twice")
	}
}

// A lease that applies without taking spends no round: a task canceled
// while its lease was held back (its run already started and done) is
// READY in round 0 again after a retry, and its next lease is round 1
// again. That lease must run. The claim of the first lease's run kept it
// from starting, and the task stayed RUNNING on its live owner until its
// timeout (needle hostile, seed 7: a pipeline canceled and retried).
func TestRetriedTaskRunsTheSameRoundAgain(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	spec := shard.GroupSpec{ID: "g", Mode: shard.ModeDAG, Tasks: []shard.TaskSpec{
		{Name: "a", Handler: "echo", Payload: []byte("1")},
		{Name: "b", Handler: "echo", Payload: []byte("2"), Deps: []string{"a"}},
	}}
	if r := h.submit(spec); r.Err != nil {
		t.Fatal(r.Err)
	}
	h.step() // a runs and succeeds; b's lease is held back, its run started
	if len(h.runs) != 1 || h.runs[0].Task != "g.1" || h.runs[0].Round != 1 {
		t.Fatalf("runs %+v, want g.1's in round 1", h.runs)
	}
	// The cancel goes into the log ahead of b's held lease.
	req := h.n.NextRequest()
	h.n.Cancel(req, "g", "", "op")
	h.stabilize()
	if st := h.groupState("g"); st != shard.GroupCanceled {
		t.Fatalf("group %v after the cancel", st)
	}
	h.step() // b's run ends: its lease and outcome apply to a canceled task
	if v, _ := h.n.Task("g.1"); v.State != shard.Canceled || v.Round != 0 {
		t.Fatalf("g.1 %v round %d, want CANCELED in round 0", v.State, v.Round)
	}
	req = h.n.NextRequest()
	h.n.Retry(req, "g", "", "op", "")
	h.stabilize()
	for i := 0; i < 10 && h.groupState("g") == shard.GroupRunning; i++ {
		h.tick(h.n.cfg.LeaseDefer)
		h.step()
	}
	if st := h.groupState("g"); st != shard.GroupSucceeded {
		v, _ := h.n.Task("g.1")
		t.Fatalf("group %v after the retry; g.1 %v round %d (runs %d)", st, v.State, v.Round, h.started["g.1"])
	}
}

// A thief that holds no replica of a task's partition learns of its leases
// only from grants. A grant of a round it ran before, with another expiry,
// is another lease of that round (the one it ran took nothing: its task
// was canceled first, then retried), and runs; the same grant again does
// not, nor one whose round's run is under way or whose outcome waits in
// the outbox (it counts for the new lease).
func TestRegrantedRoundRuns(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	first, second := h.now.Add(time.Minute), h.now.Add(2*time.Minute)
	if !h.n.claimGrant("g.0", 1, first, "owner") {
		t.Fatal("a first grant was refused")
	}
	if h.n.claimGrant("g.0", 1, first, "owner") {
		t.Fatal("the same grant started twice")
	}
	if !h.n.claimGrant("g.0", 1, second, "owner") {
		t.Fatal("another lease of the same round, its run over, did not start: the retried task would stay RUNNING")
	}
	h.n.busy++
	h.n.startRun("g.0", 1)
	if h.n.claimGrant("g.0", 1, second.Add(time.Minute), "owner") {
		t.Fatal("a lease of a round whose run is under way started a second run")
	}
	h.n.endRun("g.0")
	h.n.forward(shard.Outcome{Task: "g.0", Round: 1, Holder: h.n.Holder(), OK: true})
	if h.n.claimGrant("g.0", 1, second.Add(2*time.Minute), "owner") {
		t.Fatal("a lease of a round whose outcome waits in the outbox started a second run")
	}
	if h.n.claimGrant("g.0", 0, second.Add(3*time.Minute), "owner") {
		t.Fatal("a grant of an earlier round started")
	}
}

// A thief that holds a replica may apply a lease before its grant arrives
// (the leader committed it first): the grant, late, is of the same lease
// and does not start it again. A committed lease of a round that a grant
// of another lease started (that lease took nothing, and the task was
// retried) starts, unless that run is still pending.
func TestClaimsTellLeasesOfOneRound(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	x, y := h.now.Add(time.Minute), h.now.Add(2*time.Minute)
	if !h.n.claimLease("a.0", 1, x, "owner#1") {
		t.Fatal("a committed lease did not start")
	}
	if h.n.claimGrant("a.0", 1, x, "owner") {
		t.Fatal("the late grant of an applied lease started it again")
	}
	if !h.n.claimGrant("b.0", 1, x, "owner") {
		t.Fatal("a grant did not start")
	}
	if h.n.claimLease("b.0", 1, x, "owner#1") {
		t.Fatal("the committed lease of a granted run started it again")
	}
	if !h.n.claimLease("b.0", 1, y, "owner#1") {
		t.Fatal("another lease of the round a grant started (that one took nothing) did not start")
	}
	if !h.n.claimGrant("c.0", 1, x, "owner") {
		t.Fatal("a grant did not start")
	}
	h.n.forward(shard.Outcome{Task: "c.0", Round: 1, Holder: h.n.Holder(), OK: true})
	if h.n.claimLease("c.0", 1, y, "owner#1") {
		t.Fatal("a lease of a round whose outcome waits in the outbox started a second run")
	}
	// The owner's own lease held back and lost, its run done and the
	// outcome proposed: the lease proposed again for the round (another
	// expiry) applies before the outcome, which is then accepted under it
	// (simulate --workers 2 --seed 45 of the mixed workload with retries:
	// a second run started in the Ready that reported the task SUCCEEDED).
	if !h.n.claimLease("d.0", 1, x, h.n.Holder()) {
		t.Fatal("a lease did not start")
	}
	h.n.localOut["d.0"] = shard.Outcome{Task: "d.0", Round: 1, Holder: h.n.Holder(), OK: true}
	if h.n.claimLease("d.0", 1, y, h.n.Holder()) {
		t.Fatal("a lease of a round whose outcome this owner proposed started a second run")
	}
	delete(h.n.localOut, "d.0") // the outcome applied, taking nothing
	if !h.n.claimLease("d.0", 1, y, h.n.Holder()) {
		t.Fatal("a lease of a round whose outcome took nothing did not start")
	}
}

// A lease that applies without taking (its task was canceled before it)
// voids its claim while its run goes on here; a grant of the same round
// that arrives then must not start a second run: two slots were counted
// for one running entry, and one was never freed (simulate seed 48, with
// a victim's refusals sent at once).
func TestGrantOfARoundRunningHereStartsNothing(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	exp := h.n.now.Add(time.Minute)
	if !h.n.claimLease("g.0", 2, exp, "") {
		t.Fatal("a first lease was refused")
	}
	h.n.busy++
	h.n.startRun("g.0", 2)
	h.n.voidClaim("g.0", 2)
	if h.n.claimGrant("g.0", 2, exp, "p2") {
		t.Error("a grant of the round running here was claimed")
	}
	if h.n.claimGrant("g.0", 2, exp.Add(time.Second), "p2") {
		t.Error("a grant of another lease of the round running here was claimed")
	}
	if !h.n.claimGrant("g.0", 3, exp, "p2") {
		t.Error("a grant of the next round was refused")
	}
}

// A replica that knows no leader of a partition yet (a peer just
// restarted, catching up) takes no grant for it from the message: its
// leases start here when they apply (applyLease). Until then the tasks
// keep the room the request reserved, up to what it asked for. Before, a
// grant message ended the reservation whatever it started, the thief
// asked again at once, and a restarted peer caught up on 955 runs for 387
// places (bench/chaos/restart.py).
func TestGrantNotTakenKeepsItsRoom(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	beatFrom(t, h, "victim")
	h.n.parts[h.n.PartitionOf("g")].serving = false // its replica knows no other leader
	if _, ok := h.n.GrantSource(h.n.PartitionOf("g")); !ok {
		t.Fatal("the node holds no replica of g's partition")
	}
	grant := func(tasks ...shard.TaskID) {
		t.Helper()
		m := Message{Type: MsgGrant, From: "victim", Holder: h.n.Holder()}
		for _, id := range tasks {
			m.Grants = append(m.Grants, Grant{Task: id, Round: 1, Handler: "echo", Timeout: time.Second})
		}
		if err := h.n.Step("victim", m); err != nil {
			t.Fatal(err)
		}
	}
	h.n.steal.asked("victim", 2, h.n.now)
	grant("g.0", "g.1", "g.2")
	if got := h.n.steal.reserved(h.n.now); got != 2 {
		t.Errorf("reserved after a grant this replica did not take: %d tasks; want the 2 asked for", got)
	}
	if h.n.busy != 0 {
		t.Errorf("busy %d; want 0: nothing started from the message", h.n.busy)
	}
	h.n.steal.asked("victim", 1, h.n.now)
	grant() // the answer to a later request ends that request only
	if got := h.n.steal.reserved(h.n.now); got != 2 {
		t.Errorf("reserved %d after the next answer; want the 2 still to apply", got)
	}
	h.n.steal.took("victim") // one of them applied here and started
	if got := h.n.steal.reserved(h.n.now); got != 1 {
		t.Errorf("reserved %d after one applied; want 1", got)
	}
	h.tick(askReserve)
	if got := h.n.steal.reserved(h.n.now); got != 0 {
		t.Errorf("reserved %d after askReserve; want 0", got)
	}
	grant("g.3") // asked for nothing: reserves nothing
	if got := h.n.steal.reserved(h.n.now); got != 0 {
		t.Errorf("reserved %d after an unasked grant; want 0", got)
	}
}
