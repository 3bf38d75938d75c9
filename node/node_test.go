package node

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// harness drives one Node the way the runtime does, with an in-memory WAL
// and handlers run inline: every Run finishes at the next step.
type harness struct {
	tb      testing.TB
	log     *wal.Memory
	n       *Node
	now     time.Time
	replies map[uint64]Reply
	runs    []Run
	fail    map[shard.TaskID]bool // tasks whose handler fails
	started map[shard.TaskID]int
	boot    int
	notify  []NotifyJob // webhook deliveries handed out, for the test to answer
	ran     []Run       // every run step finished, in order
	// snapshots taken and their bytes, and the entry bytes persisted
	snaps, snapBytes, entryBytes int
}

func newHarness(tb testing.TB, partitions int) *harness {
	h := &harness{tb: tb, log: wal.NewMemory(), now: time.Unix(1_700_000_000, 0).UTC(),
		replies: map[uint64]Reply{}, fail: map[shard.TaskID]bool{}, started: map[shard.TaskID]int{}}
	h.start(partitions)
	return h
}

func (h *harness) start(partitions int) {
	h.tb.Helper()
	h.boot++
	cfg := DefaultNodeConfig("p1", fmt.Sprint(h.boot))
	cfg.Partitions = partitions
	cfg.Slots = 2
	cfg.SnapshotEvery = 50
	cfg.Rand = rand.New(rand.NewPCG(1, uint64(h.boot)))
	states := map[uint32]wal.PartitionState{}
	parts, err := h.log.Partitions()
	if err != nil {
		h.tb.Fatal(err)
	}
	for _, p := range parts {
		if states[p], err = h.log.Load(p); err != nil {
			h.tb.Fatal(err)
		}
	}
	h.n, err = NewNode(cfg, states, h.now)
	if err != nil {
		h.tb.Fatal(err)
	}
	h.runs = nil
	h.stabilize()
}

// stabilize runs Ready/Advance through the shared Driver until the node
// has nothing left to do, without running handlers.
func (h *harness) stabilize() {
	d := Driver{Node: h.n, IO: harnessIO{h}, MaxRounds: 1000}
	if err := d.Drive(); err != nil {
		h.tb.Fatal(err)
	}
}

// harnessIO is the harness's DriverIO: an in-memory WAL, runs and webhook
// calls kept for the test, no peers.
type harnessIO struct{ h *harness }

func (io harnessIO) Now() time.Time   { return io.h.now }
func (io harnessIO) Send([]Envelope)  {}
func (io harnessIO) Gossip([]Message) {}
func (io harnessIO) Start(rd *Ready) {
	io.h.runs = append(io.h.runs, rd.Run...)
	io.h.notify = append(io.h.notify, rd.Notify...)
}
func (io harnessIO) Persist(b *wal.Batch, sync bool) error {
	h := io.h
	if err := h.log.Append(b); err != nil {
		return err
	}
	for _, u := range b.Updates {
		if !raft.IsEmptySnap(u.Snapshot) {
			h.snaps++
			h.snapBytes += len(u.Snapshot.Data)
		}
		for _, e := range u.Entries {
			h.entryBytes += len(e.Data)
		}
	}
	if sync {
		return h.log.Sync()
	}
	return nil
}

func (io harnessIO) Deliver(rd *Ready) error {
	for _, r := range rd.Replies {
		io.h.replies[r.Req] = r
	}
	return nil
}

// step finishes every started handler, then stabilizes.
func (h *harness) step() {
	runs := h.runs
	h.runs = nil
	for _, r := range runs {
		h.started[r.Task]++
		h.ran = append(h.ran, r)
		o := shard.Outcome{Task: r.Task, Round: r.Round, OK: !h.fail[r.Task], Result: r.Payload, Error: "boom"}
		_ = h.n.Report(o)
	}
	h.stabilize()
}

func (h *harness) tick(d time.Duration) {
	h.now = h.now.Add(d)
	h.n.Tick(h.now)
	h.stabilize()
}

func (h *harness) submit(spec shard.GroupSpec) Reply {
	h.tb.Helper()
	req := h.n.NextRequest()
	h.n.Submit(req, &spec)
	h.stabilize()
	r, ok := h.replies[req]
	if !ok {
		// A creation held back for its first runs (defer.go), which the
		// harness does not run: it goes alone when its time is up.
		h.tick(h.n.cfg.LeaseDefer)
		r, ok = h.replies[req]
	}
	if !ok {
		h.tb.Fatalf("no reply to submit of %s", spec.ID)
	}
	return r
}

