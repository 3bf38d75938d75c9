package node

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.etcd.io/raft/v3"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// ErrUnavailable is returned for a request this peer cannot serve now: it
// does not lead the partition and cannot reach whoever does.
var ErrUnavailable = errors.New("peer: unavailable")

// ErrStopped is returned for requests pending when the node stops leading a
// partition; the request may or may not have taken effect.
var ErrStopped = errors.New("peer: leadership lost before the request committed")

// NodeConfig configures a Node. Every field is an input: the Node reads no
// clock and draws no randomness of its own.
type NodeConfig struct {
	// ID is this peer's id (libp2p peer id, or a name in the simulator).
	ID string
	// Boot is a nonce unique to this run of the peer: lease holders are
	// "<ID>#<Boot>", so a restarted peer knows which leases it can no longer
	// confirm.
	Boot string
	// Partitions is the fixed number of ring partitions. Default 256.
	Partitions int
	// Founder bootstraps every partition with this peer as its only voter
	// when there is no stored state: the first peer of a mesh. A peer that
	// joins a mesh is not a founder: it gets its partitions from their
	// leaders.
	Founder bool
	// Initial is the mesh's initial membership when its peers start
	// together (etcd's initial cluster): every peer named, this one
	// included, with its addresses. A peer named in it that starts with
	// no stored state bootstraps each partition whose ring replicas over
	// Initial include it, those replicas as the voters, so that a new
	// mesh moves no partition and merges no membership list while it
	// forms: every peer computes the same ring from the same list. A
	// peer it does not name, or one with stored state or a record of
	// partitions it left (Left), ignores it (such a peer is past its
	// bootstrap; an unnamed one joins). Every
	// peer of the list must be started with the same list, Partitions,
	// Replicas and Placement. Not with Founder. Default none.
	Initial []PeerAddrs
	// Replicas is R, the size of each partition's replica set (fewer while
	// the mesh is smaller). Every peer of a mesh must use the same one:
	// heartbeats carry it, and one with another is refused. Default 3.
	Replicas int
	// Placement picks each partition's replicas after the primary
	// (ring.Config.Placement). Like Partitions and Replicas, every peer of
	// a mesh must use the same one: heartbeats carry it, and one with
	// another is refused (placementMismatch); a peer placing with
	// ring.PlacementSpread also refuses peers of releases that cannot
	// (FeaturePlacementSpread). Default ring.PlacementCircle.
	Placement ring.Placement
	// HeartbeatEvery is the gossip interval; a peer unheard for DeadAfter
	// is dead (suspect after half of it). ForgetAfter removes a dead peer
	// from the membership. Defaults 1 s, 3 s, 10 min.
	HeartbeatEvery, DeadAfter, ForgetAfter time.Duration
	// ProbeEvery is the failure detector's period: each peer probes one
	// member per period (probe.go); SuspectFor is how long a suspicion
	// waits for the suspect's refutation before the peer is dead.
	// ProbeEvery 0 turns the probe protocol off: every peer heartbeats to
	// every other every HeartbeatEvery and silence decides death (the
	// previous release). Defaults 500 ms and 1.5 s.
	ProbeEvery, SuspectFor time.Duration
	// Debounce is how long the membership must be stable before the ring
	// (and so the replica sets) changes. Default 1 s.
	Debounce time.Duration
	// Steal makes this peer take part in work stealing (as thief and as
	// victim). Default true.
	Steal bool
	// Addrs are this peer's transport addresses, gossiped to others.
	Addrs []string
	// Labels are this peer's placement labels ("zone" -> "a"), gossiped to
	// the others: a task that requires "zone=a" runs only on peers
	// carrying it. Default none.
	Labels map[string]string
	// Version is this peer's build version (needled's, as in its
	// needle_build_info metric), gossiped in its heartbeats so that every
	// peer shows which build each member runs (MemberInfo.Version). It is
	// shown, never compared. Default "" (unknown).
	Version string
	// Slots is the number of tasks this peer runs at once. Default 4.
	Slots int
	// LeaseAhead caps the leases held beyond the slots, as a multiple of
	// Slots, when tasks are short next to the commit latency (see pacer).
	// 0 disables leasing ahead. Default 32.
	LeaseAhead int
	// LeaseDefer is how long a lease this peer gives its own free slot is
	// held back from the log while its run goes on, so that a run done
	// by then commits its lease and outcome in one entry (defer.go).
	// 0 proposes each lease at once, its run starting when it applies.
	// Default 20 ms.
	LeaseDefer time.Duration
	// RaftTick is the time per Raft tick; heartbeats go every
	// HeartbeatTicks ticks. Defaults 100 ms and 5: a voter's answer to a
	// heartbeat holds the read lease for two fifths of DeadAfter after
	// the heartbeat left (lease.go).
	RaftTick       time.Duration
	HeartbeatTicks int
	// SnapshotEvery is the number of applied entries of a partition after
	// which its state is snapshotted and its log compacted, once those
	// entries also hold half as many bytes as the last snapshot (so a big
	// partition is not re-encoded every few small entries; see
	// maybeSnapshot). Default 10,000.
	SnapshotEvery uint64
	// Shard configures each partition's state machine. Shard.Rand is
	// replaced by one derived from Rand.
	Shard shard.Config
	// Rand is the node's seeded source of randomness. Required.
	Rand *rand.Rand
	// NotifyInflight bounds the webhook deliveries handed out in
	// Ready.Notify and not yet reported with NotifyDone. 0 = 16.
	NotifyInflight int
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Rings, when set, shares ring builds and preferred-owner passes
	// between the nodes of one process that see the same membership (the
	// simulator: a 1,000-member ring takes about a second to build). Both
	// are pure functions of their inputs, so sharing changes no result.
	// Default nil: each node computes its own.
	Rings *RingCache
	// ValidID reports whether id can name a peer (the daemon: a libp2p
	// peer id). A member learned second-hand from a heartbeat's list must
	// pass it, so a keyed host cannot fill the membership with junk
	// names. Default nil: any non-empty id.
	ValidID func(id string) bool
	// Left is the stored LeftMetaKey record: what this peer held of the
	// partitions it left, which bars its votes there (tombstone.go). A
	// new peer has none.
	Left []byte
	// Forgotten is the stored ForgottenMetaKey record: the peers this
	// peer forgot, which it never re-admits (forgotten.go).
	Forgotten []byte
	// Recover is the stored RecoverMetaKey record: the forgotten peers
	// an operator declared lost for good (recover.go).
	Recover []byte
}

