package node

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A peer that left a partition votes there again only for a candidate
// whose log and term pass what it held when it left, even once it holds
// the partition again with a shorter log, and even after a restart. A
// candidate whose log stops before the peer's removal still counts the
// peer a voter: with its vote it would win and overwrite what a majority
// committed after it fell behind (the simulator lost an acknowledged
// group that way: needle simulate --seed 183 --peers 5 --workload workers
// --workers 2, before tombstones).
func TestLeftPeerVotesOnlyPastItsTombstone(t *testing.T) {
	const parts = 16
	c, n1, part := settledLeft(t, parts)
	tomb, ok := n1.n.left[part]
	if !ok || tomb.lastIndex == 0 || tomb.term == 0 {
		t.Fatalf("n1 left partition %d with tombstone %+v (recorded %v)", part, tomb, ok)
	}
	n1.log.Crash() // only what was synced survives: the drop was, and its record with it
	c.start(n1, parts)
	c.run(5 * time.Second) // n1 hears the members again
	if got := n1.n.left[part]; got != tomb {
		t.Fatalf("restarted, n1's tombstone of partition %d is %+v; it was %+v", part, got, tomb)
	}

	// n1 holds the partition again, from a snapshot older than what it
	// held when it left (its leader adds it back as a learner).
	cand := c.node(c.servers(part)[0])
	snap := &pb.Message{Type: pb.MsgSnap, To: n1.n.raftID, From: cand.n.raftID, Term: tomb.term, Snapshot: &pb.Snapshot{
		Data: cand.n.parts[part].shard.Snapshot(), Metadata: pb.SnapshotMetadata{Index: uint64(2), Term: uint64(1),
			ConfState: pb.ConfState{Voters: []uint64{cand.n.raftID, n1.n.raftID}}}}}
	c.stepRaft(n1, cand, part, snap)
	if n1.n.parts[part] == nil {
		t.Fatalf("a snapshot naming n1 did not open partition %d", part)
	}
	vote := func(term, logTerm, index uint64) bool {
		cand.inbox = nil
		c.stepRaft(n1, cand, part, &pb.Message{Type: pb.MsgVote, To: n1.n.raftID, From: cand.n.raftID,
			Term: term, LogTerm: logTerm, Index: index})
		for _, e := range cand.inbox {
			for _, rm := range e.Msg.Raft {
				if rm.Msg.Type == pb.MsgVoteResp {
					return !rm.Msg.Reject
				}
			}
		}
		return false
	}
	high := tomb.term + 5
	if vote(high, tomb.lastTerm, tomb.lastIndex-1) {
		t.Errorf("n1 voted for a candidate whose log (%d, %d) stops before what it held, (%d, %d)", tomb.lastTerm, tomb.lastIndex-1, tomb.lastTerm, tomb.lastIndex)
	}
	if vote(tomb.term, tomb.lastTerm, tomb.lastIndex+10) {
		t.Errorf("n1 voted in term %d, the term it left in", tomb.term)
	}
	if !vote(high, tomb.lastTerm, tomb.lastIndex) {
		t.Errorf("n1 refused a candidate in term %d whose log reaches what it held", high)
	}
}

// stepRaft hands to to one Raft message of partition part from from, and
// drains it.
func (c *cluster) stepRaft(to, from *cnode, part int, m *pb.Message) {
	c.tb.Helper()
	if err := to.n.Step(from.id, Message{Type: MsgRaft, From: from.id, Raft: []RaftMsg{{Partition: uint32(part), Msg: m}}}); err != nil {
		c.tb.Fatalf("step %v: %v", m.Type, err)
	}
	c.drain(to)
}

// The record of left partitions survives a round trip, and a malformed
// one is an error, never a panic.
func TestLeftRecord(t *testing.T) {
	left := map[int]tombstone{0: {term: 3, lastTerm: 2, lastIndex: 40}, 7: {term: 1 << 40, lastTerm: 9, lastIndex: 1 << 50}}
	got, err := decodeLeft(encodeLeft(left), 8)
	if err != nil || len(got) != len(left) || got[0] != left[0] || got[7] != left[7] {
		t.Fatalf("decodeLeft(encodeLeft(%v)) = %v, %v", left, got, err)
	}
	if _, err := decodeLeft(encodeLeft(left), 7); err == nil {
		t.Error("a partition out of range decoded")
	}
	b := encodeLeft(left)
	for i := range len(b) {
		_, _ = decodeLeft(b[:i], 8) // truncated: an error or a shorter map
	}
	if _, err := decodeLeft([]byte{0x80}, 8); err == nil {
		t.Error("a truncated varint decoded")
	}
}

// flushLeft's record grows by what was buried since the last Ready, is
// rewritten whole when it repeats too much, always decodes to the
// tombstones held, and never changes a record it handed out before.
func TestLeftRecordGrowsByAppends(t *testing.T) {
	const parts = 512
	n := &Node{left: map[int]tombstone{}}
	rng := rand.New(rand.NewPCG(1, 2))
	type handed struct {
		rec  []byte
		copy []byte
	}
	var out []handed
	rewrites := 0
	for round := range 400 {
		for range 1 + rng.IntN(4) {
			p := rng.IntN(parts)
			old := n.left[p]
			n.left[p] = tombstone{term: old.term + 1, lastTerm: old.lastTerm + uint64(rng.IntN(2)), lastIndex: old.lastIndex + uint64(rng.IntN(100))}
			n.leftNew = append(n.leftNew, p)
		}
		before := len(n.leftRec)
		n.rd = Ready{}
		n.flushLeft()
		if len(n.rd.Persist.MetaPut) != 1 || n.rd.Persist.MetaPut[0].Key != LeftMetaKey {
			t.Fatalf("round %d: meta records %v", round, n.rd.Persist.MetaPut)
		}
		rec := n.rd.Persist.MetaPut[0].Value
		if len(rec) < before {
			rewrites++
		}
		got, err := decodeLeft(rec, parts)
		if err != nil || !maps.Equal(got, n.left) {
			t.Fatalf("round %d: record decodes to %d tombstones (%v), want %d", round, len(got), err, len(n.left))
		}
		out = append(out, handed{rec, bytes.Clone(rec)})
	}
	for i, h := range out {
		if !bytes.Equal(h.rec, h.copy) {
			t.Fatalf("record %d changed after it was handed out", i)
		}
	}
	if rewrites == 0 || rewrites > 40 {
		t.Errorf("%d rewrites in 400 flushes: want some, and far fewer than flushes", rewrites)
	}
	n.rd = Ready{}
	n.flushLeft()
	if len(n.rd.Persist.MetaPut) != 0 {
		t.Error("a Ready with nothing buried rewrote the record")
	}
}