func (h *harness) groupState(g shard.GroupID) shard.GroupState {
	h.tb.Helper()
	st, err := h.n.GroupState(g)
	if err != nil {
		h.tb.Fatalf("GroupState(%s): %v", g, err)
	}
	return st
}

func echoTasks(n int) []shard.TaskSpec {
	out := make([]shard.TaskSpec, n)
	for i := range out {
		out[i] = shard.TaskSpec{Name: fmt.Sprint(i), Handler: "echo", Payload: []byte(fmt.Sprint(i))}
	}
	return out
}

// TestSnapshotsScaleWithState runs a group far bigger than SnapshotEvery
// entries' worth: the partition still snapshots and compacts, but encodes
// at most about twice what its log took, not its whole state every 50
// entries (about 80 times here).
func TestSnapshotsScaleWithState(t *testing.T) {
	h := newHarness(t, 1)
	if r := h.submit(shard.GroupSpec{ID: "big", Mode: shard.ModeParallel, Tasks: echoTasks(2000)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	base, baseBytes := h.snaps, h.snapBytes
	for i := 0; h.groupState("big") == shard.GroupRunning; i++ {
		if i > 10_000 {
			t.Fatal("group does not finish")
		}
		h.step()
	}
	snaps, bytes := h.snaps-base, h.snapBytes-baseBytes
	applied, _ := h.n.Applied(0)
	t.Logf("%d entries, %d entry bytes, %d snapshots of %d bytes", applied, h.entryBytes, snaps, bytes)
	if snaps == 0 {
		t.Fatal("no snapshot while the group ran: the log is never compacted")
	}
	if bytes > 2*h.entryBytes+h.snapBytes/max(h.snaps, 1) {
		t.Errorf("snapshots encoded %d bytes for %d bytes of entries: more than twice", bytes, h.entryBytes)
	}
	if want := int(applied) / 50; snaps*4 > want {
		t.Errorf("%d snapshots over %d entries: the state's size did not space them out", snaps, applied)
	}
	h.start(1) // and a restart reads the snapshot and the log after it
	if got := h.groupState("big"); got != shard.GroupSucceeded {
		t.Fatalf("after restart: %v", got)
	}
}

func TestNodeRunsGroup(t *testing.T) {
	h := newHarness(t, 8)
	r := h.submit(shard.GroupSpec{ID: "g1", Mode: shard.ModeParallel, Tasks: echoTasks(10)})
	if r.Err != nil || !r.Submit.Created || len(r.Submit.Tasks) != 10 {
		t.Fatalf("submit reply = %+v", r)
	}
	for i := 0; i < 20 && h.groupState("g1") == shard.GroupRunning; i++ {
		if len(h.runs) > 2 {
			t.Fatalf("%d tasks running on 2 slots", len(h.runs))
		}
		h.step()
	}
	if st := h.groupState("g1"); st != shard.GroupSucceeded {
		t.Fatalf("group = %v; want SUCCEEDED", st)
	}
	v, _ := h.n.Task("g1.3")
	if string(v.Result) != "3" || v.Holder != h.n.Holder() {
		t.Errorf("task = %+v", v)
	}
	again := h.submit(shard.GroupSpec{ID: "g1", Mode: shard.ModeParallel, Tasks: echoTasks(10)})
	if again.Err != nil || again.Submit.Created || len(again.Submit.Tasks) != 10 {
		t.Errorf("idempotent repeat reply = %+v; want Created=false and the same ids", again)
	}
}

func TestNodeInvalidSubmitCreatesNothing(t *testing.T) {
	h := newHarness(t, 4)
	r := h.submit(shard.GroupSpec{ID: "bad", Mode: shard.ModeDAG, Tasks: []shard.TaskSpec{
		{Name: "a", Handler: "echo", Deps: []string{"b"}}, {Name: "b", Handler: "echo", Deps: []string{"a"}},
	}})
	if r.Err == nil {
		t.Fatal("cyclic dag accepted")
	}
	if _, err := h.n.Group("bad"); err == nil {
		t.Fatal("rejected group exists")
	}
}

// TestNodeRestart crashes the WAL (dropping the unsynced tail) mid-run and
// restarts: acknowledged groups are there, RUNNING tasks run again in the
// next round, finished tasks keep their results, and snapshots + log replay
// rebuild the same state. A run whose lease was still held back (defer.go)
// left nothing in the log: its task was READY there and runs again in the
// same round, under the new boot's holder.
func TestNodeRestart(t *testing.T) {
	h := newHarness(t, 4)
	for g := range 20 {
		h.submit(shard.GroupSpec{ID: shard.GroupID(fmt.Sprint("g", g)), Mode: shard.ModeParallel, Tasks: echoTasks(5)})
	}
	for range 10 {
		h.step()
	}
	running := append([]Run(nil), h.runs...)
	if len(running) == 0 {
		t.Fatal("nothing running at the crash")
	}
	logged := map[shard.TaskID]bool{}
	for _, r := range running {
		v, _ := h.n.Task(r.Task)
		logged[r.Task] = v.State == shard.Running && v.Round == r.Round
	}
	holder := h.n.Holder()
	before, _ := h.n.Task("g0.0")
	h.log.Crash()
	h.start(4)
	after, err := h.n.Task("g0.0")
	if err != nil || after.State != before.State || string(after.Result) != string(before.Result) {
		t.Fatalf("after restart g0.0 = %+v, %v; want %+v", after, err, before)
	}
	for range 100 {
		h.step()
	}
	for g := range 20 {
		if st := h.groupState(shard.GroupID(fmt.Sprint("g", g))); st != shard.GroupSucceeded {
			t.Fatalf("g%d = %v after restart", g, st)
		}
	}
	for _, r := range running {
		v, _ := h.n.Task(r.Task)
		switch {
		case logged[r.Task] && v.Round <= r.Round:
			t.Errorf("%s ran in round %d before the crash and %d after; want a later round", r.Task, r.Round, v.Round)
		case !logged[r.Task] && (v.Round < r.Round || v.Holder == holder):
			t.Errorf("%s ran in round %d (lease held back) before the crash, round %d holder %s after; want the new holder", r.Task, r.Round, v.Round, v.Holder)
		}
	}
}

func TestNodeRetryAndDelay(t *testing.T) {
	h := newHarness(t, 2)
	spec := shard.TaskSpec{Handler: "fail", Retry: shard.Retry{MaxAttempts: 2, Backoff: time.Second, MaxBackoff: time.Second}}
	h.fail["f.0"] = true
	h.submit(shard.GroupSpec{ID: "f", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{spec}})
	h.submit(shard.GroupSpec{ID: "d", Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "echo", Delay: 2 * time.Second}}})
	h.step()
	if v, _ := h.n.Task("f.0"); v.State != shard.Waiting {
		t.Fatalf("after first failure: %v; want WAITING", v.State)
	}
	if h.started["d.0"] != 0 {
		t.Fatal("delayed task started early")
	}
	for range 25 {
		h.tick(100 * time.Millisecond)
		h.step()
	}
	if v, _ := h.n.Task("f.0"); v.State != shard.Failed || v.Attempt != 2 {
		t.Errorf("f.0 = %v attempt %d; want FAILED after 2", v.State, v.Attempt)
	}
	// Each run says which attempt it is (exec and http pass it on).
	var attempts []int
	for _, r := range h.ran {
		if r.Task == "f.0" {
			attempts = append(attempts, r.Attempt)
		}
	}
	if !slices.Equal(attempts, []int{0, 1}) {
		t.Errorf("f.0 ran with Run.Attempt %v; want [0 1] (attempts made before each)", attempts)
	}
	if v, _ := h.n.Task("d.0"); v.State != shard.Succeeded {
		t.Errorf("d.0 = %v; want SUCCEEDED", v.State)
	}
}