// LoadMeta sets the fields of c that the node keeps in its WAL's meta
// space (Left, Forgotten) from log; every runtime calls it before NewNode.
func (c *NodeConfig) LoadMeta(log interface {
	Meta(key string) ([]byte, bool, error)
}) error {
	for _, r := range []struct {
		key string
		dst *[]byte
	}{{LeftMetaKey, &c.Left}, {ForgottenMetaKey, &c.Forgotten}, {RecoverMetaKey, &c.Recover}} {
		v, _, err := log.Meta(r.key)
		if err != nil {
			return fmt.Errorf("node: load %s: %w", r.key, err)
		}
		*r.dst = v
	}
	return nil
}

// DefaultNodeConfig returns the defaults for a peer id and boot nonce.
func DefaultNodeConfig(id, boot string) NodeConfig {
	return NodeConfig{
		ID: id, Boot: boot, Partitions: 256, Slots: 4, LeaseAhead: 32, LeaseDefer: 20 * time.Millisecond, Founder: true, Replicas: 3,
		HeartbeatEvery: time.Second, DeadAfter: 3 * time.Second, ForgetAfter: 10 * time.Minute,
		ProbeEvery: 500 * time.Millisecond, SuspectFor: 1500 * time.Millisecond,
		Debounce: time.Second, Steal: true,
		RaftTick: 100 * time.Millisecond, HeartbeatTicks: 5, SnapshotEvery: 10_000,
		Shard: shard.DefaultConfig(), Rand: rand.New(rand.NewPCG(1, 1)),
	}
}

