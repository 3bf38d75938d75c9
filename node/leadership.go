package node

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// abdicate makes leader p give up serving when no majority of its voters
// (itself included) answered it for DeadAfter, once it has led that long:
// it cannot commit, and while they still hear its heartbeats (the link
// to it is cut, the one from it is not) they elect nobody else. It stops
// serving (requests fail, clients retry elsewhere) and stops sending
// appends and heartbeats; the voters find it silent for DeadAfter and
// elect another, whose later term ends this leadership when it is heard.
// Its read lease (leaseHeld) ran out 4/15 DeadAfter after it sent what
// the last answers acknowledged (lease.go), so nothing it answered can be
// stale. Reports whether it abdicated.
func (n *Node) abdicate(p *partition) bool {
	dead := n.cfg.DeadAfter
	if n.now.Sub(p.leadSince) < dead {
		return false
	}
	answered := func(voters []uint64) bool {
		ok := 0
		for _, v := range voters {
			if a, found := p.acked[v]; v == n.raftID || (found && n.now.Sub(a.at) < dead) {
				ok++
			}
		}
		return ok > len(voters)/2
	}
	in, out := p.conf.GetVoters(), p.conf.GetVotersOutgoing()
	if answered(in) && (len(out) == 0 || answered(out)) {
		return false
	}
	// Silence helps only if the others can elect a leader without this
	// one's vote: not in a joint configuration whose old half is this
	// voter alone (a lone voter growing to three), for one.
	electable := func(voters []uint64) bool {
		others := 0
		for _, v := range voters {
			if v != n.raftID {
				others++
			}
		}
		return others > len(voters)/2
	}
	if !electable(in) || len(out) > 0 && !electable(out) {
		return false
	}
	p.abdicated, p.abdicatedAt = true, n.now
	n.stats.Abdications++
	if p.rn.BasicStatus().LeadTransferee != raft.None {
		p.rn.TransferLeader(n.raftID) // aborts it: Raft refuses proposals while it lasts
	}
	n.stopServing(p)
	n.markDirty(p.id)
	lvl := slog.LevelWarn
	if p.abdications++; p.abdications > 1 {
		lvl = slog.LevelDebug // again, after resuming to no answers: said once
	}
	n.cfg.Logger.Log(context.Background(), lvl, "partition leader abdicated: no majority of its voters answered", "partition", p.id,
		"voters", in, "outgoing", out, "for", dead, "times", p.abdications)
	return true
}

// abdicateQuiet is how long an abdicated leader stays silent before it
// resumes (nobody else was elected): DeadAfter for the voters to find it
// silent, the longest a voter then waits to campaign (a voter that is not
// the preferred owner, and the silent leader often is: campaignJitter
// plus twice campaignFallback), and DeadAfter again for the election. A
// quiesced partition's voters start to count the silence only when the
// leader wakes them, which can be the moment it abdicates: with two
// DeadAfters (6 s) the leader could resume before a fallback voter (3 s
// of silence, then up to 3.3 s) was elected, and abdicate again 3 s later:
// a one-way cut left the partition without a server for rounds of that
// (TestMeshQuiescedLeaderCutOneWayIsReplaced).
func (n *Node) abdicateQuiet() time.Duration {
	return 2*n.cfg.DeadAfter + campaignJitter + 2*campaignFallback
}

// resumeLeading ends an abdication that no later term ended: nobody else
// could be elected (the others are learners, in a joint configuration
// only this leader's vote counts, or they are down). The leader sends
// again and proposes an empty entry; it serves again once that commits
// (maybeServe), which needs a majority's answers, and may abdicate again a
// DeadAfter later.
func (n *Node) resumeLeading(p *partition) {
	if p.rn.BasicStatus().LeadTransferee != raft.None {
		p.rn.TransferLeader(n.raftID)
	}
	n.markDirty(p.id)
	if err := p.rn.Propose(nil); err != nil {
		// Stay silent another quiet period, and try again then.
		p.abdicatedAt = n.now
		n.cfg.Logger.Warn("partition leader could not resume", "partition", p.id, "err", err)
		return
	}
	p.abdicated = false
	p.leadSince = n.now
	clear(p.acked)
	// Its appends were held back: replicate from what each replica
	// answers, not from what Raft believes it sent.
	for _, id := range append(slices.Clone(p.conf.GetVoters()), p.conf.GetLearners()...) {
		if id != n.raftID {
			p.rn.ReportUnreachable(id)
		}
	}
	n.cfg.Logger.Debug("partition leader resumed after abdicating: nobody else was elected", "partition", p.id)
}

// leaderTraffic reports whether a Raft message is a leader's replication
// (appends, heartbeats, snapshots), which an abdicated leader holds back.
func leaderTraffic(t pb.MessageType) bool {
	return t == pb.MsgApp || t == pb.MsgHeartbeat || t == pb.MsgSnap
}
