package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// Ready is the work the node hands its driver (Driver does it). The
// driver must, in order:
//  1. send rd.Early: Raft messages that vouch for no local state (a
//     leader's appends, snapshots and heartbeats, vote requests), which
//     may leave before this Ready's entries are durable, so that followers
//     write in parallel with the leader (Raft thesis 10.2.1), and steal
//     requests and grants, whose leases are committed, held back, or in
//     an entry of this Ready that commits only once written (a held lease
//     rides along with its partition's next entry), never in an entry
//     this Ready commits before writing it (flushGrants);
//  2. persist: Log.Append(&rd.Persist), then Log.Sync() if rd.MustSync;
//  3. send rd.Messages and rd.Gossip: Raft's responses (append and vote
//     acknowledgements) and every other message (outcomes, grants, acks)
//     vouch for the state just persisted, and never leave before it;
//  4. start rd.Run and cancel rd.Abort; make the webhook calls of
//     rd.Notify and report each with NotifyDone;
//  5. deliver rd.Replies and use rd.Changes (waiters, metrics);
//  6. call Advance(rd), after which the node reuses the arrays of rd's
//     slices but Gossip: the driver keeps copies of what it needs of
//     them (an Envelope by value), never the slices or pointers into
//     them.
type Ready struct {
	Persist  wal.Batch
	MustSync bool
	Early    []Envelope // to one peer each, in order: may leave before Persist is written (Raft, steal requests, grants)
	Messages []Envelope // to one peer each, in order: only after Persist is written (and synced)
	Gossip   []Message  // to every peer (heartbeats): best effort
	Run      []Run
	Abort    []RunRef // runs to stop: their lease expired, or their task was canceled
	Replies  []Reply
	Changes  []shard.Change
	Applied  int // events applied in this Ready
	// QueueWaits are how long tasks leased in this Ready waited READY, and
	// ScheduleLags how late schedule ticks fired, by this node as owner
	// (for metrics).
	QueueWaits   []time.Duration
	ScheduleLags []time.Duration
	// Notify are webhook deliveries to make, as owner (see notify.go).
	Notify []NotifyJob
}

// Envelope is a message for another peer.
type Envelope struct {
	To  string
	Msg Message
}

// Run is a lease granted to this peer: start the handler.
type Run struct {
	Task    shard.TaskID
	Round   shard.Round
	Handler string
	// Trace is the trace of the task's group (shard.GroupSpec.Trace): a
	// W3C traceparent when the submission carried one, which the runtime
	// makes the parent of the attempt's spans and hands to the handler.
	Trace   string
	Payload []byte
	Timeout time.Duration
	Attempt int // attempts already made (0 on the first run)
	// Inputs are the results of the task's dependencies by name
	// (shard.Shard.Inputs); nil when it has none.
	Inputs map[string]json.RawMessage
	// External says the handler runs in an external worker (NodeConfig.Shard.External):
	// the runtime hands the run to a worker that polls for it. Require is the
	// task's labels (a worker must carry them) and Expiry its lease's.
	External bool
	Require  []string
	Expiry   time.Time
	Name     string // the task's name
	Pin      string // the peer it is pinned to, if any
	// Created is when the task's group was created (its created_at), set
	// on runs of external handlers; zero from an older peer's grant.
	Created time.Time
	// Shard and Shards are set on a broadcast's copies: the copy's index
	// and the number of copies (Shards 0 otherwise).
	Shard, Shards int
	// Worker is set on a copy of a broadcast to external workers: the only
	// worker (polling this peer) that may take it (shard.BroadcastWorker).
	Worker string
	// Deaths are the external workers that died running the task since
	// its last outcome (shard.Shard.Deaths): the runtime hands a task they
	// keep dying with to a worker alone, and fails it at a limit of lone
	// deaths.
	Deaths shard.Deaths
	// Info is the task's priority, retry budget, last error, stage and
	// item (shard.RunInfo), set on runs of external handlers: a worker's
	// poll shows them as GET /v1/tasks/{id} does. Zero from an older
	// peer's grant.
	Info shard.RunInfo
}