// Validate reports the first invalid field.
func (c *NodeConfig) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("peer: config ID is required")
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return fmt.Errorf("peer: config Partitions %d out of range 1..65536", c.Partitions)
	case c.Slots < 0:
		return errors.New("peer: config Slots must be >= 0")
	case c.LeaseDefer < 0 || c.LeaseDefer > c.DeadAfter/10:
		return fmt.Errorf("peer: config LeaseDefer %v out of range 0..DeadAfter/10", c.LeaseDefer)
	case c.RaftTick <= 0 || c.HeartbeatTicks <= 0:
		return errors.New("peer: config RaftTick and HeartbeatTicks must be > 0")
	case c.Replicas < 1 || c.Replicas > 15:
		return fmt.Errorf("peer: config Replicas %d out of range 1..15", c.Replicas)
	case c.Placement > ring.PlacementSpread:
		return fmt.Errorf("peer: config Placement: %w", ring.ErrPlacement)
	case c.HeartbeatEvery <= 0 || c.DeadAfter <= c.HeartbeatEvery || c.ForgetAfter < c.DeadAfter:
		return errors.New("peer: config wants 0 < HeartbeatEvery < DeadAfter <= ForgetAfter")
	case c.RaftTick*time.Duration(c.HeartbeatTicks) > c.DeadAfter/4:
		// A voter's answer to a heartbeat holds the read lease for
		// 4/15 DeadAfter after the heartbeat left (lease.go), and a
		// replica that hears nothing from its leader for DeadAfter/3
		// votes for another: the heartbeats must come inside both (the
		// default, 500 ms of 3 s, leaves an answer 300 ms).
		return fmt.Errorf("peer: config RaftTick x HeartbeatTicks = %v; want at most DeadAfter/4 = %v",
			c.RaftTick*time.Duration(c.HeartbeatTicks), c.DeadAfter/4)
	case c.ProbeEvery < 0 || c.ProbeEvery > 0 && c.SuspectFor <= 0:
		return errors.New("peer: config wants ProbeEvery >= 0, and SuspectFor > 0 with it")
	case c.Debounce < 0:
		return errors.New("peer: config Debounce must be >= 0")
	case c.SnapshotEvery == 0:
		return errors.New("peer: config SnapshotEvery must be > 0")
	case c.Rand == nil:
		return errors.New("peer: config Rand is required")
	case c.NotifyInflight < 0:
		return errors.New("peer: config NotifyInflight must be >= 0")
	}
	if err := c.validateInitial(); err != nil {
		return err
	}
	for _, kv := range LabelList(c.Labels) {
		if err := shard.ValidateLabel(kv); err != nil {
			return fmt.Errorf("peer: config Labels: %w", err)
		}
	}
	return nil
}

