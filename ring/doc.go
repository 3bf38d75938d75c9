// Package ring places needle's partitions on peers. It is a pure function of
// its inputs: no IO, no goroutines, no clock, no randomness.
//
// # What it owns
//
// The vocabulary of placement (PeerID, Epoch) and three mappings:
//
//   - key -> partition: PartitionOf(key, partitions) = xxhash64(key) mod
//     partitions. It needs no Ring, so any peer, client or the simulator can
//     route a group id. The partition count is fixed for the life of a mesh.
//   - partition -> replica set: New(cfg, epoch, members) builds a Ring from
//     the membership (peers that joined and were not forgotten; not the live
//     set, so a crash moves leadership, never data). Each partition gets
//     min(Replicas, members) distinct peers. The first is the partition's
//     owner under consistent hashing with bounded loads
//     (github.com/buraksezer/consistent v0.10.0, xxhash, 20 points per
//     member, load factor Config.Load; primary.go computes it as
//     consistent.New does, with the circle sorted once instead of once per
//     member): no peer is the primary of more than
//     ceil(floor(partitions/members) * Load) partitions. The rest are the
//     members that follow the primary on the circle of member-name hashes,
//     which is what consistent.GetClosestNForPartition returns
//     (PlacementCircle, the default). With Config.Placement =
//     PlacementSpread the rest are chosen by rendezvous hashing under a load
//     limit, after a few reserved per member (spread.go): at 1,000 members
//     the circle lets a stretch of members with few primaries lead only
//     half the mean, the spread placement keeps every member within 0.73 to
//     1.22 of it (docs/performance.md, "Leadership at scale"). Moved lists
//     the partitions whose replica set changes between two rings, i.e. the
//     Raft configuration changes of a join or forget.
//   - partition -> preferred owner: PreferredOwners(live) picks, for each
//     partition, the live replica that should be its Raft leader, so that
//     leadership is even across live peers. See its documentation for the
//     rule; in short: first live replica, docs/design.md's one pass from peers
//     above the (ceiling) mean to replicas below it, then shifts along
//     chains of shared partitions until no peer could take one from a peer
//     leading two more. With 256 partitions and all peers live this gives
//     min/mean >= 0.98 for 3 to 10 peers and >= 0.59 for 50 (every peer
//     leads some), where the ring's primaries alone give 0.35-0.9 for 3 to 10
//     peers and leave some peers of 50 leading nothing.
//
// # Determinism
//
// Every peer that builds a Ring from the same Config and the same membership
// gets the same replica sets, whatever the order of (or duplicates in) the
// members slice: New sorts and deduplicates them before placing them, as
// consistent's tie-breaks (points of the circle that two members' vnode
// names hash to) depend on insertion order, and never exposes map-ordered
// member lists. PreferredOwners is a function of the Ring and
// the live set alone: no history, no randomness. The Epoch is carried, not
// interpreted.
//
// # How to use it
//
//  1. Validate the mesh's Config once at the first start (Config.Validate)
//     and keep it; every peer must use the same one.
//  2. On every membership change (join or forget), bump the Epoch and call
//     New with the whole new membership. New fails, never panics, on a bad
//     config, an empty peer id, or more members than partitions (consistent
//     would panic: see Config.ValidateMembers).
//  3. Use Moved(old, new) to plan the Raft configuration changes, one member
//     at a time.
//  4. On every liveness change from the failure detector, call
//     PreferredOwners with the same live set on every peer; a replica whose
//     preferred owner differs from the current Raft leader campaigns or asks
//     for a leadership transfer.
//
// A Ring is immutable after New and safe for concurrent reads. Lookups
// (Partition, Replicas, IsReplica) cost tens of nanoseconds; New costs
// about 4-7 ms for 1,000 members and 4,096 partitions, 24-30 ms for 5,000 x
// 8,192 (PlacementSpread: 26 ms, 0.25-0.36 s), PreferredOwners about
// 50-100 us at 50 members.
package ring
