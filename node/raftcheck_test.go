package node

import (
	"math"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
)

// raftTarget returns a formed 3-node cluster and a partition that n1
// follows, with its leader.
func raftTarget(tb testing.TB) (c *cluster, part int, leader string) {
	tb.Helper()
	c = newCluster(tb, 3, 6)
	c.run(15 * time.Second)
	n1 := c.node("n1").n
	for i, p := range n1.parts {
		if p == nil || p.serving {
			continue
		}
		if id, ok := n1.mesh.peerOf(p.rn.BasicStatus().Lead); ok {
			return c, i, id
		}
	}
	tb.Fatal("n1 follows no partition")
	return nil, 0, ""
}

// stepWire sends one Raft message from from to n1 through the codec, as
// the transport delivers it.
func stepWire(tb testing.TB, c *cluster, from string, part int, m *pb.Message) error {
	tb.Helper()
	b, err := AppendMessage(nil, &Message{Type: MsgRaft, From: from, Raft: []RaftMsg{{Partition: uint32(part), Msg: m}}})
	if err != nil {
		tb.Fatal(err)
	}
	msg, err := DecodeMessage(b)
	if err != nil {
		return err
	}
	return c.node("n1").n.Step(from, msg)
}

// TestRaftHostileMessagesDropped sends what made Raft panic (a heartbeat
// committing 2^40, a snapshot that does not restore, a proposal, an append
// whose entries skip ahead of its index): each is dropped and counted; an
// append that rewrites a committed entry reaches Raft, which ignores it
// (its index is below the commit index); and the mesh keeps running
// groups.
func TestRaftHostileMessagesDropped(t *testing.T) {
	c, part, leader := raftTarget(t)
	n1 := c.node("n1").n
	p := n1.parts[part]
	term := p.rn.BasicStatus().Term
	last, _ := p.storage.LastIndex()
	first, _ := p.storage.FirstIndex()
	committedTerm, _ := p.storage.Term(last)
	hdr := func(ty pb.MessageType) *pb.Message {
		return &pb.Message{Type: ty, To: n1.raftID, From: RaftID(leader), Term: term}
	}
	hb := hdr(pb.MsgHeartbeat)
	hb.Commit = uint64(1 << 40)
	firstTerm, _ := p.storage.Term(first)
	other := term // a term the committed entry does not have, and the append may carry
	if firstTerm == term {
		other = term - 1
	}
	rewrite := hdr(pb.MsgApp)
	rewrite.Index, rewrite.LogTerm = first-1, 0
	rewrite.Entries = []pb.Entry{{Index: first, Term: other, Data: []byte{1}}}
	snap := hdr(pb.MsgSnap)
	snap.Snapshot = &pb.Snapshot{Data: []byte{0xff}, Metadata: pb.SnapshotMetadata{Index: last + 100, Term: term,
		ConfState: pb.ConfState{Voters: []uint64{n1.raftID}}}}
	prop := hdr(pb.MsgProp)
	prop.Entries = []pb.Entry{{Type: pb.EntryConfChange, Data: []byte{0xff, 0xff}}}
	gap := hdr(pb.MsgApp)
	gap.Index, gap.LogTerm = last, committedTerm
	gap.Entries = []pb.Entry{{Index: last + 5, Term: term}}
	for _, m := range []*pb.Message{hb, snap, prop, gap} {
		if err := stepWire(t, c, leader, part, m); err == nil {
			t.Errorf("Step(%v) = nil; want an error", m.Type)
		}
	}
	if got := n1.stats.DroppedRaft; got != 4 {
		t.Errorf("DroppedRaft = %d; want 4", got)
	}
	if err := stepWire(t, c, leader, part, rewrite); err != nil {
		t.Errorf("Step(an append rewriting entry %d) = %v; want it stepped (Raft ignores it)", first, err)
	}
	c.drain(c.node("n1"))
	if got, _ := p.storage.Term(first); got != firstTerm || other == 0 {
		t.Errorf("entry %d has term %d after an append rewrote it to term %d; want %d", first, got, other, firstTerm)
	}
	c.run(2 * time.Second)
	spec := shard.GroupSpec{ID: groupIn(t, n1, part), Mode: shard.ModeParallel, Tasks: echoTasks(4)}
	if r := c.submit(spec); r.Err != nil {
		t.Fatalf("submit after hostile messages: %v", r.Err)
	}
	for i := 0; c.groupState(spec.ID) != shard.GroupSucceeded; i++ {
		if i > 500 {
			t.Fatalf("group %s = %v after hostile messages", spec.ID, c.groupState(spec.ID))
		}
		c.step(10 * time.Millisecond)
	}
}

