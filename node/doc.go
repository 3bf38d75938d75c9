// Package node is needle's protocol: one peer's Node, composing the
// partitions' state machines (shard), the ring (ring), work stealing
// (steal) and the Raft groups (go.etcd.io/raft/v3) of the partitions the
// peer holds, plus membership and failure detection, replica changes,
// placement, webhook scheduling and the binary message codec (wire.go).
//
// The package is pure: it does no IO, starts no goroutines, reads no clock
// and draws randomness only from the seeded NodeConfig.Rand. Time is an
// argument (NewNode, Tick), messages come in through Step and leave in
// Ready, and so the daemon (peer/) and the simulator (simulate/) run
// exactly the same code. TestPure (pure_test.go) proves the package links
// no network, storage, metrics or process library.
//
// # Rooms
//
//   - node.go, ready.go, driver.go: the Node, its Config, Ready, Advance
//     and the Driver that does a Ready's duties in order.
//   - step.go, wire.go, raftcheck.go: inbound messages, their codec and the
//     checks a Raft message passes before Raft steps it.
//   - mesh.go, partition.go, snapshot.go, lag.go: membership, heartbeats,
//     the ring, replica sets and changes, one partition's Raft group.
//   - quiesce.go: partitions that stop ticking while nothing happens.
//   - request.go, schedule.go, trigger.go, retry.go, list.go, audit.go:
//     requests from the API (submit, cancel, schedules, lists).
//   - steal.go, pace.go, placement.go, external.go: who runs what: leases
//     to this peer, to thieves and to external workers.
//   - notify.go, drain.go, settled.go: webhooks, draining, readiness.
//
// # Driving it (Driver: the runtime's loop, the simulator, the tests)
//
//  1. Feed inputs: Step for every message from another peer (decoded with
//     DecodeMessage, never trusted), Tick with the current time at least
//     every RaftTick/10, Report for every finished run, Disconnected when
//     the transport loses its last connection to a peer, and the request
//     methods (Submit, Cancel, ...) with a request id from NextRequest.
//  2. While HasReady, take rd := Ready() (ticking the node first when a
//     persist took time) and, in order:
//  3. send rd.Early: Raft messages that vouch for no local state (a
//     leader's appends, snapshots and heartbeats, vote requests) may leave
//     before the Ready is durable, so followers write in parallel with
//     the leader, and so may steal requests and grants (a grant's lease
//     is committed, or held back: it may ride along in an entry of the
//     Ready, which commits only once written, never in one the Ready
//     commits before writing it); the core,
//     not the driver, decides which they are;
//  4. start rd.Run, cancel rd.Abort, make the webhook calls of rd.Notify
//     and report each with NotifyDone. None of them vouches for local
//     state: a run's outcome is accepted only through the log, once the
//     lease it ran under applies (speculate.go), and a webhook reports a
//     state already committed; so a handler (an external worker's poll
//     answered) overlaps the sync of step 5;
//  5. persist rd.Persist (Log.Append, then Log.Sync when rd.MustSync);
//  6. send rd.Messages and rd.Gossip; none may leave before step 5, since
//     grants, acks, outcomes and Raft's responses vouch for durable state;
//  7. deliver rd.Replies, use rd.Changes (waiters, metrics);
//  8. call Advance(rd).
//
// Steps 2 to 8 are Driver.Drive over a DriverIO: every caller that steps a
// Node (peer/loop.go, simulate/handler.go, nodetest and this package's
// tests) goes through it, so all of them take one path through Ready.
//
// A reply, or a grant of an applied lease, is sent only after the entries
// it depends on are persisted by this peer and committed by the
// partition's majority (a held lease's grant vouches for nothing: its run
// counts through the log): an
// acknowledged task is durable on a majority, and exactly one outcome per
// task is accepted (the round fencing of shard and steal).
//
// # Transcripts
//
// testdata/*.txt pin the protocol's hard cases (replica changes, a dead
// voter kept until replaced, abdication, stale grants, round fencing,
// failover of outcomes and schedules, draining, early sends and a crash
// between them and the persist) as transcripts over nodetest.Mesh: a
// command per step and the events it caused (TestTranscripts). After a
// change of behaviour, regenerate them with
// go test ./node -run TestTranscripts -rewrite and review the diff.
package node
