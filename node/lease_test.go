package node

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
)

// ledByN1 settles 3 peers over 4 partitions for settle and returns n1, a
// partition it leads and a voter of it.
func ledByN1(t *testing.T, settle time.Duration) (*cluster, *Node, *partition, uint64) {
	t.Helper()
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(settle)
	part, follower := c.ledBy("n1", parts)
	l := c.node("n1").n
	return c, l, l.parts[part], RaftID(follower)
}

// leaseFixture is ledByN1 with the partition awake and no answers counted.
func leaseFixture(t *testing.T) (*cluster, *Node, *partition, uint64) {
	t.Helper()
	c, l, p, v := ledByN1(t, 15*time.Second)
	p.quiesced = false
	clear(p.acked)
	return c, l, p, v
}

func stamped(at time.Time) *pb.Message {
	return &pb.Message{Type: pb.MsgHeartbeatResp, Context: binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano()))}
}

// A voter's answer to a stamped heartbeat holds the read lease for
// leaseSpan after the heartbeat left, however late the answer came: a
// follower's promise ran from the heartbeat's arrival, which was after it
// left. An answer to a heartbeat sent half a second ago holds 0.3 s more,
// not the 1.5 s an answer's arrival used to give. The stamp is taken off before Raft sees
// it (Raft would read it as a read index).
func TestLeaseFromSendTime(t *testing.T) {
	_, l, p, v := leaseFixture(t)
	if l.leaseHeld(p) {
		t.Fatal("lease held with no answers")
	}
	const ago = 500 * time.Millisecond
	m := stamped(l.now.Add(-ago))
	l.answered(p, v, m)
	if m.Context != nil {
		t.Error("the stamp was left on the answer for Raft")
	}
	if want := l.now.Add(-ago + l.leaseSpan()); !p.acked[v].until.Equal(want) || !l.leaseHeld(p) {
		t.Fatalf("lease until %v (held %v); want %v", p.acked[v].until, l.leaseHeld(p), want)
	}
	l.now = l.now.Add(l.leaseSpan() - ago + time.Millisecond)
	if l.leaseHeld(p) {
		t.Fatalf("lease held %v after a heartbeat sent %v before", l.leaseSpan()+time.Millisecond, l.leaseSpan())
	}

	// A stamp from the future counts as sent now.
	l.answered(p, v, stamped(l.now.Add(time.Hour)))
	if want := l.now.Add(l.leaseSpan()); !p.acked[v].until.Equal(want) {
		t.Fatalf("a stamp from the future: lease until %v; want %v", p.acked[v].until, want)
	}

	// An unstamped answer (an append's) is heard, and holds nothing.
	clear(p.acked)
	l.answered(p, v, &pb.Message{Type: pb.MsgAppResp})
	if a := p.acked[v]; !a.at.Equal(l.now) || !a.until.IsZero() || l.leaseHeld(p) {
		t.Fatalf("an append's answer: %+v, lease held %v; want heard now and no lease", a, l.leaseHeld(p))
	}

	// A voter of the release before (FeatureSendLease alone) promises
	// DeadAfter/2; its stamped answer counts leaseSpan all the same, the
	// shortest promise's: the voter may know this leader as one of its
	// own release and promise it DeadAfter/3 (its view of the leader's
	// features, not the leader's of its, sets the promise).
	id, _ := l.mesh.peerOf(v)
	l.mesh.members[id].features &^= FeatureShortPromise
	sent := l.now.Add(-100 * time.Millisecond)
	l.answered(p, v, stamped(sent))
	if want := sent.Add(l.leaseSpan()); !p.acked[v].until.Equal(want) {
		t.Fatalf("the release before: lease until %v; want %v", p.acked[v].until, want)
	}

	// A voter of an older release stamps nothing and promises DeadAfter:
	// its answer holds DeadAfter/2 from its arrival, as before.
	l.mesh.members[id].features &^= FeatureSendLease
	l.answered(p, v, &pb.Message{Type: pb.MsgAppResp})
	if want := l.now.Add(l.cfg.DeadAfter / 2); !p.acked[v].until.Equal(want) {
		t.Fatalf("an older voter's answer: lease until %v; want %v", p.acked[v].until, want)
	}
}