// RunRef names one run: a task and the lease round it runs in. A task can
// have two runs on a peer at once (a newer round superseded one whose
// handler has not returned), and stopping one must not stop the other.
type RunRef struct {
	Task  shard.TaskID
	Round shard.Round
}

// Reply answers a request made through Submit or Cancel.
type Reply struct {
	Req    uint64
	Err    error
	Submit SubmitResult
	// Repeat: a Retry whose idempotency key the group had seen; it did
	// nothing.
	Repeat bool
}

// SubmitResult is the answer to a submission.
type SubmitResult struct {
	Group   shard.GroupID
	Tasks   []shard.TaskID
	Created bool // false: a group with this id (idempotency key) already existed
}

// HasReady reports whether Ready has work.
func (n *Node) HasReady() bool {
	if len(n.rd.Replies) > 0 || len(n.rd.Run) > 0 || len(n.rd.Abort) > 0 || len(n.rd.Persist.Updates) > 0 ||
		len(n.rd.Messages) > 0 || len(n.rd.Gossip) > 0 || len(n.rd.Persist.OutboxPut) > 0 || len(n.rd.Persist.OutboxDel) > 0 ||
		len(n.rd.Notify) > 0 || len(n.rd.Early) > 0 || len(n.raftOut) > 0 || len(n.goneOut) > 0 ||
		len(n.steal.grants) > 0 || // held grants go at once (defer.go)
		len(n.steal.notNow) > 0 || // and "not now": the thief's request waits for it
		n.mesh.forgotNew || // a forget to persist (flushForgotten)
		n.mesh.recoverNew { // and a recover mark (flushRecover)
		return true
	}
	// A dirty partition found to have nothing is dropped from dirty (every
	// change to a partition marks it again), so that the drivers' check
	// after each input does not walk every partition a Raft tick marked.
	for k, i := range n.dirty {
		p := n.parts[i]
		if p != nil && (len(p.props) > 0 || p.rn.HasReady()) {
			n.dirty = append(n.dirty[:0], n.dirty[k:]...)
			return true
		}
		n.isDir[i] = false
	}
	n.dirty = n.dirty[:0]
	return false
}

// Ready returns the work accumulated since the last Advance. Committed
// entries are applied to the shards here (they were made durable by an
// earlier Ready), new entries are to be persisted by the driver.
func (n *Node) Ready() Ready {
	n.schedulePeers()
	dirty := n.dirty
	n.dirty = n.dirtyNext[:0]
	for _, i := range dirty {
		n.isDir[i] = false
		p := n.parts[i]
		if p == nil {
			continue
		}
		n.flush(p)
		if p.rn.HasReady() {
			n.readyPartition(p)
		}
	}
	n.dirtyNext = dirty[:0]
	n.schedulePeers()
	n.maybeSteal()
	n.flushGrants()
	n.flushGone()
	n.flushRaftMsgs()
	n.dropAborted()
	n.dropFinished()
	n.flushLeft()
	n.flushForgotten()
	n.flushRecover()
	rd := n.rd
	n.rd = Ready{}
	return rd
}

// maxKeptEnvelopes bounds the envelope arrays a node keeps for its next
// Ready (keptEnvelopes): an Envelope is 256 bytes, and a burst's larger
// array goes to the collector.
const maxKeptEnvelopes = 1024

// keptEnvelopes is envs, a handled Ready's Early or Messages, to be reused
// for a later one, or nil when over maxKeptEnvelopes.
func keptEnvelopes(envs []Envelope) []Envelope {
	if cap(envs) > maxKeptEnvelopes {
		return nil
	}
	return envs
}

// outRaft is a Raft message for peer to, held until flushRaftMsgs.
type outRaft struct {
	to    string
	early bool // earlyRaft, set by flushRaftMsgs
	msg   RaftMsg
}

// batchedWith reports whether o goes in the same Message as b.
func (o outRaft) batchedWith(b outRaft) bool { return o.to == b.to && o.early == b.early }

