package node

import (
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// partition is one ring partition held by this peer: a Raft group replica,
// its in-memory Raft storage (persisted by the runtime), and the shard state
// folded from its committed entries.
type partition struct {
	id      int
	rn      *raft.RawNode
	storage *wal.Storage
	shard   *shard.Shard
	conf    *pb.ConfState

	applied   uint64 // last applied index
	snapIndex uint64 // index of the last snapshot taken or restored
	leader    bool   // Raft leader now
	term      uint64 // current term when leader
	serving   bool   // leader and caught up: may propose from its state
	// snapBytes is the size of the last snapshot, logBytes the entry data
	// applied since: see maybeSnapshot.
	snapBytes, logBytes int
	// acked is what this leader knows of each voter's answers to its
	// appends and heartbeats in its current term: when the last arrived,
	// and until when they hold the read lease (lease.go, leaseHeld).
	acked map[uint64]ack
	// leaderHeard is when this replica last heard from a leader (appends,
	// heartbeats, snapshots): for promise it votes for no one else
	// (leaderLease, lease.go).
	leaderHeard time.Time
	promise     time.Duration
	// thawed: a leader that stopped serving after a gap in its clock,
	// until its voters answer (lease.go, thawed).
	thawed bool
	// stalled: a leader that stopped serving for want of a majority
	// that no other voter could replace (stall), until its voters answer.
	stalled bool
	// leaderMsgAt is when this replica last had a message from a leader
	// or was opened (not moved by waking, unlike leaderHeard); leaveAsks
	// counts the asks about it (askLeave).
	leaderMsgAt time.Time
	leaveAsks   int
	// abdicated: this leader heard no majority of its voters for DeadAfter
	// while they may still hear it (a one-way cut): it stopped serving and
	// stopped sending appends and heartbeats, so that they elect another
	// (see abdicate). Raft has no step-down call; a later term ends it,
	// or, when none comes, the leader resumes (see resumeLeading).
	abdicated   bool
	abdicatedAt time.Time
	// abdications counts this leadership's abdications since it last
	// served: only the first is logged as a warning.
	abdications int

	// voterIDs caches mesh.voters for the ConfState votersOf and the
	// membership version votersEpoch.
	voterIDs    []string
	votersOf    *pb.ConfState
	votersEpoch int
	// isAlone caches mesh.alone for the ConfState aloneOf.
	isAlone bool
	aloneOf *pb.ConfState

	// quiesced: the partition ticks no more until something happens
	// (quiesce.go).
	quiesced bool
	quietAt  time.Time // when this leader last quiesced p

	props      []shard.Event   // events to propose as one entry at the next Ready
	deferred   []deferredLease // own leases held back, their runs started (defer.go)
	heldSubs   []heldSubmit    // creations held back for their first runs' outcomes (defer.go)
	notes      []shard.Event   // webhook delivery records waiting for an entry to ride (notify.go)
	notesDue   time.Time       // when notes go alone
	commits    []heldCommit    // commit-only appends held back (commit.go)
	servedFrom uint64          // the log's last index when this leader last began serving
	campaignAt time.Time       // when to campaign for a leaderless partition (jitter)
	campaigned time.Time       // when this replica last campaigned (a retry is spread: campaignSpread)
	confAt     time.Time       // a replica change was proposed then and has not applied
	// confApplied is when this replica last applied a replica change. A
	// leader hands leadership to a replica it just promoted no sooner than
	// a heartbeat period after (transferable).
	confApplied time.Time
	forceSnap   bool        // snapshot at the next Advance (a replica was added)
	decoded     decodedSnap // a received snapshot checked and decoded, until its Ready
	transferAt  time.Time   // when a leadership transfer was started
	leadSince   time.Time   // when this node last became leader
	// recoverTo is the last index of this node's unsafe recovery of the
	// partition until it applied it (recover.go); recoverRefused that a
	// recovery was refused and said why once.
	recoverTo      uint64
	recoverRefused bool
	// claimedBy are the survivors this node heard claim the partition
	// (heardRivals): its rivals from then on, their claims withdrawn or
	// not, until it has no recovery to make.
	claimedBy []uint64
	// askedAt is when this node, about to recover the partition, first
	// asked the ring's replicas of it whether it lives on without this
	// node (livesOn), and askAgain when it asks next; goneAt and goneFrom
	// when and from whom it last heard that it does (a MsgReplicaGone).
	askedAt, askAgain, goneAt time.Time
	goneFrom                  string
}

func (n *Node) openPartition(p int, ps wal.PartitionState, voters []uint64) (*partition, error) {
	st, err := wal.NewStorage(ps)
	if err != nil {
		return nil, fmt.Errorf("peer: partition %d: %w", p, err)
	}
	scfg := n.cfg.Shard
	scfg.Rand = rand.New(rand.NewPCG(n.cfg.Rand.Uint64(), uint64(p)))
	scfg.Expand = n.ExpandBroadcast // scheduled broadcasts, from this node's view
	scfg.Admit = func() bool { return !n.noNewWork }
	scfg.OnReady = func(on bool) { n.readyParts.set(p, on) }
	scfg.OnDue = func() {
		n.dueParts.set(p, true)
		if len(n.timers.stale) <= maxStaleTimers { // past it, the next read walks
			n.timers.stale = append(n.timers.stale, p)
		}
	}
	sh, err := shard.New(scfg)
	if err != nil {
		return nil, err
	}
	part := &partition{id: p, storage: st, shard: sh, conf: &pb.ConfState{}, leaderMsgAt: n.now}
	if snap := ps.Snapshot; !raft.IsEmptySnap(snap) {
		if err := sh.Restore(snap.Data); err != nil {
			return nil, fmt.Errorf("peer: partition %d: restore snapshot %d: %w", p, snap.Metadata.Index, err)
		}
		part.applied = snap.Metadata.Index
		part.snapIndex, part.snapBytes = part.applied, len(snap.Data)
		cs := snap.Metadata.ConfState
		part.conf = &cs
	}
	if last, _ := st.LastIndex(); len(voters) > 0 && last == 0 && raft.IsEmptySnap(ps.Snapshot) {
		n.bootstrap(part, voters)
	}
	rn, err := raft.NewRawNode(n.raftConfig(p, st, part.applied))
	if err != nil {
		return nil, fmt.Errorf("peer: partition %d: raft: %w", p, err)
	}
	part.rn = rn
	if voters := part.conf.Voters; len(voters) == 1 && voters[0] == n.raftID {
		if err := rn.Campaign(); err != nil {
			return nil, fmt.Errorf("peer: partition %d: campaign: %w", p, err)
		}
	}
	return part, nil
}

func (n *Node) raftConfig(part int, st raft.Storage, applied uint64) *raft.Config {
	return &raft.Config{
		ID:      n.raftID,
		Storage: st,
		Applied: applied,
		// needle's failure detector decides elections (docs/design.md): Raft's own
		// randomized timer is set out of reach.
		ElectionTick:              1 << 30,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		MaxSizePerMsg:             4 << 20,
		MaxCommittedSizePerReady:  64 << 20,
		MaxUncommittedEntriesSize: 1 << 30,
		MaxInflightMsgs:           256,
		PreVote:                   true,
		DisableProposalForwarding: true,
		Logger:                    raftLogger{n.log.With(keyPart, part)},
	}
}

// propose buffers events to go into the partition's next entry.
func (p *partition) propose(evs []shard.Event) {
	p.props = append(p.props, evs...)
}

// holding reports whether p holds proposals back: leases, creations
// waiting for their runs' outcomes (defer.go), webhook delivery records
// (notify.go).
func (p *partition) holding() bool {
	return len(p.deferred) > 0 || len(p.heldSubs) > 0 || len(p.notes) > 0
}

// bootstrap gives a new partition its initial state: a snapshot at index 1,
// term 1, with the given voters and an empty shard. Every replica
// bootstrapped with the same voters starts from the same state (the way the
// Raft README recommends, instead of RawNode.Bootstrap's conf entries).
func (n *Node) bootstrap(p *partition, voters []uint64) {
	snap := pb.Snapshot{
		Data: p.shard.Snapshot(),
		Metadata: pb.SnapshotMetadata{
			ConfState: pb.ConfState{Voters: voters}, Index: uint64(1), Term: uint64(1),
		},
	}
	if err := p.storage.Apply(wal.Update{Snapshot: snap}); err != nil {
		panic(fmt.Sprintf("peer: partition %d: bootstrap: %v", p.id, err))
	}
	p.conf = &pb.ConfState{Voters: voters}
	p.applied, p.snapIndex = 1, 1
	n.rd.Persist.Updates = append(n.rd.Persist.Updates, wal.Update{Partition: uint32(p.id), Snapshot: snap})
	n.rd.MustSync = true
}
