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
// A Log has two implementations: Badger (one github.com/dgraph-io/badger/v4
// database per peer) and Memory (the simulator's disk, whose Crash drops the
// unsynced tail). Storage is the in-memory raft.Storage of one partition
// that the pure peer core hands to raft.RawNode. The package wal/waltest
// holds the conformance suite both Logs pass.
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
//     iteration is the group commit that makes Badger fast.
//  4. Close on shutdown.
//
// # Orderings and guarantees
//
//   - A Batch is atomic: after a crash either all of it or none of it is
//     there. Within a Batch, updates apply in order, then OutboxPut,
//     OutboxDel, MetaPut.
//   - Within an Update: Snapshot, then HardState, then Entries, then
//     Compact, with the rules documented on Update (they match
//     raft.MemoryStorage, which Storage.Apply uses).
//   - Sync makes every earlier Append durable. Appends are durable in order:
//     a crash never keeps a later Append while losing an earlier one.
//   - Load verifies a CRC32C on every stored value and the log invariants
//     (see verifyState); it never panics on bad data.
//
// # Badger key layout
//
// Every value is split into chunks of at most 256 KiB so that all data stays
// in Badger's memtable WAL and LSM tree, never in the value log. A chunk's
// key is its record's base key followed by the chunk number (4 bytes, big
// endian); integers are big endian, so entries sort by index.
//
//	p <part:4> e <index:8>  Raft entry (protobuf raftpb.Entry)
//	p <part:4> h            hard state (protobuf raftpb.HardState)
//	p <part:4> s            snapshot metadata (protobuf raftpb.Snapshot, no Data)
//	p <part:4> d            snapshot data
//	o <len:4> <key>         outbox record
//	m <len:4> <key>         meta record
//
// A chunk's value is: format version (1 byte), CRC32C (Castagnoli, 4 bytes)
// over the base key, chunk number, chunk count and payload; the chunk count
// (4 bytes); the payload.
package wal