// sendRaft queues Raft message m of partition p for peer to.
func (n *Node) sendRaft(to string, p *partition, m *pb.Message) {
	n.raftOut = append(n.raftOut, outRaft{to: to, msg: RaftMsg{Partition: uint32(p.id), Msg: m}})
}

// flushRaftMsgs batches the Raft messages of every partition into one
// Message per destination and kind: Early for those that may leave before
// the Ready is persisted, Messages for the responses that vouch for it
// (see earlyRaft). Destinations go in the order of their ids, a
// destination's messages in the order made.
func (n *Node) flushRaftMsgs() {
	if len(n.raftOut) == 0 {
		return
	}
	for i := range n.raftOut {
		n.raftOut[i].early = earlyRaft(n.raftOut[i].msg.Msg.Type)
	}
	// A stable sort keeps each destination's early and late messages in
	// order: every batch is then a run of the sorted messages, and one
	// array holds them all (a grown slice per destination and kind
	// before). The array goes with the Ready, the driver's to keep.
	slices.SortStableFunc(n.raftOut, func(a, b outRaft) int {
		if c := strings.Compare(a.to, b.to); c != 0 {
			return c
		}
		switch {
		case a.early == b.early:
			return 0
		case a.early:
			return -1
		}
		return 1
	})
	msgs := make([]RaftMsg, len(n.raftOut))
	for i, o := range n.raftOut {
		msgs[i] = o.msg
	}
	for start := 0; start < len(n.raftOut); {
		o := n.raftOut[start]
		end := start + 1
		for end < len(n.raftOut) && n.raftOut[end].batchedWith(o) {
			end++
		}
		env := Envelope{To: o.to, Msg: Message{Type: MsgRaft, From: n.cfg.ID, Raft: msgs[start:end:end]}}
		if o.early {
			n.rd.Early = append(n.rd.Early, env)
		} else {
			n.rd.Messages = append(n.rd.Messages, env)
		}
		start = end
	}
	clear(n.raftOut) // the messages it points at
	n.raftOut = n.raftOut[:0]
}

// earlyRaft reports whether a Raft message may leave before the entries
// and hard state of its Ready are durable: everything but the responses
// that acknowledge them (etcd raft's msgsAfterAppend rule).
func earlyRaft(t pb.MessageType) bool {
	switch t {
	case pb.MsgAppResp, pb.MsgVoteResp, pb.MsgPreVoteResp:
		return false
	}
	return true
}

// flush proposes the partition's buffered events as one entry (as few as
// MaxEntryBytes allows).
func (n *Node) flush(p *partition) {
	if len(p.props) == 0 {
		return
	}
	n.wake(p, false)
	// Held leases ride along: in an entry that goes anyway they cost
	// nothing, where alone, at their time, they would cost one; and so do
	// delivery records.
	buf := n.takeDeferred(p, append(p.props, n.takeNotes(p)...))
	p.props = nil
	n.proposeEvents(p, buf)
	if len(p.props) == 0 && cap(buf) <= maxReusedProps {
		// The events are encoded in the entry and nothing kept them (a
		// refused proposal is kept in p.props): the buffer serves the
		// next entry, cleared of the results and specs it pointed at.
		clear(buf)
		p.props = buf[:0]
	}
}

// maxReusedProps bounds the proposal buffer a partition keeps between
// entries (an Event is a few hundred bytes): a burst's larger buffer goes
// to the collector.
const maxReusedProps = 4096

// proposeEvents proposes evs as one entry, or, when they encode over
// MaxEntryBytes, as two halves in order (each split again if need be).
func (n *Node) proposeEvents(p *partition, evs []shard.Event) {
	data := n.encode(&shard.Batch{Origin: n.holder, Events: evs})
	if len(data) > MaxEntryBytes && len(evs) > 1 {
		half := len(evs) / 2
		n.proposeEvents(p, evs[:half:half])
		n.proposeEvents(p, evs[half:])
		return
	}
	n.stats.Entries++
	if err := p.rn.Propose(bytes.Clone(data)); err != nil { // Raft keeps data; encode reuses its buffer
		n.stats.Entries--
		n.proposalDropped(p, evs)
	}
}

