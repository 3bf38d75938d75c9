package node

import (
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
)

// ErrBadRaft is wrapped by the errors of Raft messages refused before Raft
// saw them (checkRaft).
var ErrBadRaft = errors.New("peer: bad raft message")

// ErrLogBehind is wrapped, with ErrBadRaft, by the refusal of a current
// leader's heartbeat that commits past this replica's log: the leader
// holds that this replica acknowledged entries it no longer has. Its data
// dir was restored from an older copy, or lost writes it had synced.
var ErrLogBehind = errors.New("the leader says this replica acknowledged entries its log no longer has")

// remoteRaftType reports whether t is a Raft message one replica sends
// another in needle: proposals are never forwarded
// (DisableProposalForwarding), and read-index and leadership-transfer
// requests are made locally. A switch, not a map: it is asked for every
// Raft message received (a map lookup was 0.6% of the simulator's CPU).
func remoteRaftType(t pb.MessageType) bool {
	switch t {
	case pb.MsgApp, pb.MsgAppResp, pb.MsgHeartbeat, pb.MsgHeartbeatResp,
		pb.MsgVote, pb.MsgVoteResp, pb.MsgPreVote, pb.MsgPreVoteResp,
		pb.MsgSnap, pb.MsgTimeoutNow:
		return true
	}
	return false
}

// checkRaft reports why a Raft message from the network must not reach
// Raft, which trusts its peers and panics on what no correct peer sends (a
// heartbeat committing past the log's end: "tocommit out of range"; an
// append whose entries do not follow its index, which can conflict with a
// committed entry). Every check holds for the messages of a correct peer,
// whatever the faults; an append or heartbeat of an earlier term than
// this replica's, which Raft only answers, is not checked further:
//
//  1. only the types replicas exchange (remoteRaftType);
//  2. an append's entries follow its index one by one, with terms that
//     never decrease, from its log term to its own term (Raft ignores an
//     append whose index is below its commit index, so the entries that
//     reach it all come after the committed ones);
//  3. a heartbeat commits no further than this replica's log: a leader
//     sends min(match, committed), and match is what this replica
//     persisted and acknowledged; a heartbeat's context, and its
//     answer's, is empty or 8 bytes (a read index; see quiesceCtx);
//  4. the leader's current term hears acknowledgements only of entries it
//     has (a follower acks what it was sent);
//  5. a snapshot has an index, a term no later than its message's and a
//     configuration, and its state restores (installSnapshot cannot fail).
//
// p is nil for a partition this node does not hold yet (its state is
// empty). A snapshot newer than the commit index is decoded to check it;
// its decoded state is returned, for installSnapshot (partition.decoded).
func (n *Node) checkRaft(p *partition, m *pb.Message) (*shard.Restored, error) {
	t := m.Type
	if !remoteRaftType(t) {
		return nil, fmt.Errorf("%w: %v is not sent between replicas", ErrBadRaft, t)
	}
	var last, committed, term uint64
	if p != nil {
		last, _ = p.storage.LastIndex()
		st := p.rn.BasicStatus()
		committed, term = st.Commit, st.Term
	}
	if p != nil && m.Term != 0 && m.Term < term && (t == pb.MsgApp || t == pb.MsgHeartbeat) {
		// A deposed leader's, late: Raft reads nothing of it but its term
		// and answers with its own (PreVote), which ends that leadership.
		// A heartbeat's commit may rightly be past this replica's log (a
		// later leader replaced the tail the deposed one knew: rule 3 is
		// the current term's), and refusing it kept the deposed leader
		// from hearing of the later term.
		return nil, nil
	}
	switch t {
	case pb.MsgApp:
		return nil, checkAppend(m)
	case pb.MsgHeartbeat, pb.MsgHeartbeatResp:
		if n := len(m.Context); n != 0 && n != 8 {
			// Raft reads a heartbeat's context, echoed in the answer, as
			// an 8-byte read index, and panics on a shorter one.
			return nil, fmt.Errorf("%w: %v with a context of %d bytes", ErrBadRaft, t, n)
		}
		if t == pb.MsgHeartbeat && m.Commit > last {
			return nil, fmt.Errorf("%w: heartbeat commits %d past the log's last index %d (%w)", ErrBadRaft, m.Commit, last, ErrLogBehind)
		}
	case pb.MsgAppResp:
		if m.Term == term && (m.Index > last || m.RejectHint > last) {
			return nil, fmt.Errorf("%w: append response for index %d (hint %d) past the log's last index %d", ErrBadRaft, m.Index, m.RejectHint, last)
		}
	case pb.MsgVote, pb.MsgPreVote:
		if m.LogTerm > m.Term {
			return nil, fmt.Errorf("%w: vote request with log term %d after its term %d", ErrBadRaft, m.LogTerm, m.Term)
		}
	case pb.MsgSnap:
		return checkSnapshot(m, committed)
	}
	return nil, nil
}

// checkAppend is checkRaft's rule 2. It used to compare the entries at or
// below the commit index with the storage's too, which Raft's log can be
// ahead of: an append stepped since the last Ready that replaces
// uncommitted entries and commits them is in Raft's log, and in the
// storage only after the Ready. The leader's resend of such an append,
// stepped before that Ready, was refused as a rewrite of committed
// entries (22 times in a 120 s restart loop killing 2 of 5 peers); and
// Raft ignores such appends anyway.
func checkAppend(m *pb.Message) error {
	if m.LogTerm > m.Term {
		return fmt.Errorf("%w: append with log term %d after its term %d", ErrBadRaft, m.LogTerm, m.Term)
	}
	prev := m.LogTerm
	for i, e := range m.Entries {
		if e.Index != m.Index+1+uint64(i) {
			return fmt.Errorf("%w: append entry %d has index %d after %d", ErrBadRaft, i, e.Index, m.Index)
		}
		if e.Term < prev || e.Term > m.Term {
			return fmt.Errorf("%w: append entry %d has term %d, not in [%d, %d]", ErrBadRaft, e.Index, e.Term, prev, m.Term)
		}
		prev = e.Term
	}
	return nil
}

// checkSnapshot is checkRaft's rule 5. A snapshot at or below the commit
// index is ignored by Raft, so only a newer one is decoded here; its
// decoded state is returned, for installSnapshot to install instead of
// decoding it again.
func checkSnapshot(m *pb.Message, committed uint64) (*shard.Restored, error) {
	if m.Snapshot == nil {
		return nil, fmt.Errorf("%w: snapshot without index or term", ErrBadRaft)
	}
	snap := m.Snapshot
	md := snap.Metadata
	switch {
	case md.Index == 0 || md.Term == 0:
		return nil, fmt.Errorf("%w: snapshot without index or term", ErrBadRaft)
	case md.Term > m.Term:
		return nil, fmt.Errorf("%w: snapshot of term %d after its message's term %d", ErrBadRaft, md.Term, m.Term)
	case len(md.ConfState.Voters) == 0:
		return nil, fmt.Errorf("%w: snapshot without voters", ErrBadRaft)
	case md.Index <= committed:
		return nil, nil
	}
	r, err := shard.DecodeSnapshot(snap.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot %d: %v", ErrBadRaft, md.Index, err)
	}
	return r, nil
}