// Node is one peer's pure core: the Raft groups of the partitions it holds,
// each with its shard state machine, plus the peer's leases and requests. It
// does no IO, starts no goroutines and reads no clock: the runtime and the
// simulator drive it with the same verbs (see doc.go).
type Node struct {
	cfg    NodeConfig
	log    *slog.Logger
	fatal  error  // see Fatal
	holder string // ID#Boot: the lease holder name of this run
	// noNewWork: the runtime found this peer short of disk space or
	// memory (SetNoNewWork); its schedules' firings are skipped.
	noNewWork bool
	raftID    uint64

	parts []*partition // indexed by partition number; nil when not held
	// decoded is the slice the next committed entry's events are decoded
	// into (applyEntry).
	decoded []shard.Event
	// decodedTasks is the room the task specs of the next committed
	// entry's submitted groups are decoded into (applyEntry).
	decodedTasks []shard.TaskSpec
	enc          []byte // encode's scratch buffer
	// held lists the partitions this node holds (parts[i] != nil), in
	// increasing order: the per-tick loops walk it instead of every slot of
	// parts (partitions are opened by NewNode and stepRaft, and dropped
	// when a committed configuration excludes this node: leave.go).
	held []int
	// readyParts marks the partitions with READY tasks (partset.go).
	readyParts partSet
	// loud marks the partitions held that are not quiesced (quiesce.go).
	loud partSet
	// dueParts marks the partitions whose shard timers may be due or
	// whose webhooks may wait (shard.Config.OnDue; cleared when there are
	// neither): what NextDeadline and needsRaftTick read.
	dueParts partSet
	// holdParts marks the partitions that may hold proposals or commits
	// back (dueBy; cleared when nextHeld finds them holding nothing).
	holdParts partSet
	// timers caches the earliest shard timer of the partitions this node
	// serves (shardTimers) until a timer pass ran (Tick) or a partition
	// stopped serving; a shard that may have armed an earlier one (OnDue)
	// is listed in stale, and read alone. The runtime asks NextDeadline
	// at every loop iteration, and a peer serving 256 partitions with
	// finished groups to remove walked them all each time (a tenth of its
	// CPU under W2).
	timers struct {
		at        time.Time
		ok, known bool
		stale     []int
	}
	// leaving are partitions whose applied configuration excludes this
	// node, dropped at Advance (leave.go); goneOut the GoneMsgs to send
	// to peers this node removed as leader; leaveAt when askLeave next
	// asks about orphan partitions.
	leaving []int
	goneOut map[string][]GoneMsg
	leaveAt time.Time
	dirty   []int // partitions that may have a Raft Ready
	// dirtyNext is the other buffer of dirty: Ready walks one while
	// markDirty appends to the other.
	dirtyNext []int
	isDir     []bool

	now time.Time
	// nextTick is when Raft next ticks at the earliest: the time of the
	// last Raft tick check plus RaftTick (Tick, NextDeadline). Kept as
	// that sum, not the check's time: a time.Time without a monotonic
	// reading (the simulator's) subtracts slowly, and Tick asked at every
	// input.
	nextTick  time.Time
	deferDue  time.Time // when the first lease held back is due (defer.go); zero: none
	timerSlot int64     // now / timerResolution at the last timer pass (Tick)
	bootAt    time.Time // when this run started (NewNode), on the node's clock
	busy      int       // leases proposed for or held by this peer, at most limit()
	pace      pacer
	reqSeq    uint64
	reqs      map[uint64]*request
	// submits holds the submissions proposed with other events (see
	// admitSubmit), by group, in proposal order: each is answered when
	// its group's submitted event applies.
	submits map[shard.GroupID][]uint64
	running map[shard.TaskID]shard.Round // leases held by this peer, by task
	// superseded holds the rounds of local runs replaced in running by a
	// newer round of the same task (a pinned task re-leased to this peer
	// after its lease expired, as while it was paused): their handlers
	// still hold slots, freed when they report (see startRun, Report).
	superseded map[shard.TaskID][]shard.Round
	// ownLeases counts the leases this node proposed for itself that have
	// not applied, by task: each holds a slot in busy until it applies, is
	// dropped, or is lost with the leadership. A task may have two (a
	// repeated submission proposes its initial leases again).
	ownLeases map[shard.TaskID]ownLease
	// leaseAt is when each lease this node proposed for itself was
	// proposed, to time its commit (the pacer's latency).
	leaseAt map[shard.TaskID]time.Time

	rd     Ready     // being assembled
	advRds []pending // partitions' Readies handed out, to Advance

	// founded: this run bootstrapped a new mesh (a founder without stored
	// partitions); joining: it joins one with an empty disk (not a
	// founder, nothing stored). See placementMismatch.
	founded, joining bool
	// together: this run bootstrapped its partitions from the initial
	// membership (NodeConfig.Initial), with no stored state: it answered
	// no leader before it, so it votes and campaigns without waiting out
	// a restarted replica's promise (leaseWindow).
	together bool

	mesh mesh // membership, liveness, ring, outbox
	// raftOut are the Raft messages of the coming Ready, in the order
	// made (sendRaft). flushRaftMsgs copies them into the Ready and empties
	// it: the array is the node's own, reused for every Ready.
	raftOut  []outRaft
	snapSent []snapReport
	steal    stealer
	stats    NodeStats
	draining bool                           // Drain was called: no new leases, leadership handed over
	localOut map[shard.TaskID]shard.Outcome // outcomes proposed as owner, not yet applied (handOver)
	started  map[shard.TaskID]claimed       // last round started here, per task (claim)
	spec     map[shard.TaskID]*specRun      // own initial leases started before their creation applied (speculate.go)
	// heldGrants are the leases granted to thieves before they applied,
	// until they apply or are dropped (defer.go).
	heldGrants map[shard.TaskID]heldGrant
	left       map[int]tombstone // what this node held of the partitions it left (tombstone.go)
	// leftNew are the partitions buried since the last Ready; leftRec the
	// record last written, of leftEntries tombstones (flushLeft).
	leftNew     []int
	leftRec     []byte
	leftEntries int
	startedQ    idRing // insertion order of started, to bound it

	notifying  int // webhook deliveries handed out (Ready.Notify), not yet reported (NotifyDone)
	notifyNext int // the partition notifyDue looks at first
	// placement is this peer's id and labels, as leases match them.
	placement shard.Placement
	ext       external // external workers (external.go)
}

