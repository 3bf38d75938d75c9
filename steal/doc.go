// Package steal decides when an idle peer steals READY tasks, from whom and
// how many, and how a victim sizes its grant. It owns the Lease a grant
// carries on the wire. Like shard and ring it is pure: no IO, no goroutines,
// no clock (time is an argument), and randomness only from the seeded
// Config.Rand, so the simulator replays it exactly.
//
// The lease mechanics themselves live in shard: a lease is a leased event
// {task, round, holder, expiry} committed through the partition's Raft log
// before it is sent, an expired lease bumps the round and makes the task
// READY again, and the owner accepts an outcome only for the task's current
// round and holder (shard.Shard.Report, re-checked by Apply). Stealing is not
// a special case: a thief is just another holder. fence_test.go checks that
// safety property against a reference model.
//
// # Policy
//
// Choice of victim: power of two choices on gossiped load (Mitzenmacher,
// "The Power of Two Choices in Randomized Load Balancing", 2001). Among the
// peers with a fresh load (not older than StaleAfter), some READY tasks and
// no backoff, two distinct candidates are drawn at random and the one with
// more READY tasks is asked. Asking the single most loaded peer would send
// every idle peer to the same victim on the same stale gossip; two random
// choices spread thieves while still favouring loaded victims.
//
// Direct probes: gossip comes about once a second, and waiting a gossip
// round before stealing costs ~0.12 LB on W3 (docs/design.md). So a thief does
// not wait for gossip: it asks as soon as a slot frees, and every grant reply
// (empty or not) carries the victim's fresh load, which the peer feeds to
// Observe. A thief that keeps stealing from a loaded victim thus sees that
// victim's load after every round trip, not every second.
//
// How much: up to half of the victim's READY tasks, at least 1, at most
// Prefetch (2) times the thief's free slots (a small queue so that slots do
// not idle for a round trip between grants), at most MaxBatch. The victim
// grants GrantSize: half of its READY tasks beyond what its own free slots
// take now, rounded up. Halving splits the excess evenly between the two
// peers' slots, leaves the rest for other thieves, and cannot ping-pong:
// stolen tasks are RUNNING under a lease, never READY again at the thief.
//
// Backoff: a refusal, an empty grant or a request unanswered after
// RequestTTL puts that victim in backoff for BackoffMin, doubling with each
// refusal in a row up to BackoffMax; a non-empty grant resets it. Other
// victims stay eligible. One request is outstanding at a time.
//
// # Driving it (the peer's loop)
//
//  1. Observe every gossiped load, and the load carried by every grant
//     reply. Forget a peer that died or left.
//  2. Call Next with this peer's own load after every local change that may
//     free a slot or empty the local ready queue (a task finished, a lease
//     expired, a grant was consumed, a reply arrived), and on the periodic
//     tick, not only on gossip. Count in Load.Running every task leased to
//     this peer, running or queued for a slot.
//  3. When Next returns ok, send a steal request for n tasks to the victim
//     over the peer's stream (never over gossip). The victim sizes it with
//     GrantSize, commits one leased event per task through Raft, and only
//     then replies with the Leases (and specs) and its fresh load.
//  4. On the reply call Granted(now, victim, len(leases)) (0 counts as a
//     refusal), or Refused on an error reply or an unreachable victim. Then
//     go to 1 with the reply's load and 2.
//  5. Run each granted task under its Lease and report its outcome with
//     Lease.Outcome through the outbox until acknowledged.
//
// # Guarantees
//
//  1. Next never returns the peer itself, and returns n in [1, MaxBatch].
//  2. Next never asks while a request is outstanding and younger than
//     RequestTTL, nor a peer with a stale load, no READY task or a backoff.
//  3. The same seed and the same sequence of calls give the same decisions:
//     candidates are drawn from the sorted peer ids.
package steal