// proposalDropped handles events Raft refused. A leader that still serves
// keeps them for the next try (Raft refuses proposals while it transfers
// leadership); the partition is not marked dirty, so the node does not
// spin: the next Raft tick or message retries. Otherwise leases go back to
// the queue, this peer's own outcomes go to the outbox (for whoever leads
// now), and the rest is dropped: the new leader derives it again from the
// committed state.
func (n *Node) proposalDropped(p *partition, evs []shard.Event) {
	if p.serving {
		p.props = append(evs, p.props...)
		return
	}
	p.shard.Unlease(evs)
	n.releaseLeases(evs)
	for i := range evs {
		if evs[i].Type == shard.EvLeased {
			delete(n.heldGrants, evs[i].Task)
		}
	}
	n.dropSubmits(evs)
	for i := range evs {
		e := &evs[i]
		if (e.Type == shard.EvSucceeded || e.Type == shard.EvFailed || e.Type == shard.EvExpired) && e.Holder == n.holder {
			n.forward(shard.Outcome{Task: e.Task, Round: e.Round, Holder: e.Holder, OK: e.Type == shard.EvSucceeded,
				Result: e.Result, Error: e.Error, Permanent: e.Permanent, TimedOut: e.TimedOut, Lost: e.Type == shard.EvExpired})
		}
	}
}

func (n *Node) readyPartition(p *partition) {
	rd := p.rn.Ready()
	u := wal.Update{Partition: uint32(p.id)}
	if !raft.IsEmptySnap(rd.Snapshot) {
		n.installSnapshot(p, rd.Snapshot)
		u.Snapshot = rd.Snapshot
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		u.HardState = rd.HardState
	}
	u.Entries = rd.Entries
	if err := p.storage.Apply(wal.Update{HardState: u.HardState, Entries: u.Entries}); err != nil {
		panic(fmt.Sprintf("peer: partition %d: in-memory raft storage refused a Ready: %v", p.id, err))
	}
	hasSnap := !raft.IsEmptySnap(u.Snapshot)
	if !raft.IsEmptyHardState(u.HardState) || hasSnap || len(u.Entries) > 0 {
		n.rd.Persist.Updates = append(n.rd.Persist.Updates, u)
	}
	// A snapshot must be durable before the follower acknowledges it (Raft's
	// MustSync does not count snapshots): else a crash loses what the
	// leader believes this replica holds.
	n.rd.MustSync = n.rd.MustSync || rd.MustSync || hasSnap
	for i := range rd.Messages {
		m := &rd.Messages[i]
		to, ok := n.mesh.peerOf(m.To)
		if !ok {
			continue // a peer that left the membership
		}
		if p.abdicated && leaderTraffic(m.Type) {
			// Silent, so that the voters elect another (abdicate). Raft
			// waits for a snapshot's report: it failed.
			if m.Type == pb.MsgSnap {
				n.snapSent = append(n.snapSent, snapReport{p: p, to: m.To, failed: true})
			}
			continue
		}
		if m.Type == pb.MsgHeartbeatResp && !p.quiesced && bytes.Equal(m.Context, quiesceCtx) {
			m.Context = nil // a marked heartbeat that did not quiesce this replica: wake the leader
		}
		if p.leader {
			n.stampHeartbeat(m)
			if n.holdCommit(p, to, m) {
				continue
			}
		}
		n.sendRaft(to, p, m)
		if m.Type == pb.MsgSnap {
			n.snapSent = append(n.snapSent, snapReport{p: p, to: m.To})
		}
	}
	for i := range rd.CommittedEntries {
		n.applyEntry(p, &rd.CommittedEntries[i])
	}
	if hasSnap {
		n.startSnapshotLeases(p)
	}
	if rd.SoftState != nil {
		n.softState(p, rd.SoftState)
	}
	n.advRds = append(n.advRds, pending{p: p, rd: rd})
}