// request is a client request waiting for its entry to apply.
type request struct {
	id    uint64
	part  int
	kind  requestKind
	group shard.GroupID // a submission proposed with other events (admitSubmit)
}

type requestKind uint8

const (
	reqSubmit requestKind = iota + 1
	reqCancel
)

type pending struct {
	p  *partition
	rd raft.Ready
}

// NewNode builds a node from the partitions' stored states (empty for a new
// peer). It holds every partition as a single voter: a mesh adds voters by
// configuration changes.
func NewNode(cfg NodeConfig, states map[uint32]wal.PartitionState, now time.Time) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger.With(keyNode, cfg.ID), holder: cfg.ID + "#" + cfg.Boot,
		raftID: RaftID(cfg.ID), parts: make([]*partition, cfg.Partitions), readyParts: newPartSet(cfg.Partitions), loud: newPartSet(cfg.Partitions), dueParts: newPartSet(cfg.Partitions),
		holdParts: newPartSet(cfg.Partitions),
		isDir:     make([]bool, cfg.Partitions), now: now, nextTick: now.Add(cfg.RaftTick), bootAt: now,
		reqs: make(map[uint64]*request), submits: make(map[shard.GroupID][]uint64), running: make(map[shard.TaskID]shard.Round),
		leaseAt: make(map[shard.TaskID]time.Time), ownLeases: make(map[shard.TaskID]ownLease),
		started: make(map[shard.TaskID]claimed), spec: make(map[shard.TaskID]*specRun),
		heldGrants: make(map[shard.TaskID]heldGrant),
		localOut:   make(map[shard.TaskID]shard.Outcome), goneOut: make(map[string][]GoneMsg),
	}
	n.placement = shard.Placement{Peer: cfg.ID, Labels: maps.Clone(cfg.Labels)}
	// A peer named in the initial membership, with nothing stored, starts
	// together with the others (together.go). Nothing stored includes no
	// partition left: a peer whose partitions all moved away holds none,
	// and must not found them again from the list still in its config.
	together := len(states) == 0 && len(cfg.Left) == 0 && slices.ContainsFunc(cfg.Initial, func(p PeerAddrs) bool { return p.ID == cfg.ID })
	n.mesh = newMesh(n, now, !together)
	var err error
	if n.steal, err = newStealer(cfg); err != nil {
		return nil, err
	}
	if n.left, err = decodeLeft(cfg.Left, cfg.Partitions); err != nil {
		return nil, err
	}
	for _, id := range decodeForgotten(cfg.Forgotten, cfg.ID, cfg.ValidID) {
		n.mesh.forgotten[id] = true
	}
	for _, id := range decodeForgotten(cfg.Recover, cfg.ID, cfg.ValidID) {
		n.mesh.recover[id] = true
		n.mesh.recoverScan = true // a recovery a crash cut short runs again
	}
	founder := cfg.Founder && len(states) == 0
	if together {
		if err := n.mesh.startTogether(cfg.Initial, now); err != nil {
			return nil, err
		}
		n.together = true
	}
	n.founded = founder || n.together
	n.joining = !n.founded && len(states) == 0
	var mine []int // under the initial membership, the partitions it replicates
	if n.together {
		mine = n.mesh.ring.PartitionsOf(ring.PeerID(cfg.ID))
	}
	for p := range cfg.Partitions {
		st, stored := states[uint32(p)]
		var voters []uint64 // the voters of a partition this run bootstraps
		switch {
		case stored:
		case founder:
			voters = []uint64{n.raftID}
		case n.together:
			if len(mine) == 0 || mine[0] != p {
				continue // not among its ring replicas
			}
			mine, voters = mine[1:], n.mesh.initialVoters(p)
		default:
			continue // a joiner's partitions arrive from their leaders
		}
		part, err := n.openPartition(p, st, voters)
		if err != nil {
			return nil, err
		}
		n.hold(part)
		n.markDirty(p)
		if n.mustLeave(part) {
			n.queueLeave(part) // stored with a configuration that excludes it (leave.go)
		}
	}
	if n.together {
		n.mesh.greetReplicas()
	}
	return n, nil
}

