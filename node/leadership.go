package node

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
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
	in, out := p.conf.Voters, p.conf.VotersOutgoing
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
		if len(out) == 0 {
			n.stall(p, in) // not while it changes its voters: a joint configuration is passing
		}
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
		"voters", n.mesh.peerNames(in), "outgoing", n.mesh.peerNames(out), "for", dead, "times", p.abdications)
	return true
}

// stall makes leader p stop serving when no majority of its voters
// answered it and silence would not help, since the others cannot elect
// a leader without it (two voters, one dead: a peer that joined a lone
// peer and left). Serving on, it accepted writes that could never commit,
// and its clients hung while /healthz said ready; now its requests fail
// at once (503, no owner), its partition counts as unowned, and it
// serves again once a majority answers (thawed, as after a clock gap).
// It stays leader: Raft goes on sending to the missing voters.
func (n *Node) stall(p *partition, voters []uint64) {
	if !p.serving {
		return
	}
	p.thawed, p.stalled = true, true
	n.stats.Stalls++
	n.stopServing(p)
	n.markDirty(p.id)
	n.cfg.Logger.Warn("partition leader stalled: no majority of its voters answered, and none can be elected without it; "+
		"it takes no writes until one answers (docs/operations.md, A partition that lost its majority)",
		"partition", p.id, "voters", n.mesh.peerNames(voters), "for", n.cfg.DeadAfter)
}

// Stalled counts the partitions this node leads that stopped serving for
// want of a majority no other voter could replace (stall).
func (n *Node) Stalled() int {
	c := 0
	for _, p := range n.parts {
		if p != nil && p.leader && p.stalled && !p.serving {
			c++
		}
	}
	return c
}

// LostMajority counts the partitions held here that no majority of their
// voters can serve: the voters this node holds dead or forgot are a
// majority of either half of the configuration. Stalled counts only those
// led here whose leader could not abdicate; when two of three voters die
// together the leader abdicates and the partition is just unowned, which
// /healthz called "no owner yet". It returns the dead voters of those
// partitions too, sorted: the peers to bring back or, their disks lost
// for good, to forget with --unsafe-recover (docs/operations.md, A
// partition that lost its majority).
func (n *Node) LostMajority() (parts int, dead []string) {
	down := n.mesh.downRaft()
	missing := map[string]bool{}
	for _, i := range n.held {
		p := n.parts[i]
		if p == nil || p.conf == nil || !lostIn(down, p.conf.Voters, p.conf.VotersOutgoing) {
			continue
		}
		parts++
		for _, rid := range append(slices.Clone(p.conf.Voters), p.conf.VotersOutgoing...) {
			if id := down[rid]; id != "" {
				missing[id] = true
			}
		}
	}
	return parts, slices.Sorted(maps.Keys(missing))
}

// LostMajorityOf reports whether the partition of group g lost the
// majority of its voters, and returns the partition and, when it did, its
// dead voters, sorted: what a request for g that found no owner tells its
// client (503). A partition held here is judged by its configuration, as
// LostMajority judges it; one held elsewhere by the replicas the ring
// places it on, the dead members among them (a forgotten peer has left the
// ring): the peer it is forwarded to answers only that it does not serve
// it.
func (n *Node) LostMajorityOf(g shard.GroupID) (part int, dead []string) {
	part = n.PartitionOf(g)
	down := n.mesh.downRaft()
	var voters, outgoing []uint64
	switch p := n.parts[part]; {
	case p != nil && p.conf != nil:
		voters, outgoing = p.conf.Voters, p.conf.VotersOutgoing
	case p == nil && n.mesh.ring != nil:
		for _, id := range n.mesh.ring.Replicas(part) {
			voters = append(voters, RaftID(string(id)))
		}
	}
	if !lostIn(down, voters, outgoing) {
		return part, nil
	}
	missing := map[string]bool{}
	for _, rid := range append(slices.Clone(voters), outgoing...) {
		if id := down[rid]; id != "" {
			missing[id] = true
		}
	}
	return part, slices.Sorted(maps.Keys(missing))
}