// Advance tells the node the Ready was handled. The node reuses the arrays
// of rd's slices but Gossip: the driver keeps nothing of them (a Log
// writes the batch in Append, wal.Batch.Join copies, the DriverIOs copy
// the runs, aborts, webhook jobs, replies and changes they keep, the
// transport encodes a message in Send, and the simulator's network copies
// each envelope into its delivery). What an envelope points at (a Raft
// message, a heartbeat, grants) is not reused.
func (n *Node) Advance(rd Ready) {
	n.rd.Persist.Updates = reuse(n.rd.Persist.Updates, rd.Persist.Updates)
	n.rd.Persist.OutboxPut = reuse(n.rd.Persist.OutboxPut, rd.Persist.OutboxPut)
	n.rd.Persist.OutboxDel = reuse(n.rd.Persist.OutboxDel, rd.Persist.OutboxDel)
	n.rd.Run = reuse(n.rd.Run, rd.Run)
	n.rd.Abort = reuse(n.rd.Abort, rd.Abort)
	n.rd.Replies = reuse(n.rd.Replies, rd.Replies)
	n.rd.Changes = reuse(n.rd.Changes, rd.Changes)
	n.rd.QueueWaits = reuse(n.rd.QueueWaits, rd.QueueWaits)
	n.rd.ScheduleLags = reuse(n.rd.ScheduleLags, rd.ScheduleLags)
	n.rd.Notify = reuse(n.rd.Notify, rd.Notify)
	n.rd.Early = reuse(n.rd.Early, keptEnvelopes(rd.Early))
	n.rd.Messages = reuse(n.rd.Messages, keptEnvelopes(rd.Messages))
	for _, a := range n.advRds {
		a.p.decoded = decodedSnap{} // installed by the Ready, or ignored by Raft
		a.p.rn.Advance(a.rd)
		n.markDirty(a.p.id)
		if a.p.recoverTo != 0 {
			n.recovered(a.p)
		}
		if !n.mustLeave(a.p) {
			n.maybeSnapshot(a.p) // not of a partition left below
		}
	}
	n.advRds = n.advRds[:0]
	// Snapshots were handed to the transport; if one is lost, the follower
	// rejects the next append and the leader sends another.
	for _, s := range n.snapSent {
		status := raft.SnapshotFinish
		if s.failed {
			status = raft.SnapshotFailure
		}
		s.p.rn.ReportSnapshot(s.to, status)
	}
	n.snapSent = n.snapSent[:0]
	n.leaveQueued()
}

// reuse returns the array of done, a handled Ready's slice, emptied for
// the next Ready (one append's growth fewer per Ready) and cleared of what
// it pointed at, unless the next Ready has its own already (cur).
func reuse[S ~[]E, E any](cur, done S) S {
	if cur != nil {
		return cur
	}
	clear(done)
	return done[:0]
}

type snapReport struct {
	p      *partition
	to     uint64
	failed bool // not sent
}

func (n *Node) softState(p *partition, ss *raft.SoftState) {
	leader := ss.RaftState == raft.StateLeader
	if leader == p.leader {
		return
	}
	p.leader = leader
	n.stats.LeaderChanges++
	p.term = p.rn.BasicStatus().Term
	p.acked = nil
	p.commits = nil
	p.abdicated, p.abdications = false, 0
	if leader {
		p.acked = map[uint64]ack{}
		p.leadSince = n.now
		// Stamped heartbeats at once: the lease rests on their answers
		// (lease.go), and Raft's first comes a heartbeat period later.
		n.wakeFollowers(p, p.rn.BasicStatus().Commit)
	}
	if !leader {
		n.stopServing(p)
		if n.mustLeave(p) {
			n.queueLeave(p) // removed while it led (leave.go)
		}
	}
}

// stopServing ends this node's service of partition p (it lost or gave up
// the leadership): buffered proposals are dropped or handed on, its own
// leases' slots are released, outcomes it proposed go to the next owner,
// and waiting requests fail so that clients retry elsewhere.
func (n *Node) stopServing(p *partition) {
	if !p.serving {
		// A leader deposed before it served, or abdicating again after
		// it resumed: what it proposed meanwhile will not apply here.
		props := append(n.takeHeld(p), p.props...)
		p.props = nil
		n.proposalDropped(p, props)
		n.failRequests(p.id)
		return
	}
	p.serving = false
	n.timers.known = false
	props := append(n.takeHeld(p), p.props...)
	p.props = nil
	n.proposalDropped(p, props)
	n.releaseLostLeases(p.id)
	n.handOver(p)
	p.shard.SetLeader(false, n.now)
	n.failRequests(p.id)
}