// hold records a partition this node now holds, in parts and in held.
func (n *Node) hold(p *partition) {
	n.parts[p.id] = p
	n.loud.set(p.id, !p.quiesced)
	i, found := slices.BinarySearch(n.held, p.id)
	if !found {
		n.held = slices.Insert(n.held, i, p.id)
	}
}

// RaftID maps a peer id to its Raft node id (never 0).
func RaftID(peer string) uint64 {
	id := xxhash.Sum64String(peer)
	if id == 0 {
		id = 1
	}
	return id
}

// Holder returns the lease holder name of this run of the peer.
func (n *Node) Holder() string { return n.holder }

// ID returns the peer id.
func (n *Node) ID() string { return n.cfg.ID }

// PartitionOf returns the partition of a group (or of a schedule: a
// schedule's firing groups route with it, see shard.RouteKey).
func (n *Node) PartitionOf(g shard.GroupID) int {
	return ring.PartitionOf(shard.RouteKey(string(g)), n.cfg.Partitions)
}

func (n *Node) markDirty(p int) {
	if !n.isDir[p] {
		n.isDir[p] = true
		n.dirty = append(n.dirty, p)
	}
}

// timerResolution is the slot of shard's timing wheel: Tick runs the
// shard timers (Due) and the steal backoff once per slot.
const timerResolution = 10 * time.Millisecond

// Tick advances the node's time: shard timers fire (delays, backoffs, lease
// expiries, retention), and Raft ticks once per RaftTick while some
// partition needs it (needsRaftTick: a Raft tick of a lone leader does
// nothing), every partition but the quiesced ones (quiesce.go).
func (n *Node) Tick(now time.Time) {
	prev := n.now
	n.now = now
	if !prev.IsZero() && now.After(prev.Add(n.cfg.DeadAfter/3)) { // now.Sub(prev) > DeadAfter/3, without a slow Sub
		n.thawed()
	}
	if !n.deferDue.IsZero() && !now.Before(n.deferDue) {
		n.flushDeferred()
	}
	raftTick := false
	if !now.Before(n.nextTick) {
		n.nextTick = now.Add(n.cfg.RaftTick) // checked once per RaftTick, not at every input
		raftTick = n.needsRaftTick()
	}
	n.mesh.tick(now)
	if n.mesh.recoverScan {
		n.recoverPartitions()
	}
	n.askLeave()
	// Timers have the resolution of shard's timing wheel: within one slot
	// no timer can fire, so the drivers' tick before every input skips
	// the walk over the partitions it leads (retention removals, the one
	// thing Due does between slots, may wait a slot).
	slot := now.UnixNano() / int64(timerResolution)
	timers := slot != n.timerSlot
	if timers {
		n.timerSlot = slot
		n.maybeSteal() // a backoff may have ended
		if len(n.mesh.forgotten) == 0 {
			// The earliest timer cached may be early, never late: when it
			// is not due, no shard has anything to fire, and the walk (a
			// cache miss per partition held, at every slot) is skipped.
			// The cache is read afresh at the next deadline all the same,
			// as after a pass: that read unmarks the partitions with
			// nothing pending (dueParts), which needsRaftTick walks.
			if at, ok := n.shardTimers(); !ok || at.After(now) {
				timers = false
				n.timers.known = false
			}
		}
	}
	if !raftTick && !timers {
		return
	}
	for _, i := range n.held {
		p := n.parts[i]
		if raftTick && !p.quiesced {
			p.rn.Tick()
			n.markDirty(i)
			n.mesh.tickPartition(p)
			if p.leader {
				n.maybeQuiesce(p)
			}
		}
		if timers && p.serving {
			n.timers.known = false // what fires now is no longer pending
			if evs := p.shard.Due(now); len(evs) > 0 {
				p.propose(evs)
				n.markDirty(i)
			}
			if len(n.mesh.forgotten) > 0 {
				if evs := p.shard.FailPinnedTo(now, n.mesh.isForgotten); len(evs) > 0 {
					p.propose(evs)
					n.markDirty(i)
				}
			}
		}
	}
	if raftTick {
		n.notifyDue()
	}
}

