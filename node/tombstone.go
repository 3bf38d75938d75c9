package node

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Votes after leaving a partition (docs/design.md, "Replica lifecycle").
//
// A Raft voter's promise lives in what it stores: its term, its vote, and
// its log, against which it refuses candidates that lack committed
// entries. A peer that leaves a partition (leave.go) deletes all three;
// yet a replica whose log stops before that peer's removal still counts
// it a voter. Were the peer to come back empty (the ring places it there
// again) and vote, that stale replica could win with its vote and
// overwrite entries a majority committed after it fell behind: an
// acknowledged group lost. So a peer keeps, per partition it left, a
// tombstone: the term and the last log entry it held then (LeftMetaKey
// in its WAL's meta space). Until a candidate's log reaches that entry
// and its term passes that term, the peer votes for no one in the
// partition, whatever it holds of it since. A partition this peer does
// not hold, or holds with an empty log, gets no vote either: every voter
// holds the log it was promoted with (a founder, and a peer of an initial
// membership, bootstraps from a snapshot; everyone else joins as a
// learner and is sent the log first).

// LeftMetaKey is the WAL meta record of the partitions this peer left
// (NodeConfig.Left).
const LeftMetaKey = "left"

// tombstone is what a peer knew of a partition when it left it.
type tombstone struct {
	term, lastTerm, lastIndex uint64
}

// ErrBadLeft is a malformed LeftMetaKey record.
var ErrBadLeft = errors.New("node: malformed record of left partitions")

// encodeLeft encodes the tombstones by partition, in partition order:
// four uvarints each (partition, term, last term, last index).
func encodeLeft(left map[int]tombstone) []byte {
	var b []byte
	for _, p := range sortedKeys(left) {
		b = appendLeft(b, p, left[p])
	}
	return b
}

// appendLeft appends partition p's tombstone t to a record: decodeLeft
// keeps the last entry of each partition, so a record can grow by what
// changed (flushLeft).
func appendLeft(b []byte, p int, t tombstone) []byte {
	b = binary.AppendUvarint(b, uint64(p))
	b = binary.AppendUvarint(b, t.term)
	b = binary.AppendUvarint(b, t.lastTerm)
	return binary.AppendUvarint(b, t.lastIndex)
}

// decodeLeft decodes encodeLeft's record for a mesh of parts partitions;
// of several entries of one partition, the last counts.
func decodeLeft(b []byte, parts int) (map[int]tombstone, error) {
	left := map[int]tombstone{}
	for len(b) > 0 {
		var v [4]uint64
		for i := range v {
			x, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, ErrBadLeft
			}
			v[i], b = x, b[n:]
		}
		if v[0] >= uint64(parts) {
			return nil, fmt.Errorf("%w: partition %d of %d", ErrBadLeft, v[0], parts)
		}
		left[int(v[0])] = tombstone{term: v[1], lastTerm: v[2], lastIndex: v[3]}
	}
	return left, nil
}

// bury records the tombstone of partition p, which this node leaves now;
// the record goes out with the drop, in the next Ready's batch (flushLeft).
func (n *Node) bury(p *partition) {
	last, _ := p.storage.LastIndex()
	lastTerm, _ := p.storage.Term(last)
	t := tombstone{term: p.rn.BasicStatus().HardState.Term, lastTerm: lastTerm, lastIndex: last}
	if old, ok := n.left[p.id]; ok {
		t.term = max(t.term, old.term)
		if old.beyond(t.lastTerm, t.lastIndex) {
			t.lastTerm, t.lastIndex = old.lastTerm, old.lastIndex // it never held less than it did
		}
	}
	n.left[p.id] = t // NewNode made the map (decodeLeft)
	n.leftNew = append(n.leftNew, p.id)
}

// flushLeft puts the record of left partitions in the Ready being built
// when a partition was left since the last one: once per Ready, however
// many it left. The record grows by the tombstones buried since the last
// one (appendLeft), and is written whole again only when what it repeats
// outgrows what it holds: a founder leaves thousands of partitions, a few
// per Ready, as a large mesh forms, and encoding every tombstone each
// time was quadratic. Bytes once in a record are never written again (a
// batch may still hold it): appends go past its end, a rewrite to a new
// slice.
func (n *Node) flushLeft() {
	if len(n.leftNew) == 0 {
		return
	}
	if n.leftRec == nil || n.leftEntries+len(n.leftNew) > 2*len(n.left)+64 {
		n.leftRec, n.leftEntries = encodeLeft(n.left), len(n.left)
	} else {
		for _, p := range n.leftNew {
			n.leftRec = appendLeft(n.leftRec, p, n.left[p])
		}
		n.leftEntries += len(n.leftNew)
	}
	n.leftNew = n.leftNew[:0]
	n.putMeta(LeftMetaKey, n.leftRec[:len(n.leftRec):len(n.leftRec)])
}

// voteBarred reports whether m is a (pre-)vote request that this node
// ignores for partition part (p its replica, or nil): it holds no log of
// the partition, or it left the partition and the candidate's log or term
// does not pass what it held then.
func (n *Node) voteBarred(part int, p *partition, m *pb.Message) bool {
	if t := m.Type; t != pb.MsgVote && t != pb.MsgPreVote {
		return false
	}
	if p == nil {
		return true
	}
	if last, _ := p.storage.LastIndex(); last == 0 && p.snapIndex == 0 {
		return true
	}
	t, ok := n.left[part]
	if !ok {
		return false
	}
	return m.Term <= t.term || t.beyond(m.LogTerm, m.Index)
}

// beyond reports whether the log t recorded ends past a log whose last
// entry is (term, index), in Raft's order.
func (t tombstone) beyond(term, index uint64) bool {
	return t.lastTerm > term || t.lastTerm == term && t.lastIndex > index
}