// downRaft returns the dead members and the forgotten peers by Raft id;
// not a peer not heard of yet.
func (m *mesh) downRaft() map[uint64]string {
	down := map[uint64]string{}
	for id, mb := range m.members {
		if mb.state == PeerDead {
			down[RaftID(id)] = id
		}
	}
	for id := range m.forgotten {
		down[RaftID(id)] = id
	}
	return down
}

// lostIn reports whether the voters down holds are a majority of either
// half of a configuration (the others are no majority).
func lostIn(down map[uint64]string, halves ...[]uint64) bool {
	for _, set := range halves {
		c := 0
		for _, rid := range set {
			if down[rid] != "" {
				c++
			}
		}
		if len(set) > 0 && len(set)-c <= len(set)/2 {
			return true
		}
	}
	return false
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

// votersBack reports whether abdicated leader p may resume before its
// quiet period ends: with itself, a majority of its voters (in both
// halves of a joint configuration) sent this peer a message directly
// since it abdicated, so their links to it work. The usual case is two
// of three voters killed together: the leader abdicated because they were
// down, not cut off, and when they come back it resumes at once, where
// they would have elected a leader only after DeadAfter of its silence
// (503s for seconds in a restart loop killing two of five peers). It
// pings the voters it learned restarted since it abdicated, every
// DeadAfter/12 until one is heard, and from the first ping on counts the
// messages that come directly from that peer (memberRare.direct). Only
// those: pings to voters cut off from it would keep it alive to them
// (silentLeader) and delay the election they need. A one-way cut (what
// abdication is for) keeps it silent: no message from the cut voters
// comes. Only the first abdication since it last served resumes early;
// if the voters it heard do not answer Raft after all, it waits out the
// quiet periods as before.
func (n *Node) votersBack(p *partition) bool {
	if p.abdications > 1 {
		return false
	}
	m := &n.mesh
	since, gap := m.instant(p.abdicatedAt), n.cfg.DeadAfter/12
	back := func(voters []uint64) bool {
		ok := 0
		for _, v := range voters {
			if v == n.raftID {
				ok++
				continue
			}
			id, _ := m.peerOf(v)
			mb := m.members[id]
			switch {
			case mb == nil:
			case mb.rare != nil && mb.rare.direct > since:
				ok++
			case mb.rebootAt > since && !mb.legacy && (mb.rare == nil || n.now.Sub(m.at(mb.rare.pingedAt)) >= gap):
				mb.more().pingedAt = m.instant(n.now)
				m.sw.seq++ // no probe waits for its ack
				m.sendProbe(id, &Probe{Kind: ProbePing, Seq: m.sw.seq, Plain: m.plainTo(mb)})
			}
		}
		return ok > len(voters)/2
	}
	in, out := p.conf.Voters, p.conf.VotersOutgoing
	return back(in) && (len(out) == 0 || back(out))
}

// resumeLeading ends an abdication that no later term ended: nobody else
// could be elected (the others are learners, in a joint configuration
// only this leader's vote counts, or they are down), or a majority of its
// voters was heard again (votersBack). The leader sends
// again and proposes an empty entry; it serves again once that commits
// (maybeServe), which needs a majority's answers, and may abdicate again a
// DeadAfter later.
func (n *Node) resumeLeading(p *partition, quiet bool) {
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
	for _, id := range append(slices.Clone(p.conf.Voters), p.conf.Learners...) {
		if id != n.raftID {
			p.rn.ReportUnreachable(id)
		}
	}
	why := "a majority of its voters is heard again"
	if quiet {
		why = "nobody else was elected"
	}
	n.cfg.Logger.Debug("partition leader resumed after abdicating", "partition", p.id, "why", why)
}

// leaderTraffic reports whether a Raft message is a leader's replication
// (appends, heartbeats, snapshots), which an abdicated leader holds back.
func leaderTraffic(t pb.MessageType) bool {
	return t == pb.MsgApp || t == pb.MsgHeartbeat || t == pb.MsgSnap
}
