package node

import (
	"encoding/json"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

// MsgType says what a Message between peers carries. Values are part of
// the wire format: append only.
type MsgType uint8

const (
	MsgRaft      MsgType = iota + 1 // Raft messages of many partitions
	MsgHeartbeat                    // liveness, load and membership (gossip)
	MsgOutcome                      // handler outcomes for the owner
	MsgAck                          // the owner has the outcomes (accepted or stale)
	MsgStealReq                     // an idle peer asks for READY tasks
	MsgGrant                        // leases granted to a thief (committed first)
	// MsgReplicaAsk: a peer holding partitions the ring no longer places
	// on it, with no leader heard, asks their owner whether it is still a
	// replica (leave.go). Sent only to peers with FeatureLeave.
	MsgReplicaAsk
	// MsgReplicaGone: a leader tells a peer it is in none of the
	// partitions' applied configurations (leave.go).
	MsgReplicaGone
	MsgProbe // failure detection and membership updates (probe.go)
	numMsgTypes
)

var msgNames = [...]string{"", "raft", "heartbeat", "outcome", "ack", "steal", "grant", "replica-ask", "replica-gone", "probe"}

func (t MsgType) String() string {
	if t > 0 && int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// WireVersion is the first byte of every encoded Message.
const WireVersion = 1

// Message is what one peer sends another (or gossips to all).
type Message struct {
	Type MsgType
	From string // sender peer id (set by the sender; the transport's authenticated id wins)

	Raft      []RaftMsg    // MsgRaft
	Heartbeat *Heartbeat   // MsgHeartbeat
	Probe     *Probe       // MsgProbe
	Outcomes  []OutcomeMsg // MsgOutcome
	Acks      []AckMsg     // MsgAck
	Want      int          // MsgStealReq: tasks asked for
	Grants    []Grant      // MsgGrant
	Load      Load         // MsgStealReq, MsgGrant: the sender's load
	Refused   bool         // MsgGrant: nothing granted, back off
	// NotNow, on a refused MsgGrant, is "nothing granted until you have a
	// free slot": the victim's backlog is in its tail (steal.TailCap), and
	// the thief asks again when a slot frees, without backing off. It
	// travels as Refused's byte (2); an older peer reads a refusal.
	NotNow bool
	// Holder is, on a MsgGrant with grants, the incarnation of the thief
	// (id#boot) the leases are for: a peer restarted since its steal
	// request must not run leases held by its former run. On a
	// MsgStealReq, the thief's own incarnation, for a victim that has not
	// had its heartbeat yet. Appended to both; "" from an older peer.
	Holder string
	// Asks are the partitions of a MsgReplicaAsk, sorted.
	Asks []uint32
	// Gone are the answers of a MsgReplicaGone.
	Gone []GoneMsg
}

// GoneMsg tells a peer that the configuration partition Partition applied
// at index Index (committed: a leader holding its read lease applied it)
// names it neither as voter nor as learner.
type GoneMsg struct {
	Partition uint32
	Index     uint64
}

// RaftMsg is one Raft message of one partition.
type RaftMsg struct {
	Partition uint32
	Msg       *pb.Message
}

// Load is a peer's advertised load.
type Load struct {
	Ready   int // READY tasks in partitions it owns
	Running int // leases it holds
	Slots   int // its worker slots
}

// Heartbeat is gossiped about once a second.
type Heartbeat struct {
	Boot       string
	Partitions int
	Load       Load
	Members    []string // the sender's membership view (sorted)
	Forgotten  []string // peers removed from the mesh (sorted)
	Addrs      []string // the sender's transport addresses
	Draining   bool     // the sender is draining: do not hand it work
	// Appended (a heartbeat without them decodes as before): the sender's
	// labels ("key=value", sorted, unique) and how many of its READY tasks
	// it cannot run itself (pinned elsewhere, or requiring labels it lacks):
	// work only a matching thief can take.
	Labels   []string
	Stranded int
	// StrandedFor (appended after Stranded) names the peers that may run
	// those tasks, sorted; nil when none is named (an older peer, or more
	// than maxStrandedFor): then any peer may ask.
	StrandedFor []string
	// Features (appended after StrandedFor) says which committed events
	// the sender can apply beyond the first ones (FeatureRetry); 0 from
	// an older peer. A leader proposes such an event only when every
	// replica of the partition can apply it.
	Features uint64
	// Workers (appended after Features) are the external workers of the
	// sender, one entry per handler and worker labels, with how many more
	// tasks its waiting polls take (Want): an owner leases READY tasks of
	// an external handler only to peers that serve it, up to what they
	// want. nil from an older peer (it serves none).
	Workers []WorkerAd
	// Replicas and Placement (appended after the workers' ids) are the
	// sender's --replicas and --placement: like Partitions they are fixed
	// when a mesh is founded, and a peer that places otherwise computes
	// other replica sets, so its heartbeat is refused. Replicas is 0 from
	// an older peer, which is taken as before (unchecked).
	Replicas  int
	Placement ring.Placement
	// Inc (appended after Placement) is the sender's incarnation (probe.go);
	// 0 from an older peer. Sync (appended after Inc) asks for the
	// receiver's heartbeat in return: SyncJoin from a peer that knows no
	// member yet (a few members answer), SyncPull from a member's periodic
	// exchange (the receiver answers).
	Inc  uint64
	Sync uint8
	// Book (appended after Sync) is, on a heartbeat sent to one peer with
	// Sync or in answer to one, the addresses the sender knows of the
	// other members: a member learned from a membership list alone has
	// none, and a direct message needs a connection, which needs an
	// address from one side (probe_addr.go). nil on gossip.
	Book []PeerAddrs
	// Sum (appended after Book) is the digest of Members (mesh.sum): a
	// receiver whose membership has the same digest and size skips the
	// list. 0: none (an older peer), the list is compared.
	Sum uint64
	// Version (appended after Sum) is the sender's build version
	// (NodeConfig.Version), shown per peer in /v1/peers so that an operator
	// sees which peer runs which build during a rolling upgrade. "" from
	// an older peer (unknown).
	Version string
	// Recover (appended after Version) names the forgotten peers whose
	// loss an operator declared final with needle forget --unsafe-recover
	// (sorted): a partition whose every other voter is among them is
	// recovered by its last voter (recover.go). nil from an older peer.
	Recover []string
	// Claims (appended after Recover) are the sender's offers to recover
	// the partitions whose every voter is lost for good and of which it
	// and other surviving learners are learners (recover.go): of those
	// survivors, the one whose log is the most up to date recovers. nil
	// from an older peer, which recovers no such partition.
	Claims []RecoverClaim
}

// RecoverClaim is a learner's offer to recover a partition whose every
// voter is lost for good: the term and index of its log's last entry,
// and the learners of the configuration it applied that are not lost
// (itself included, peer ids, sorted).
type RecoverClaim struct {
	Partition   uint32
	Term, Index uint64
	Survivors   []string
}

// PeerAddrs is one member's transport addresses, heard second-hand.
type PeerAddrs struct {
	ID    string
	Addrs []string
}

// Heartbeat.Sync values.
const (
	SyncJoin uint8 = 1
	SyncPull uint8 = 2
)

// WorkerAd is what a peer's external workers serve: a handler, for workers
// carrying Labels ("key=value", sorted), and how many more tasks of it
// their waiting polls take.
type WorkerAd struct {
	Handler string
	Labels  []string
	Want    int
	// Workers (appended after every ad's Want, one list per ad) are the
	// ids of those workers, sorted: a scheduled broadcast to workers runs
	// one copy in each. nil from an older peer.
	Workers []string
}

// OutcomeMsg is a handler outcome reported by a lease holder.
type OutcomeMsg struct {
	Task      shard.TaskID
	Round     shard.Round
	Holder    string
	OK        bool
	Result    []byte
	Error     string
	Permanent bool
	TimedOut  bool
	// Lost (flag bit 3) hands the lease back: the external worker that
	// held it is gone (shard.Outcome.Lost). An older owner reads a failure.
	Lost bool
	// Died (flag bits 4 and 5: shard.DiedWithOthers, DiedAlone), with
	// Lost, says the worker died holding the lease (shard.Outcome.Died).
	// An older owner reads Lost alone.
	Died shard.Death
}

// AckMsg tells a holder that the owner has its outcome.
type AckMsg struct {
	Task  shard.TaskID
	Round shard.Round
}

// Grant is a lease given to a thief, with what it needs to run the task.
type Grant struct {
	Task    shard.TaskID
	Round   shard.Round
	Expiry  time.Time
	Handler string
	Payload []byte
	Timeout time.Duration
	Inputs  map[string]json.RawMessage // the results of its dependencies (Run.Inputs)
	// Attempt is the task's finished attempts (Run.Attempt). Sent after
	// the message's Holder, one per grant, so that an older peer skips
	// it; 0 from an older peer.
	Attempt int
	// Trace is the trace of the task's group (Run.Trace). Sent after the
	// attempts, one per grant; "" from an older peer.
	Trace string
	// Shard and Shards are a broadcast copy's index and the number of
	// copies (Run.Shard); sent after the traces, one pair per grant; 0
	// from an older peer.
	Shard, Shards int
	// Require is the labels the task requires (TaskSpec.Require): an
	// external worker must carry them. Sent after the shards, one list per
	// grant; nil from an older peer.
	Require []string
	// Worker is the external worker a copy of a broadcast to workers is
	// pinned to (Run.Worker). Sent after the requires, one per grant; ""
	// from an older peer.
	Worker string
	// Deaths are Run's: external workers that died running the task.
	// Sent after the workers, one byte per grant (shard.Deaths.Mark);
	// none from an older peer.
	Deaths shard.Deaths
	// Created, Name and Pin are Run's: when the task's group was created,
	// the task's name and the peer it is pinned to (an external worker's
	// poll shows them). Sent after the deaths, one triple per grant; zero
	// from an older peer.
	Created time.Time
	Name    string
	Pin     string
	// Info is Run's: the task's priority, retry budget, last error,
	// stage and item. Sent after the creation times, one per grant; zero
	// from an older peer.
	Info shard.RunInfo
}
