// Package shard is the pure state machine of the groups of one ring
// partition: the task model, DAG and pipeline readiness, the priority ready
// queue, the timing wheel for delays, backoffs and lease expiries, retries,
// cancellation, retention, and the event codec.
//
// It does no IO, starts no goroutines and reads no clock: every method that
// needs the time takes it as an argument, and retry jitter comes from the
// seeded Config.Rand. The runtime in package peer and the simulator are its
// only drivers.
//
// # State
//
// The state is the fold of committed events (Apply). Every replica of a
// partition applies the same events in the same order and so holds the same
// state; everything an apply needs (times, jitter, lease holder) is carried
// in the event. Apply re-checks fencing (round and holder) because the state
// may move between proposal and commit; an event that no longer fits
// changes nothing.
//
// # Driving it (the owner, i.e. the partition's Raft leader)
//
//  1. SetLeader(true, now) when the partition's leadership is gained (and
//     false when lost): it rebuilds the leader-local timers and ready state
//     from what was committed.
//  2. Turn commands into events: Submit, Lease, Report (an outcome, fenced by
//     round and holder), Renew, Cancel; and timers into events: Due(now) and
//     ExpireHolders. None of these changes the folded state.
//  3. Propose the events through the partition's Raft log; once committed,
//     Apply them (on every replica).
//  4. TakeChanges after Apply: tasks that reached a terminal state (wake
//     waiters), groups that finished, and RUNNING tasks that were canceled
//     (abort their handlers).
//  5. If a lease proposal is dropped, Unlease returns its tasks to the queue.
//
// # Invariants
//
//  1. A terminal task never changes state again (setState is only reached
//     from non-terminal states; checked by the fencing in apply).
//  2. A task is READY only when all its dependencies SUCCEEDED (depsLeft).
//  3. At most one outcome per round is accepted: Report and apply both check
//     that the task is RUNNING with the event's round and holder.
//  4. A task is in the ready queue iff it is READY and not in flight.
package shard
