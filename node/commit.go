package node

import (
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// A leader's Raft sends each follower an empty append once an entry
// commits, to tell it the new commit index. A follower answers it, so an
// entry cost each follower four messages (the append, its answer, the
// commit, its answer) where two carry the entry. Raft needs none of the
// second pair in time: the next append or heartbeat carries the commit
// index, and a follower's commit index is for its own apply, never for
// the leader's decisions. So a leader holds such a commit-only append back
// for up to a Raft tick (heldCommit), one per follower and partition (a
// newer replaces the held one), and sends it when its time is up unless
// something that carries the commit as far goes first: an append with
// entries, a heartbeat (the quiescing one among them). Under load the
// next entry's append takes it (a busy partition's commits ride its
// appends); an idle partition's goes with the heartbeat that quiesces it
// at the next Raft tick.
//
// Only an append to a follower in StateReplicate is held: in StateProbe
// an empty append is the probe that finds where the follower's log ends.
// A leadership lost drops what is held (a message of an older term the
// follower would reject). What a follower sees meanwhile: its commit index,
// and so what it applied, up to a Raft tick behind the leader's.
type heldCommit struct {
	to  string
	m   *pb.Message
	due time.Time
}

// holdCommit reports whether leader p holds back m to peer to (a
// commit-only append), and drops a held one that m carries on.
func (n *Node) holdCommit(p *partition, to string, m *pb.Message) bool {
	switch m.Type {
	case pb.MsgApp:
		if len(m.Entries) > 0 || !n.replicating(p, m.To) {
			n.dropCommit(p, to, m.Commit)
			return false
		}
		for i := range p.commits {
			if p.commits[i].to == to {
				p.commits[i].m = m
				return true
			}
		}
		due := n.now.Add(n.cfg.RaftTick)
		p.commits = append(p.commits, heldCommit{to: to, m: m, due: due})
		n.dueBy(p, due)
		return true
	case pb.MsgHeartbeat:
		n.dropCommit(p, to, m.Commit)
	}
	return false
}

// replicating reports whether leader p replicates to follower rid in
// StateReplicate.
func (n *Node) replicating(p *partition, rid uint64) bool {
	ok := false
	p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == rid {
			ok = pr.State == tracker.StateReplicate
		}
	})
	return ok
}

// dropCommit drops p's commit held for peer to when a message carrying
// commit index commit goes to it first.
func (n *Node) dropCommit(p *partition, to string, commit uint64) {
	for i := range p.commits {
		if p.commits[i].to == to {
			if p.commits[i].m.Commit <= commit {
				p.commits = append(p.commits[:i], p.commits[i+1:]...)
			}
			return
		}
	}
}

// flushCommits sends p's held commits whose time is up to the followers
// still replicating, and brings the next flush to the first one still
// held.
func (n *Node) flushCommits(p *partition) {
	if !p.leader || p.abdicated { // silent, so that its voters elect another
		p.commits = nil
		return
	}
	k := 0
	for _, c := range p.commits {
		if n.now.Before(c.due) {
			p.commits[k] = c
			k++
			n.dueBy(p, c.due)
			continue
		}
		if n.replicating(p, c.m.To) { // not removed, nor back to probing, meanwhile
			n.sendRaft(c.to, p, c.m)
		}
	}
	clear(p.commits[k:])
	p.commits = p.commits[:k]
}