// Digest returns the index partition part has applied and a hash of its
// replicated state (the shard's snapshot, which leaves out the owner's
// leader-local state): two replicas that applied the same index must give
// the same sum. ok is false when this node holds no replica of part. It
// encodes the whole partition: for checks (the simulator's invariant 5),
// not for a hot path.
func (n *Node) Digest(part int) (applied, sum uint64, ok bool) {
	applied, sum, _, ok = n.DigestBuf(part, nil)
	return applied, sum, ok
}

// DigestBuf is Digest encoding into buf (returned, grown, for the next
// call): the simulator's last check encodes every replica of every
// partition, and a new buffer each filled the collector's room at 1,000
// peers x 1,000,000 tasks.
func (n *Node) DigestBuf(part int, buf []byte) (applied, sum uint64, out []byte, ok bool) {
	applied, ok = n.Applied(part)
	if !ok {
		return 0, 0, buf, false
	}
	buf = n.parts[part].shard.AppendSnapshot(buf[:0])
	return applied, xxhash.Sum64(buf), buf, true
}

// Applied returns the index partition part has applied; ok is false when
// this node holds no replica of part. It is cheap, so a check can find the
// replicas at the same index before it asks for their Digests.
func (n *Node) Applied(part int) (applied uint64, ok bool) {
	if part < 0 || part >= len(n.parts) || n.parts[part] == nil {
		return 0, false
	}
	return n.parts[part].applied, true
}

// Replica describes this node's replica of partition part, for
// diagnostics (the simulator's report of a stuck partition): the Raft
// state and term, the leader it knows, the voters, learners and (in a
// joint configuration) outgoing voters of its configuration (peer ids;
// "?" for one it cannot name) and the index it applied. ok is false when
// it holds no replica.
func (n *Node) Replica(part int) (r ReplicaInfo, ok bool) {
	if part < 0 || part >= len(n.parts) || n.parts[part] == nil {
		return ReplicaInfo{}, false
	}
	p := n.parts[part]
	st := p.rn.BasicStatus()
	name := func(ids []uint64) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = "?"
			if pid, ok := n.mesh.peerOf(id); ok {
				out[i] = pid
			}
		}
		return out
	}
	r = ReplicaInfo{Raft: st.RaftState.String(), Term: st.HardState.Term, Applied: p.applied, Serving: p.serving, Abdicated: p.abdicated,
		Voters: name(p.conf.Voters), Learners: name(p.conf.Learners), Outgoing: name(p.conf.VotersOutgoing),
		Quiesced: p.quiesced}
	if id, ok := n.mesh.peerOf(st.Lead); ok {
		r.Leader = id
	}
	return r, true
}

// ReplicaInfo is what Replica reports.
type ReplicaInfo struct {
	Raft, Leader     string
	Term, Applied    uint64
	Serving          bool
	Abdicated        bool // a leader that heard no majority and fell silent (see abdicate)
	Voters, Learners []string
	Outgoing         []string // the old voters of a joint configuration; nil outside one
	Quiesced         bool     // ticks no more until something happens (quiesce.go)
}

// Leading returns the partitions this node serves as owner, sorted.
func (n *Node) Leading() []int {
	var out []int
	for _, i := range n.held {
		if n.parts[i].serving {
			out = append(out, i)
		}
	}
	return out
}

// Leads reports whether Leading has partition part, without making the
// list (the simulator asks at every run it starts).
func (n *Node) Leads(part int) bool {
	return part >= 0 && part < len(n.parts) && n.parts[part] != nil && n.parts[part].serving
}

// Stats is a snapshot of the node's counters, for metrics and load gossip.
type Stats struct {
	Ready, Running, Busy, Slots int
	Stranded                    int    // READY tasks (of Ready) this peer may not run itself
	Counts                      [8]int // tasks by shard.State, over the partitions this node leads
	Leading                     int
	Held                        int // partitions this node holds a replica of
	Voter                       int // ... as a voter (not a learner)
	LeaderKnown                 int // ... whose leader it knows
	// Busy is Running, plus Superseded (older rounds of running tasks,
	// still running), plus Proposed (own leases not applied yet), of
	// which Orphaned are in partitions this node no longer serves (a
	// leak: they are released when the leadership goes).
	Superseded, Proposed, Orphaned int
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	st := Stats{Busy: n.busy, Slots: n.cfg.Slots, Running: len(n.running)}
	for _, l := range n.ownLeases {
		st.Proposed += l.n
		if p := n.parts[l.part]; p == nil || !p.serving {
			st.Orphaned += l.n
		}
	}
	for _, rs := range n.superseded {
		st.Superseded += len(rs)
	}
	for _, i := range n.held {
		p := n.parts[i]
		st.Held++
		if slices.Contains(p.conf.Voters, n.raftID) {
			st.Voter++
		}
		if p.rn.BasicStatus().Lead != 0 {
			st.LeaderKnown++
		}
		if !p.serving {
			continue
		}
		st.Leading++
		p.shard.Counts(st.Counts[:])
	}
	st.Ready, st.Stranded = n.readyLoad()
	return st
}