// A follower promises its vote for DeadAfter/3 after it last heard a
// leader with FeatureShortPromise, DeadAfter/2 after a leader of the
// release before (FeatureSendLease alone), DeadAfter after an older one;
// and a leader stamps its heartbeats only to voters that read the stamp.
func TestLeasePromise(t *testing.T) {
	c, l, p, v := leaseFixture(t)
	id, _ := l.mesh.peerOf(v)
	f := c.node(id).n
	fp := f.parts[p.id]
	f.heardLeader(fp, l.raftID)
	if fp.promise != f.cfg.DeadAfter/3 {
		t.Fatalf("promise to a leader with the feature %v; want %v", fp.promise, f.cfg.DeadAfter/3)
	}
	f.now = f.now.Add(f.cfg.DeadAfter/3 - time.Millisecond)
	if !f.promised(fp) {
		t.Fatal("promise over before DeadAfter/3")
	}
	f.now = f.now.Add(time.Millisecond)
	if f.promised(fp) {
		t.Fatal("promise still on at DeadAfter/3")
	}
	f.mesh.members["n1"].features &^= FeatureShortPromise
	f.heardLeader(fp, l.raftID)
	if fp.promise != f.cfg.DeadAfter/2 {
		t.Fatalf("promise to a leader of the release before %v; want %v", fp.promise, f.cfg.DeadAfter/2)
	}
	f.mesh.members["n1"].features &^= FeatureSendLease
	f.heardLeader(fp, l.raftID)
	if fp.promise != f.cfg.DeadAfter {
		t.Fatalf("promise to an older leader %v; want %v", fp.promise, f.cfg.DeadAfter)
	}
	if span := l.leaseSpan(); span > f.cfg.DeadAfter/3*4/5 {
		t.Fatalf("a leader counts an answer %v; want at most four fifths of the shortest promise, %v", span, f.cfg.DeadAfter/3*4/5)
	}

	hb := &pb.Message{Type: pb.MsgHeartbeat, To: v}
	l.stampHeartbeat(hb)
	if len(hb.Context) != 8 {
		t.Fatalf("heartbeat context %x; want an 8-byte stamp", hb.Context)
	}
	l.mesh.members[id].features &^= FeatureSendLease
	hb = &pb.Message{Type: pb.MsgHeartbeat, To: v}
	if l.stampHeartbeat(hb); hb.Context != nil {
		t.Fatalf("stamped a heartbeat to an older voter: %x", hb.Context)
	}
}

// A busy partition whose leader stops (its connections closed) is served
// by another replica within DeadAfter/2: its followers vote DeadAfter/3
// after they last heard it, about when they find it dead. It took 1.65 s
// with the promise of DeadAfter/2, more than DeadAfter with the promise
// of DeadAfter (before the lease counted from send times).
func TestLeaseFailoverWithinHalfDeadAfter(t *testing.T) {
	const parts = 4
	c := newCluster(t, 3, parts)
	c.run(15 * time.Second)
	c.oneServer(parts)
	part, _ := c.ledBy("n1", parts)
	g := groupIn(t, c.node("n1").n, part)
	if r := c.submit(shard.GroupSpec{ID: g, Mode: shard.ModeParallel, Tasks: echoTasks(4)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	victim := c.node("n1")
	victim.down = true
	for _, cn := range c.nodes[1:] {
		cn.n.Tick(c.now)
		cn.n.Disconnected(victim.id)
	}
	const step = 50 * time.Millisecond
	for waited := time.Duration(0); waited <= 10*time.Second; waited += step {
		if s := c.servers(part); len(s) == 1 {
			if limit := victim.n.cfg.DeadAfter / 2; waited > limit {
				t.Fatalf("partition %d served again by %s %v after its leader stopped; want within %v", part, s[0], waited, limit)
			}
			t.Logf("partition %d served again by %s %v after its leader stopped", part, s[0], waited)
			return
		}
		c.run(step)
	}
	t.Fatalf("partition %d not served 10 s after its leader stopped", part)
}

// A leader whose clock jumps (a frozen process, resumed) voids its read
// leases: a quiesced partition's voters counted on the membership's word,
// which is stale after the gap (they may have found it dead and elected
// another). It wakes the partition, stops serving, and serves and holds
// the lease again once its voters answer.
func TestLeaseThawedLeaderAsksAgain(t *testing.T) {
	c, l, p, _ := ledByN1(t, 30*time.Second)
	part := p.id
	if !p.quiesced || !l.leaseHeld(p) {
		t.Fatalf("partition %d: quiesced %v, lease held %v; want a quiesced leader with its lease", part, p.quiesced, l.leaseHeld(p))
	}
	c.now = c.now.Add(2 * time.Second)
	l.Tick(c.now)
	if p.quiesced || l.leaseHeld(p) || l.stats.Thaws != 1 {
		t.Fatalf("after a 2 s gap: quiesced %v, lease held %v, thaws %d; want awake, no lease, one thaw", p.quiesced, l.leaseHeld(p), l.stats.Thaws)
	}
	if l.Serving(groupIn(t, l, part)) || slices.Contains(l.Leading(), part) {
		t.Fatal("serving after the gap, before its voters answered")
	}
	c.drain(c.node("n1"))
	c.run(300 * time.Millisecond)
	if !l.leaseHeld(p) {
		t.Fatalf("no lease after the voters answered: serving %v leader %v transferee %v quiesced %v", p.serving, p.leader, p.rn.BasicStatus().LeadTransferee, p.quiesced)
	}
}