// TestSlotsFreedAfterDuplicateSubmit: a submission repeated before the
// first applied proposes its initial leases twice; once the group ran,
// every slot is free again (the second lease's slot leaked, and a peer
// whose slots all leak never steals again).
func TestSlotsFreedAfterDuplicateSubmit(t *testing.T) {
	h := newHarness(t, 1)
	h.tick(time.Second)
	spec := shard.GroupSpec{ID: "dup", Key: "k", Mode: shard.ModeParallel, Tasks: echoTasks(1)}
	for range 2 {
		s := spec
		s.Tasks = slices.Clone(spec.Tasks)
		h.n.Submit(h.n.NextRequest(), &s)
	}
	h.stabilize()
	for i := 0; h.groupState("dup") == shard.GroupRunning; i++ {
		if i > 100 {
			t.Fatal("group does not finish")
		}
		h.step()
	}
	if st := h.n.Stats(); st.Busy != 0 || st.Proposed != 0 || st.Running != 0 {
		t.Fatalf("after the group: busy %d, proposed %d, running %d; want all 0", st.Busy, st.Proposed, st.Running)
	}
}

// TestSnapshotsBoundLogBytes: a partition that takes few entries, but big
// ones, snapshots and compacts once they hold snapshotLogBytes, however
// far it is from SnapshotEvery entries: its log in memory stays bounded.
func TestSnapshotsBoundLogBytes(t *testing.T) {
	h := newHarness(t, 1)
	h.n.cfg.SnapshotEvery = 1 << 40
	base := h.snaps
	payload := make([]byte, 64<<10)
	for i := range 40 { // 40 entries of 64 KiB: 2.5 MiB of log
		tasks := echoTasks(1)
		tasks[0].Payload = payload
		if r := h.submit(shard.GroupSpec{ID: shard.GroupID(fmt.Sprint("big", i)), Mode: shard.ModeSingle, Tasks: tasks}); r.Err != nil {
			t.Fatal(r.Err)
		}
		h.step()
	}
	if h.snaps == base {
		t.Fatalf("no snapshot after %d bytes of entries: the log in memory grows without bound", h.entryBytes)
	}
	if kept := h.n.parts[0].logBytes; kept >= 2*snapshotLogBytes {
		t.Errorf("%d bytes of log kept since the last snapshot; want under %d", kept, 2*snapshotLogBytes)
	}
}

