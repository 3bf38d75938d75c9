// Package badgerwal is the wal.Log of a real needle peer: one
// github.com/dgraph-io/badger/v4 database per peer holding every
// partition's Raft log, hard state and snapshot, the outbox and the meta
// records. It follows the rules of package wal (wal.ApplyUpdate on write,
// wal.VerifyState on Load) and passes the wal/waltest conformance suite.
// It lives apart from wal so that the pure core, which needs only the
// wal.Log contract, does not depend on Badger.
//
// Sync makes Appends durable with one fdatasync of a redo journal beside
// Badger (journal.go: every change's Badger operations, replayed at Open);
// Badger's own files are synced at checkpoints.
//
// Open a Log with Open and release it with Close. One Append is atomic:
// a Batch larger than one Badger transaction is written in several, in an
// order that leaves a valid log after a crash between them (see split.go);
// one record over MaxRecord fails with wal.ErrBatchTooBig. Badger runs
// without compactors of its own: the Log compacts when writes fill its
// levels (see compact.go), so an idle peer's database wakes nothing.
//
// # Key layout
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
package badgerwal