// readyLoad returns the READY tasks of the partitions this node serves,
// and how many of them it may not run itself (Stats.Ready and Stranded).
// Heartbeats ask for it alone: Stats also counts the tasks of every
// retained group by state, a walk over all of them.
func (n *Node) readyLoad() (ready, stranded int) {
	for p := range n.readyHeld {
		ready += p.shard.ReadyLen()
		stranded += p.shard.Stranded(n.placement)
	}
	return ready, stranded
}

func sortedKeys[K ~string | ~uint64 | ~int, V any](m map[K]V) []K {
	return appendSortedKeys(make([]K, 0, len(m)), m)
}

// appendSortedKeys appends m's keys to dst, sorted. A hot caller passes a
// small array of its stack, which holds a few keys without an allocation.
func appendSortedKeys[K ~string | ~uint64 | ~int, V any](dst []K, m map[K]V) []K {
	n := len(dst)
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst[n:])
	return dst
}

// Counters returns the node's cumulative protocol counters (steals,
// grants, refusals): the runtime exports them as metrics.
func (n *Node) Counters() NodeStats {
	s := n.stats
	s.Deaths = n.mesh.deaths
	s.IdentityConflicts = n.mesh.twinConflicts
	return s
}

// Partitions returns the number of ring partitions of the mesh.
func (n *Node) Partitions() int { return n.cfg.Partitions }

// SelfLoad returns the load this peer gossips about itself.
func (n *Node) SelfLoad() Load { return n.load() }

// Epoch returns the epoch of the ring this peer uses.
func (n *Node) Epoch() ring.Epoch { return n.mesh.epoch }

// StrandedFor returns the live members that may run some of the READY
// tasks this peer holds but may not run itself (nil when more than 32).
func (n *Node) StrandedFor() []string { return n.mesh.strandedFor() }

// maxInitial bounds the initial membership (Initial).
const maxInitial = 1 << 16

// validateInitial checks the initial membership: named peers, each once,
// valid ids (ValidID), not with Founder.
func (c *NodeConfig) validateInitial() error {
	if len(c.Initial) == 0 {
		return nil
	}
	if c.Founder {
		return errors.New("peer: config Initial and Founder exclude each other: the initial membership founds the mesh")
	}
	if len(c.Initial) > maxInitial {
		return fmt.Errorf("peer: config Initial names %d peers; at most %d", len(c.Initial), maxInitial)
	}
	// A list in id order shows a peer named twice next to itself; any
	// other order is checked with a set (a set per peer was a thousand
	// maps of a thousand entries in a simulated mesh of 1,000).
	sorted := slices.IsSortedFunc(c.Initial, byPeerID)
	var seen map[string]bool
	if !sorted {
		seen = make(map[string]bool, len(c.Initial))
	}
	for i, p := range c.Initial {
		switch {
		case p.ID == "":
			return fmt.Errorf("peer: config Initial[%d]: empty peer id", i)
		case c.ValidID != nil && !c.ValidID(p.ID):
			return fmt.Errorf("peer: config Initial[%d]: %q is not a peer id", i, p.ID)
		case sorted && i > 0 && c.Initial[i-1].ID == p.ID, seen[p.ID]:
			return fmt.Errorf("peer: config Initial[%d]: peer %s named twice", i, p.ID)
		}
		if !sorted {
			seen[p.ID] = true
		}
	}
	return nil
}

// SetNoNewWork tells the node whether its peer takes new work: while it
// does not (its disk or memory short, as the runtime reads them), the
// schedules it owns skip the firings that come due, each recorded as a
// firing that created nothing; the work already taken runs on. The
// runtime refuses submissions itself.
func (n *Node) SetNoNewWork(refuse bool) { n.noNewWork = refuse }