// applyEntry applies one committed entry of partition p.
func (n *Node) applyEntry(p *partition, e *pb.Entry) {
	p.applied = e.Index
	p.logBytes += len(e.Data)
	switch e.Type {
	case pb.EntryConfChange:
		var cc pb.ConfChange
		if err := cc.Unmarshal(e.Data); err != nil {
			n.rejectEntry(p, e, err)
			return
		}
		n.applyConfChange(p, e, &cc)
	case pb.EntryConfChangeV2:
		var cc pb.ConfChangeV2
		if err := cc.Unmarshal(e.Data); err != nil {
			n.rejectEntry(p, e, err)
			return
		}
		n.applyConfChange(p, e, &cc)
	default:
		if len(e.Data) == 0 {
			n.maybeServe(p, e.Term)
			return
		}
		buf, tasks := n.decoded, n.decodedTasks
		n.decoded, n.decodedTasks = nil, nil // for as long as its events are applied
		b, tasks, err := shard.DecodeBatchReusing(e.Data, buf, tasks)
		if err != nil {
			n.rejectEntry(p, e, err)
			return
		}
		rejected := p.shard.Rejected()
		n.applyBatch(p, &b)
		n.stats.RejectedEntries += int(p.shard.Rejected() - rejected)
		// Nothing keeps an applied event, nor a submitted group's task
		// list (the shard and the node copy what they need): the next
		// entry decodes into the same slices. A 1,000-task group's list
		// is 184 KB, garbage at once otherwise.
		if evs := b.Events; cap(evs) <= maxReusedProps && cap(evs) >= cap(buf) {
			clear(evs)
			n.decoded = evs[:0]
		} else {
			n.decoded = buf
		}
		if cap(tasks) <= maxReusedTasks {
			clear(tasks) // the payloads and names it points at
			n.decodedTasks = tasks[:0]
		}
	}
}

// maxReusedTasks bounds the room for decoded task specs a node keeps
// between entries (a TaskSpec is 184 bytes).
const maxReusedTasks = 8192

// applyConfChange applies a committed configuration change, or rejects
// one that Raft cannot apply (it removes every voter, or leaves a joint
// configuration it is not in). Raft panics on such a change before it
// changes anything (raft.applyConfChange checks with its Changer first);
// every replica holds the same entry and rejects it alike.
func (n *Node) applyConfChange(p *partition, e *pb.Entry, cc pb.ConfChangeI) {
	defer func() {
		if v := recover(); v != nil {
			n.rejectEntry(p, e, fmt.Errorf("%v", v))
		}
	}()
	old := p.conf
	p.conf = p.rn.ApplyConfChange(cc)
	p.confAt, p.confApplied = time.Time{}, n.now
	// A new replica catches up from a snapshot, which must name it in its
	// ConfState (Raft ignores one that does not): take one now. A change
	// that only promotes, demotes or removes needs none: the last snapshot
	// names every replica still in the configuration.
	if addsReplica(old, p.conf) {
		p.forceSnap = true
	}
	n.confApplied(p, old)
}

// addsReplica reports whether conf names a replica that old does not.
func addsReplica(old, conf *pb.ConfState) bool {
	for _, set := range [][]uint64{conf.Voters, conf.Learners, conf.LearnersNext} {
		for _, rid := range set {
			if !names(old, rid) {
				return true
			}
		}
	}
	return false
}

// rejectEntry skips a committed entry that cannot be applied (a leader
// proposed what no replica can decode: a bug, or a hostile peer with the
// swarm key). Every replica holds the same bytes and skips it alike, so
// the replicas stay equal, and the peer keeps serving instead of
// crashing on it, and again on every restart that replays it.
func (n *Node) rejectEntry(p *partition, e *pb.Entry, err error) {
	n.stats.RejectedEntries++
	n.log.Error("committed entry rejected", "partition", p.id, "index", e.Index, "type", e.Type.String(), "err", err)
}