// drainingLoneNode returns a harness whose lone node drains, drained
// already, and one of its partitions.
func drainingLoneNode(t *testing.T) (*harness, *partition) {
	t.Helper()
	h := newHarness(t, 2)
	h.tick(10 * time.Millisecond)
	h.n.Drain()
	if done, what := h.n.Drained(); !done {
		t.Fatalf("a lone idle node draining: Drained() = false, %q", what)
	}
	return h, h.n.parts[h.n.held[0]]
}

// A draining node that is an outgoing voter of a joint configuration is
// not drained: the partition cannot leave it without its vote.
func TestDrainWaitsForJointConfiguration(t *testing.T) {
	h, p := drainingLoneNode(t)
	conf := p.conf
	p.conf = &pb.ConfState{Voters: []uint64{h.n.raftID, 7, 8}, VotersOutgoing: []uint64{h.n.raftID}}
	if done, what := h.n.Drained(); done || what != "a configuration change needs its vote" {
		t.Fatalf("outgoing voter of a joint configuration: Drained() = %v, %q", done, what)
	}
	p.conf = conf
	if done, _ := h.n.Drained(); !done {
		t.Fatal("not drained after the joint configuration was left")
	}
}

// A draining voter whose partition's leader has not committed an entry of
// its own term is not drained: that leader may still count a joint
// configuration this node left already (it committed the leaving entry
// as the leader before, then handed the leadership over), and commits
// nothing, the leaving entry included, without this node's vote.
func TestDrainWaitsForLeaderCommitInTerm(t *testing.T) {
	h, p := drainingLoneNode(t)
	st := p.rn.BasicStatus()
	term, last := st.Term, st.Commit
	const leader = 99
	// Another leader of a later term, heard through a heartbeat: it has
	// committed nothing of its term yet.
	if err := p.rn.Step(pb.Message{Type: pb.MsgHeartbeat, From: leader,
		To: h.n.raftID, Term: term + 1, Commit: last}); err != nil {
		t.Fatal(err)
	}
	h.n.markDirty(p.id) // stepped here, not through Step: the node's Ready must take it
	h.stabilize()
	if done, what := h.n.Drained(); done || what != "the leader has not committed in its term" {
		t.Fatalf("the leader of term %d has committed nothing of it: Drained() = %v, %q", term+1, done, what)
	}
	// Its first entry, committed.
	if err := p.rn.Step(pb.Message{Type: pb.MsgApp, From: leader,
		To: h.n.raftID, Term: term + 1, LogTerm: term, Index: last,
		Entries: []pb.Entry{{Term: term + 1, Index: last + 1}}, Commit: last + 1}); err != nil {
		t.Fatal(err)
	}
	h.n.markDirty(p.id)
	h.stabilize()
	if done, what := h.n.Drained(); !done {
		t.Fatalf("the leader committed an entry of its term: Drained() = false, %q", what)
	}
}