// FuzzStepRaft drives the receive path of a follower in a formed mesh:
// a Raft message built from the fuzzer's fields (relative to the
// partition's term and last index, so that they reach Raft's deeper
// checks), encoded as the wire carries it, decoded, checked and stepped
// into a real Node, which then runs on. No input may panic a node.
func FuzzStepRaft(f *testing.F) {
	f.Add(uint8(pb.MsgHeartbeat), int8(0), int8(0), int16(1000), int16(0), uint8(0), false, []byte{})
	f.Add(uint8(pb.MsgApp), int8(0), int8(0), int16(1), int16(-1), uint8(2), false, []byte{1, 2, 3})
	f.Add(uint8(pb.MsgApp), int8(1), int8(1), int16(-3), int16(-3), uint8(3), true, []byte{0xff})
	f.Add(uint8(pb.MsgSnap), int8(1), int8(0), int16(10), int16(5), uint8(1), false, []byte{4, 0, 0, 0, 0})
	f.Add(uint8(pb.MsgAppResp), int8(0), int8(0), int16(50), int16(60), uint8(0), true, []byte{})
	f.Add(uint8(pb.MsgTimeoutNow), int8(2), int8(0), int16(0), int16(0), uint8(0), false, []byte{})
	f.Add(uint8(pb.MsgVote), int8(5), int8(9), int16(100), int16(0), uint8(0), false, []byte{})
	f.Fuzz(func(t *testing.T, ty uint8, dTerm, dLogTerm int8, dIndex, dCommit int16, nEnts uint8, flag bool, data []byte) {
		c, part, leader := raftTarget(t)
		n1 := c.node("n1").n
		p := n1.parts[part]
		term := p.rn.BasicStatus().Term
		last, _ := p.storage.LastIndex()
		rel := func(base uint64, d int64) uint64 { return uint64(max(int64(base)+d, 0)) }
		m := &pb.Message{Type: pb.MessageType(ty % 24), To: n1.raftID, From: RaftID(leader),
			Term: rel(term, int64(dTerm)), LogTerm: rel(term, int64(dLogTerm)),
			Index: rel(last, int64(dIndex)), Commit: rel(last, int64(dCommit)),
			Reject: flag, RejectHint: rel(last, int64(dCommit))}
		for i := range int(nEnts % 8) {
			e := pb.Entry{Index: m.Index + 1 + uint64(i), Term: m.Term, Data: data}
			if flag && i == 0 {
				e.Type = pb.EntryConfChange
			}
			m.Entries = append(m.Entries, e)
		}
		if m.Type == pb.MsgSnap {
			m.Snapshot = &pb.Snapshot{Data: data, Metadata: pb.SnapshotMetadata{Index: m.Index, Term: m.LogTerm,
				ConfState: pb.ConfState{Voters: []uint64{n1.raftID, RaftID(leader)}}}}
		}
		_ = stepWire(t, c, leader, part, m)
		if len(data) > 0 {
			if msg, err := DecodeMessage(data); err == nil {
				_ = n1.Step(leader, msg)
			}
		}
		c.run(500 * time.Millisecond)
		if math.MaxInt64 < 0 {
			t.Log() // keep math imported for the seeds above
		}
	})
}

