// Package simulate is needle's deterministic discrete-event simulator: it
// runs many node.Node values (the core needled ships, unchanged) on a
// virtual clock and a simulated network, injects faults, and checks the
// guarantees of docs/design.md after every step. One goroutine runs it (a
// second only hashes, in order, the bytes the run hands it: hashlog.go); it
// never reads real time (except to report wall time) or iterates a map into
// its output: a run is a function of its Config, and Config.Seed replays it.
//
// # What it owns
//
//   - the event loop (sim.go, queue.go): a heap of events ordered by
//     (virtual time, scheduling sequence), with those for the current
//     instant in a FIFO beside it, and one math/rand/v2 PCG source
//     from which everything is drawn (workload, latencies, faults, handler
//     outcomes, each Node's Rand);
//   - the nodes (node.go, handler.go): a node.Node each, with a wal.Memory
//     as its disk and its own clock (clock.go: virtual time bent by skew;
//     the node sees only that). A node wakes (Tick) at the deadline its
//     Node reports (Node.NextDeadline), read on its own clock;
//   - the network (network.go, mesh.go): per-link latency, FIFO links
//     unless reordering, cuts, drop and duplication; it carries
//     peer.Envelope between nodes, gossip (Ready.Gossip to every node), and
//     the client's requests and replies; the transport's connections
//     (links.go): a message between two nodes needs an address known to
//     one side (or the seed, node 0, which every node dials), and gossip
//     reaches the unconnected only once both are up for a second;
//   - the client (client.go) and workloads (workload.go, mixed.go);
//   - faults (faults.go, plan.go) and the checker (checker.go, sweep.go);
//   - the report and the event-log hash (report.go).
//
// # The loop
//
// Each event is one input to one node (a wakeup, a delivered message, a
// handler outcome, a client request) or an action of the client or a
// fault. A node input first calls Node.Tick(now) with the node's own time,
// as the runtime does before every input, then the verb (Step, Submit,
// Cancel, Report). The inputs of one instant are followed by one drain,
// which hands every Ready to node.Driver, the driver peer/loop.go uses,
// with simIO doing its IO in the contract's order (node/doc.go):
//
//  1. send rd.Early (a leader's appends, heartbeats, vote requests,
//     steal requests and grants)
//     through the network: the disk's writes take no virtual time, so
//     they leave at the drain's instant, before the rest;
//  2. wal.Memory.Append(&rd.Persist), then Sync if rd.MustSync;
//  3. send rd.Messages through the network, rd.Gossip to every node;
//  4. hand rd.Changes to the checker; start rd.Run as handler jobs that
//     finish at now + the duration the task's payload encodes, with the
//     outcome drawn from its failure rates (past the task's timeout: a
//     timed-out failure at the timeout); cancel rd.Abort; make rd.Notify's
//     webhook calls;
//  5. send rd.Replies back to the client;
//  6. Node.Advance(rd); repeat while HasReady, ticking the node first.
//
// # Faults
//
// Each kind enabled in Config.Faults happens once or twice at seeded times
// over the fault window (the submissions plus a few seconds), never
// overlapping itself: Partition (cut links between two sides, the client
// on side 0; one in three cuts only the messages from side 1 to side 0, so
// side 1 is not heard but hears), Slow (a peer's handlers take 2-10x as
// long and its messages 5-100 ms more), Crash (kill -9: the node's jobs, held inputs and requests
// vanish, wal.Memory.Crash drops the unsynced tail, and the node restarts
// from its disk with a new Boot; with skew on, its clock may come back up
// to 2 s off either way), churn (a clean stop, drained first as needled
// drains on SIGTERM, for at most 30 s, and a later restart; with
// more peers than replicas also Join, a peer with an empty disk added
// late, and, with 3 or more replicas, Leave, a peer gone for good once the
// mesh is healthy and forgotten by hand: with fewer, its partitions would
// lose their majority, which the guarantees assume), Clog
// (drop, dup, reorder), Pause (the node is neither ticked nor stepped;
// messages and handler outcomes wait and arrive late on resume, when
// fencing must refuse outcomes whose lease moved on) and Skew (Linear
// drift, a forward Step, or Periodic drift). w4 adds docs/design.md's kill -9
// of the first group's owner mid-run.
//
// # Invariants and where they are checked
//
//  1. No acknowledged group is lost: after a restart, checker.durable
//     looks every acknowledged group up on the node serving it (every
//     virtual second until all were found); samples and the final sweep
//     re-read tasks (sweep.go). A group its serving node does not know is
//     a violation.
//
//  2. One accepted outcome per task, terminal states never change:
//     checker.observe compares every terminal Change (and the result read
//     from the node) with the first observation; checker.run refuses a Run
//     of a task observed terminal; sample and final re-read states and
//     results; checkHistory refuses two outcomes for one round, or
//     anything after SUCCEEDED or CANCELED.
//
//  3. No start before the dependencies SUCCEEDED (dag deps, the previous
//     pipeline stage): checker.run, on every Run.
//
//  4. Idempotent keys: checker.submitted, on every successful submit reply
//     (duplicates included): same group, the same task ids, and at most
//     one reply saying Created, never to a deliberate repeat nor sent
//     after the acknowledgement. Judged by when the node sent a reply, not
//     when it arrived: with reordering the creating reply to a request may
//     arrive after a Created=false reply to its network duplicate.
//
//  5. Replicas agree: every replica on a running node that applied the same
//     Raft index holds the same state (Node.Digest: a hash of the shard's
//     snapshot); checked at the end of every run and, for runs of up to
//     20,000 tasks, every 5 virtual seconds after the faults heal
//     (sim.checkReplicas, mesh.go).
//
//  6. External workers (Config.Workers, workers.go): a worker's report
//     reaches the node only as the outcome of that worker's own lease, in
//     its round, while the hub still holds it, and once; a repeat of an
//     accepted report is answered as a repeat (checker.workerVerdict, on
//     every report the simulated hub answers).
//
// Liveness: after the last fault heals, every group must be acknowledged
// and finished within Config.Liveness of the later of its submission (or
// acknowledgement) and the heal (checker.liveness, every virtual second);
// MaxSimTime bounds the run. A panic in the core is reported as a
// violation too. The first violation stops the run; Report.Violations
// says which invariant broke, when, and what.
//
// # Replaying a seed
//
// Every run prints its options first (Config.String); a failing run
// prints Config.ReplayCommand, e.g.
//
//	needle simulate --seed 17 --peers 3 --tasks 200 --workload mixed --faults crash,pause,skew
//
// which replays it event for event: Report.Hash (FNV-64a over every
// persisted Raft entry and every Run, in order) is the same for the same
// options, and TestDeterministic checks it.
package simulate