// maybeServe starts serving a partition once its leader has applied the
// empty entry of its own term: from then on its state holds everything
// committed before, so it may propose from it.
func (n *Node) maybeServe(p *partition, term uint64) {
	if !p.leader || p.serving || term != p.term {
		return
	}
	p.serving, p.thawed, p.stalled = true, false, false
	p.abdications = 0
	p.servedFrom, _ = p.storage.LastIndex()
	p.shard.SetLeader(true, n.now)
	// Leases held by a former run of this peer, by a dead peer, or by a
	// former run of a live one cannot be confirmed: they run again in the
	// next round.
	p.propose(p.shard.ExpireHolders(n.now, n.voidHolder))
	n.markDirty(p.id)
}

// voidHolder reports whether a lease held by holder (ID#Boot) can no
// longer finish: held by a former run of this peer, by a dead peer, or by
// a former run of a live peer whose present run this node heard (its boot
// is another). A peer that restarted is forgotten as a holder when this
// node hears its new run (mesh.heard), but only in the partitions it
// serves then: a partition this node came to lead later, whose leader
// was down when the holder restarted within DeadAfter, kept the lease of
// the holder's former run until the task's timeout (a restart loop on
// real processes, two peers killed at once: a sleep task stayed RUNNING
// for its 10 minutes). A holder without a boot (an older peer's) is
// taken as live.
func (n *Node) voidHolder(holder string) bool {
	peer := shard.HolderPeer(holder)
	if peer == n.cfg.ID {
		return holder != n.holder
	}
	mb := n.mesh.members[peer]
	if mb == nil || mb.state == PeerDead {
		return true
	}
	return mb.boot != "" && peer != holder && holder != peer+"#"+mb.boot
}

// dropFinished removes from this Ready the local runs of tasks that the
// same Ready's applies finished: in the run's round (two leases of one
// round in the log, a repeated creation's initial lease, proposed before
// the first creation applied, and the lease the leader gave the task once
// it did: the first applies and starts a run right before the second's
// outcome), or in any round when the run is of this node's own lease not
// applied yet (held back or speculative, whose task was canceled: the
// lease can take nothing). A run of a grant whose retry this replica has
// not applied yet (the task finished here in an earlier round) goes on.
// A run that starts after its task finished is wasted, and a client that
// read the outcome would see it start. An external worker's run is
// dropped as a local one is: a repeated creation's initial lease whose
// speculative run a worker had finished started a second run of the
// round, handed to a worker after the task succeeded (simulate: seed
// 110017, --peers 3 --workers 2).
func (n *Node) dropFinished() {
	runs := n.rd.Run[:0]
	for _, r := range n.rd.Run {
		if n.running[r.Task] == r.Round && n.finished(r) {
			n.endRun(r.Task)
			continue
		}
		runs = append(runs, r)
	}
	n.rd.Run = runs
}

// finished reports whether run r's task finished, for dropFinished.
func (n *Node) finished(r Run) bool {
	p := n.parts[n.PartitionOf(r.Task.Group())]
	if p == nil {
		return false
	}
	round, done := p.shard.Finished(r.Task)
	if !done {
		return false
	}
	sr, own := n.spec[r.Task]
	return round >= r.Round || own && sr.round == r.Round
}

// dropAborted removes from this Ready the runs that the same Ready aborts
// (a lease and its task's cancellation applied together): they never
// start, and their slots are free again.
func (n *Node) dropAborted() {
	if len(n.rd.Abort) == 0 || len(n.rd.Run) == 0 {
		return
	}
	aborted := make(map[RunRef]bool, len(n.rd.Abort))
	for _, a := range n.rd.Abort {
		aborted[a] = true
	}
	runs := n.rd.Run[:0]
	for _, r := range n.rd.Run {
		if aborted[RunRef{r.Task, r.Round}] && n.running[r.Task] == r.Round {
			n.endRun(r.Task)
			continue
		}
		runs = append(runs, r)
	}
	n.rd.Run = runs
}