// A deposed leader's messages, late, are a correct peer's: its append
// carries entries of its term where the replica has since committed the
// next leader's, and its heartbeat may commit past the replica's log (a
// later leader replaced the tail the deposed one knew). Raft answers each
// with its later term (PreVote), which deposes the sender. The check
// refused both, as a rewrite of committed entries and as a commit out of
// range (with a warning, dozens in a restart loop that kills two peers at
// once), and the deposed leader did not hear of the later term.
func TestRaftLateMessagesOfDeposedLeaderAnswered(t *testing.T) {
	c, part, leader := raftTarget(t)
	n1 := c.node("n1").n
	p := n1.parts[part]
	st := p.rn.BasicStatus()
	term, commit := st.Term, st.Commit
	first, _ := p.storage.FirstIndex()
	last, _ := p.storage.LastIndex()
	have, _ := p.storage.Term(commit)
	if term < 2 || first > commit || have != term {
		t.Fatalf("partition %d: term %d, entries %d-%d of term %d; want a committed entry of a term after the first", part, term, first, commit, have)
	}
	app := &pb.Message{Type: pb.MsgApp, To: n1.raftID, From: RaftID(leader), Term: term - 1,
		Index: commit - 1, LogTerm: term - 1,
		Entries: []pb.Entry{{Index: commit, Term: term - 1, Data: []byte{1}}}}
	if first > commit-1 {
		app.Index, app.LogTerm = uint64(0), 0
		app.Entries[0].Index = uint64(1)
	}
	hb := &pb.Message{Type: pb.MsgHeartbeat, To: n1.raftID, From: RaftID(leader), Term: term - 1,
		Commit: last + 5}
	for _, late := range []*pb.Message{app, hb} {
		queued := len(c.node(leader).inbox)
		if err := stepWire(t, c, leader, part, late); err != nil {
			t.Fatalf("Step(late %v of term %d) = %v; want it stepped", late.Type, term-1, err)
		}
		if n1.stats.DroppedRaft != 0 {
			t.Fatalf("DroppedRaft = %d; want 0", n1.stats.DroppedRaft)
		}
		c.drain(c.node("n1"))
		var answer *pb.Message
		for _, e := range c.node(leader).inbox[queued:] {
			for _, rm := range e.Msg.Raft {
				if rm.Partition == uint32(part) && rm.Msg.Type == pb.MsgAppResp {
					answer = rm.Msg
				}
			}
		}
		if answer == nil || answer.Term != term {
			t.Fatalf("answer to the late %v = %v; want an append response of term %d", late.Type, answer, term)
		}
	}
	if got, _ := p.storage.Term(commit); got != term || p.rn.BasicStatus().Commit != commit {
		t.Fatalf("after the late messages: entry %d of term %d, commit %d; want term %d, commit %d", commit, got, p.rn.BasicStatus().Commit, term, commit)
	}
}

// An append that replaces a follower's uncommitted entries and commits
// them changes Raft's log at once, and the storage only at the next
// Ready. A second append stepped before that Ready was checked against
// the storage, and the leader's own resend of the first looked like a
// rewrite of a committed entry: refused, and logged (22 times in a 120 s
// restart loop killing 2 of 5 peers). Raft ignores an append whose index
// is below its commit index (it answers with that index), and only such
// an append carries entries at or below it: both the resend and an
// append really conflicting with the new committed entry are stepped,
// and change nothing.
func TestRaftAppendOverJustCommittedEntries(t *testing.T) {
	c, part, leader := raftTarget(t)
	cn := c.node("n1")
	n1 := cn.n
	p := n1.parts[part]
	term := p.rn.BasicStatus().Term
	last, _ := p.storage.LastIndex()
	lastTerm, _ := p.storage.Term(last)
	app := func(from string, mterm, eterm, commit uint64) *pb.Message {
		return &pb.Message{Type: pb.MsgApp, To: n1.raftID, From: RaftID(from), Term: mterm,
			Index: last, LogTerm: lastTerm, Commit: commit,
			Entries: []pb.Entry{{Index: last + 1, Term: eterm, Data: []byte{1}}}}
	}
	// An uncommitted entry of term T, persisted.
	if err := stepWire(t, c, leader, part, app(leader, term, term, last)); err != nil {
		t.Fatal(err)
	}
	c.drain(cn)
	if got, _ := p.storage.Term(last + 1); got != term || p.rn.BasicStatus().Commit != last {
		t.Fatalf("entry %d of term %d, commit %d; want an uncommitted entry of term %d", last+1, got, p.rn.BasicStatus().Commit, term)
	}
	// Term T+1 replaces it and commits it: in Raft's log, not yet in the
	// storage.
	replace := app(leader, term+1, term+1, last+1)
	if err := stepWire(t, c, leader, part, replace); err != nil {
		t.Fatal(err)
	}
	if p.rn.BasicStatus().Commit != last+1 {
		t.Fatalf("commit %d after the replacing append; want %d", p.rn.BasicStatus().Commit, last+1)
	}
	var other string
	for _, cn := range c.nodes {
		if cn.id != "n1" && cn.id != leader {
			other = cn.id
		}
	}
	if err := stepWire(t, c, leader, part, replace); err != nil {
		t.Fatalf("Step(the leader's resend before the Ready) = %v; want it stepped", err)
	}
	if err := stepWire(t, c, other, part, app(other, term+1, term, last+1)); err != nil {
		t.Fatalf("Step(an append conflicting with the entry just committed) = %v; want it stepped (Raft ignores it)", err)
	}
	if n1.stats.DroppedRaft != 0 {
		t.Fatalf("DroppedRaft = %d; want 0", n1.stats.DroppedRaft)
	}
	c.drain(cn)
	if got, _ := p.storage.Term(last + 1); got != term+1 || p.rn.BasicStatus().Commit != last+1 {
		t.Fatalf("after the Ready: entry %d of term %d, commit %d; want term %d, commit %d", last+1, got, p.rn.BasicStatus().Commit, term+1, last+1)
	}
}
