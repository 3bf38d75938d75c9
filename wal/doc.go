// Package wal is the durable log storage of one needle peer.
//
// # What it owns
//
// For each ring partition (a uint32): the Raft log entries, the Raft hard
// state and the latest snapshot. Besides them, the outbox (outcomes a peer
// must re-send until acknowledged, key -> bytes) and a meta key/value space
// (identity, cluster settings). Entry and record data are opaque bytes: wal
// knows nothing about tasks.
//
// This package is the contract and holds no storage engine: the Log
// interface, the rules every Log applies (ApplyUpdate, VerifyState), Memory
// (the simulator's disk, whose Crash drops the unsynced tail) and Storage,
// the in-memory raft.Storage of one partition that the pure peer core hands
// to raft.RawNode. The real peer's Log is in wal/badgerwal (one
// github.com/dgraph-io/badger/v4 database per peer), so that the pure core's
// dependencies hold no Badger. The package wal/waltest holds the
// conformance suite both Logs pass.
//
// # Caller's duties
//
//  1. At start, for each p in Partitions(): NewStorage(Load(p)). An error
//     wrapping ErrCorrupt means the disk is damaged: stop, do not guess.
//  2. For each loop iteration, collect every partition's Ready into one
//     Batch (Update per partition, plus outbox and meta changes) and call
//     Storage.Apply for each Update in the same order.
//  3. Append the Batch, then Sync, and only then send messages or answer
//     anything that promises durability (persist before send). One Sync per
//     iteration is the group commit that makes a disk Log fast.
//  4. Close on shutdown.
//
// # Orderings and guarantees
//
//   - A Batch is atomic: after a crash either all of it or none of it is
//     there. Within a Batch, updates apply in order, then OutboxPut,
//     OutboxDel, MetaPut.
//   - Within an Update: Snapshot, then HardState, then Entries, then
//     Compact, with the rules documented on Update (they match
//     raft.MemoryStorage, whose rules Storage keeps: memstorage.go).
//   - Sync makes every earlier Append durable. Appends are durable in order:
//     a crash never keeps a later Append while losing an earlier one.
//   - Load verifies the log invariants (see VerifyState) and, on disk, a
//     CRC32C on every stored value; it never panics on bad data.
package wal
