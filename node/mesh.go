package node

import (
	"maps"
	"slices"
	"sort"
	"time"
	"weak"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

// PeerState is what the failure detector thinks of a peer.
type PeerState uint8

const (
	PeerAlive PeerState = iota + 1
	PeerSuspect
	PeerDead
)

func (s PeerState) String() string {
	switch s {
	case PeerAlive:
		return "alive"
	case PeerSuspect:
		return "suspect"
	case PeerDead:
		return "dead"
	}
	return "unknown"
}

// member is one peer of the membership, as this node sees it. Every peer
// keeps one for every other (a million in a mesh of 1,000), so it holds
// what most members have; what few have (placement labels, stranded
// tasks, external workers) is in rare, allocated only while some of it is
// set. The fields every message from it reads or writes come first,
// packed into the record's first 64 bytes: at 1,000 simulated peers each
// message's member is a cache miss, and with those fields spread over the
// whole record (208 bytes) a message cost up to four.
type member struct {
	state PeerState
	// draining: it hands its work over and will leave: lead nothing.
	draining bool
	// legacy: it speaks heartbeats only (no probes).
	legacy bool
	// beat: a heartbeat of its came (labels, addresses, workers); until
	// one does, this peer asks it for one, at most once per askedAt.
	beat bool
	// listed: this peer learned of it from a membership list (learn),
	// not from an update or the peer itself, and knows no incarnation of
	// it yet (quietInc).
	listed bool
	// featured: features is its own word, from a heartbeat or a probe
	// of its; until then this peer does not know what it can apply.
	featured bool
	// gone: it was forgotten, or replaced by another record (add).
	gone bool
	// initial: it is in the initial membership this peer started with
	// (startTogether), so it knows this peer's addresses from the same
	// list: a probe to it may say its heartbeat holds nothing more
	// (Probe.Plain).
	initial bool
	heard   instant // last message from it (or when we learned of it)
	// The probe protocol (probe.go): its incarnation.
	inc      uint64
	features uint64 // what it can apply (Heartbeat.Features)
	// askedAt is when this peer last asked it for a heartbeat (beat).
	askedAt instant
	boot    string
	// lostAt is when the transport last lost its connection to it
	// (Node.Disconnected).
	lostAt instant
	load   Load
	id     string
	addrs  []string
	// suspectAt is when this peer began to suspect it.
	suspectAt instant
	// deadSince is when this node declared it dead (markDead).
	deadSince instant
	// rebootAt is when this node learned the peer restarted (another
	// boot nonce): the promises its earlier run made are void (vouches).
	rebootAt instant
	// bookSeen marks the address book of its last heartbeat that
	// learnAddrs merged, at membership version bookAt.
	bookSeen sliceMark[PeerAddrs]
	bookAt   int
	// merged marks the membership list of its last heartbeat that learn
	// merged (the sender's immutable slice; see learn).
	merged sliceMark[string]
	rare   *memberRare // nil: none of it set
}

// memberRare is the part of a member most members lack, from its
// heartbeats: its placement labels (as a map, and as gossiped:
// "key=value", sorted), the READY tasks it cannot run itself, and its
// external workers; and, for a member an abdicated leader pinged, when.
type memberRare struct {
	// pingedAt is when an abdicated leader of this peer last pinged it
	// (votersBack); from then on direct is when the last message other
	// than a heartbeat came from it: those come on a connection from it,
	// while a heartbeat may be gossip relayed by others.
	pingedAt, direct instant
	labels           map[string]string
	labelList        []string
	stranded         int
	// strandedFor is the peers its stranded tasks wait for; nil: unnamed.
	strandedFor []string
	// workers are its external workers' handlers and demand, from its
	// last heartbeat; offered counts the tasks this node leased to it
	// since, by WorkerAd key (scheduleExternal).
	workers []WorkerAd
	offered map[string]int
	// version is its build version, from its last heartbeat or plain probe
	// (Heartbeat.Version, at most maxVersion bytes); "" unknown.
	version string
}

func (mb *member) labels() map[string]string {
	if mb.rare == nil {
		return nil
	}
	return mb.rare.labels
}

func (mb *member) labelList() []string {
	if mb.rare == nil {
		return nil
	}
	return mb.rare.labelList
}

func (mb *member) stranded() int {
	if mb.rare == nil {
		return 0
	}
	return mb.rare.stranded
}

func (mb *member) strandedFor() []string {
	if mb.rare == nil {
		return nil
	}
	return mb.rare.strandedFor
}

func (mb *member) workers() []WorkerAd {
	if mb.rare == nil {
		return nil
	}
	return mb.rare.workers
}

func (mb *member) version() string {
	if mb.rare == nil {
		return ""
	}
	return mb.rare.version
}

// maxVersion caps the build version kept of a member: it is shown, never
// compared.
const maxVersion = 128

// setVersion takes the build version mb's heartbeat names.
func (mb *member) setVersion(v string) {
	if len(v) > maxVersion {
		v = v[:maxVersion]
	}
	if mb.version() != v {
		mb.more().version = v
		mb.tidy()
	}
}

// offered returns the tasks this node leased to mb's workers under
// WorkerAd key since its last heartbeat.
func (mb *member) offered(key string) int {
	if mb.rare == nil {
		return 0
	}
	return mb.rare.offered[key]
}

// offer counts n tasks more leased to mb's workers under key. Only a
// member with workers is offered tasks (its rare part is set).
func (mb *member) offer(key string, n int) {
	r := mb.more()
	if r.offered == nil {
		r.offered = map[string]int{}
	}
	r.offered[key] += n
}

// more returns mb's rare part, allocating it if need be.
func (mb *member) more() *memberRare {
	if mb.rare == nil {
		mb.rare = &memberRare{}
	}
	return mb.rare
}

// setStranded, setWorkers and setLabels take what mb's heartbeat says of
// its stranded tasks, its workers (forgetting what was offered to those)
// and its labels; mb keeps a rare part only while some of it is set.
func (mb *member) setStranded(n int, forPeers []string) {
	if mb.rare != nil || n != 0 || forPeers != nil {
		r := mb.more()
		r.stranded, r.strandedFor = n, forPeers
		mb.tidy()
	}
}

func (mb *member) setWorkers(ws []WorkerAd) {
	if mb.rare != nil || ws != nil {
		r := mb.more()
		r.workers, r.offered = ws, nil
		mb.tidy()
	}
}

func (mb *member) setLabels(list []string) {
	if !slices.Equal(mb.labelList(), list) {
		r := mb.more()
		r.labelList, r.labels = list, ParseLabels(list)
		mb.tidy()
	}
}

// tidy drops mb's rare part when none of it is set.
func (mb *member) tidy() {
	if r := mb.rare; r.labels == nil && r.labelList == nil && r.stranded == 0 && r.strandedFor == nil && r.workers == nil && r.offered == nil && r.pingedAt == 0 && r.version == "" {
		mb.rare = nil
	}
}

// mesh is the Node's view of the other peers: membership (a grow-only set
// with tombstones, merged from every heartbeat, so every peer converges on
// the same set), liveness (heartbeats; dead after DeadAfter), the ring
// computed over a debounced membership, preferred owners, and the outbox of
// outcomes for owners elsewhere.
type mesh struct {
	// The fields every tick reads come first, together: at 1,000 simulated
	// peers each activation of a node is a cache miss per line it touches.
	n       *Node
	self    *member // this node's own record in members (never replaced nor forgotten)
	members map[string]*member
	// detectAt is the earliest time a member's silence can cross a
	// threshold of the failure detector (suspect, dead, forget); tick skips
	// the pass over the members before it. Hearing from a member only moves
	// its thresholds later; a new member, a forget or a dead peer coming back
	// resets detectAt to zero (check at the next tick).
	detectAt time.Time
	version  int // bumps on every membership change (caches)
	// ringVersion is the membership version last compared with ringSet:
	// the ring is up to date for it (tick skips the comparison).
	ringVersion int
	changedAt   time.Time // membership last changed
	prefDirty   bool
	// beatBack is set while a ping whose heartbeat asked for this peer's
	// is stepped: its ack carries it (stepProbeBeat).
	beatBack  bool
	lastBeat  time.Time
	lastSend  time.Time
	outbox    map[string]OutcomeMsg // key task@round
	forgotten map[string]bool
	forgotNew bool // forgotten changed since the last Ready (flushForgotten)
	// recover holds the forgotten peers an operator declared lost for
	// good (needle forget --unsafe-recover), recoverNew that it changed
	// since the last Ready (flushRecover), recoverScan that partitions
	// may be recoverable now (recover.go).
	recover     map[string]bool
	recoverNew  bool
	recoverScan bool
	// recoverAt is when a peer's loss last became final here (marked and
	// forgotten): a survivor that sees no other waits recoverGrace from
	// it for claims naming it (recover.go).
	recoverAt time.Time
	// claims holds the recover claims each peer's last heartbeat made
	// (nil until one made any), ownClaims this node's (its heartbeat's),
	// claimSig a digest of them for beatSig (0 without any): recover.go.
	claims    map[string][]RecoverClaim
	ownClaims []RecoverClaim
	claimSig  uint64
	// toldForgotten is when each forgotten peer that still sends here was
	// last told so (tellForgotten).
	toldForgotten map[string]time.Time
	// forgottenBy is the peer that told this one it was forgotten (its id
	// in that peer's Forgotten list): it can never rejoin under this id.
	forgottenBy string
	// forgetAtDeath holds the members a forget was heard for second-hand
	// while they were alive here: forgotten once this peer holds them
	// dead (detect, detectSWIM).
	forgetAtDeath map[string]bool
	ring          *ring.Ring
	// mine is the partitions ring places this node among the replicas
	// of (placedHere), for mineOf; asked at every tick of every partition
	// it holds, a search of the ring's members each time.
	mine   []int
	mineOf *ring.Ring
	sw     swim // the probe protocol (probe.go)

	// base is the time the mesh was created at: its members' instants are
	// offsets from it (instant.go).
	base time.Time
	// lastAt and lastInstant are the last time instant converted and its
	// instant: the node's now, asked for at every tick and every message
	// heard (instant.go).
	lastAt      time.Time
	lastInstant instant
	// refused holds the peers whose last heartbeat this one refused (other
	// partitions, replicas or placement), with that run's boot: a list or
	// probe update naming them adds none (refuse.go). An accepted heartbeat
	// clears the entry.
	refused map[string]string
	ringSet []string // the members the ring was built over
	// bookCache is book's answer while bookOK, but for the entries of
	// the members in bookDirty (probe_addr.go).
	bookCache []PeerAddrs
	bookDirty []string
	bookOK    bool
	// noAddrs holds the members but this node that have no address
	// (learnAddrs looks only for them).
	noAddrs   map[string]struct{}
	epoch     ring.Epoch
	preferred []ring.PeerID // per partition, over live members
	lastReady int           // READY count in the last heartbeat
	// sentAt is when each outbox entry was last sent (none: restored,
	// never sent in this run): resend skips those sent within the resend
	// period, whose answer may be on its way.
	sentAt  map[string]time.Time
	acks    map[string][]AckMsg // acks to send after commit, by partition/task key
	pendAck map[shard.TaskID]pendingAck
	byRaft  map[uint64]string // raft id -> peer id, over members
	ids     []string          // sorted member ids, nil when stale (memberIDs)
	// mbs is the members in the order of ids (sortedMembers), and
	// mbsSpare the buffer its next merge is built in.
	mbs, mbsSpare []*member
	// idsAdd is the members added since ids was sorted (memberIDs merges
	// them in).
	idsAdd []string
	// sum is the digest of the membership, the sum of its ids' hashes
	// (RaftID), kept as members come and go (add, forget): a heartbeat's
	// receiver tells the same membership from another without comparing
	// the lists (sameMembers).
	sum uint64
	// strandedPeers counts the members whose last heartbeat said they hold
	// READY tasks they cannot run themselves (see askStranded).
	strandedPeers int
	// granter is, per partition, the peer that last granted this node a
	// lease in it: it led the partition then. Outcomes go to it as well as
	// to the ring's owner, which may not lead yet (a young mesh, a move
	// in progress) and drops what it does not serve.
	granter map[int]string
	deaths  int // peers declared dead since this node started (Deaths)
	// twins holds the boot history of the members whose boot changed, for
	// the identity-conflict detector (twins.go); twinConflicts counts the
	// conflicts it declared.
	twins         map[string]*twin
	twinConflicts int
}

type pendingAck struct {
	from  string
	round shard.Round
}

func newMesh(n *Node, now time.Time, lone bool) mesh {
	m := mesh{n: n, base: now, members: map[string]*member{}, forgotten: map[string]bool{}, recover: map[string]bool{}, refused: map[string]string{}, noAddrs: map[string]struct{}{},
		outbox: map[string]OutcomeMsg{}, sentAt: map[string]time.Time{}, granter: map[int]string{}, pendAck: map[shard.TaskID]pendingAck{}, changedAt: now,
		byRaft: map[uint64]string{}, sw: swim{inc: uint64(max(now.UnixMilli(), 0)), relays: map[uint64]relay{}, silent: map[int]time.Time{}}}
	m.self = &member{id: n.cfg.ID, boot: n.cfg.Boot, heard: m.instant(now), state: PeerAlive, addrs: n.cfg.Addrs,
		rare: &memberRare{labels: n.placement.Labels, labelList: LabelList(n.placement.Labels)}}
	m.self.setVersion(n.cfg.Version)
	m.self.tidy() // no labels, no version
	m.add(m.self)
	if lone { // the ring of this peer alone, until it learns of others
		m.rebuildRing()
	}
	return m
}

// Members returns the membership, sorted, with each peer's state.
func (n *Node) Members() []MemberInfo {
	ids := slices.Sorted(maps.Keys(n.mesh.members))
	out := make([]MemberInfo, 0, len(ids))
	for _, id := range ids {
		m := n.mesh.members[id]
		out = append(out, MemberInfo{ID: id, State: m.state, Load: m.load, Addrs: m.addrs, LastSeen: n.mesh.at(m.heard),
			Labels: m.labelList(), Stranded: m.stranded(), StrandedFor: m.strandedFor(), Version: m.version(),
			Conflict: n.mesh.twinStands(id, n.now)})
	}
	return out
}

// MemberInfo describes one peer for /v1/peers.
type MemberInfo struct {
	ID       string
	State    PeerState
	Load     Load
	Addrs    []string
	LastSeen time.Time
	Labels   []string // placement labels, "key=value", sorted
	Stranded int      // READY tasks it cannot run itself (as last gossiped)
	// StrandedFor is the peers those tasks wait for, as gossiped (nil:
	// not named).
	StrandedFor []string
	// Version is its build version, as its last heartbeat or plain probe named it
	// (NodeConfig.Version): "" when unknown (an older peer, or one whose
	// heartbeat has not come).
	Version string
	// Conflict: this node hears two live processes under this peer's
	// identity (a copied data dir; twins.go, Node.IdentityConflict).
	Conflict bool
}

// PeerState returns what this node's failure detector thinks of peer id,
// and whether id is a member at all.
func (n *Node) PeerState(id string) (PeerState, bool) {
	if mb := n.mesh.members[id]; mb != nil {
		return mb.state, true
	}
	return 0, false
}

// Deaths counts the peers this node declared dead since it started (a
// peer dead twice counts twice): in a mesh without faults, every one is a
// false death.
func (n *Node) Deaths() int { return n.mesh.deaths }

// holderGone reports whether lease holder h (peer id and boot), to which
// this leader leased, is known to hold nothing any more: its peer is dead
// here, restarted since, or forgotten (no member any more: it was one
// when it was granted the lease).
func (m *mesh) holderGone(h string) bool {
	id := shard.HolderPeer(h)
	mb := m.members[id]
	return mb == nil || mb.state == PeerDead || mb.boot != "" && h != id+"#"+mb.boot
}

func (m *mesh) live(id string) bool {
	mb := m.members[id]
	return mb != nil && mb.state != PeerDead
}

// askable reports whether a blind steal request may go to a member: alive
// and heard from itself (its boot known), not only named by others.
func (m *mesh) askable(id string) bool {
	mb := m.members[id]
	return mb != nil && mb.state == PeerAlive && mb.boot != ""
}

// askableAt is askable for the member at index i of memberIDs.
func (m *mesh) askableAt(i int) bool {
	mb := m.sortedMembers()[i]
	return mb.state == PeerAlive && mb.boot != ""
}

// heard records a message from peer id, whose member the caller looked up
// (mb, nil when none): it is alive, and a member. A new boot nonce means
// the peer restarted: leases held by its former run are void. It returns
// the member, nil when id was forgotten.
func (m *mesh) heard(id string, mb *member, boot string, now time.Time) *member {
	if id == "" || m.forgotten[id] {
		return nil
	}
	if mb == nil {
		mb = &member{id: id}
		m.add(mb)
		m.changedAt = now
	}
	wasDead := mb.state == PeerDead
	if mb.state != PeerAlive { // new, suspect or dead: its next threshold is earlier now
		m.detectAt = earliest(m.detectAt, now.Add(m.n.cfg.DeadAfter/2))
	}
	rebooted := boot != "" && mb.boot != "" && boot != mb.boot
	// twins: two processes run under this identity (twins.go): a change
	// of boot is no restart while that stands.
	twins := (rebooted || m.twins != nil) && boot != "" && mb.boot != "" && m.twinHeard(mb, boot, now)
	if boot != "" {
		mb.boot = boot
	}
	mb.heard = m.instant(now)
	mb.state = PeerAlive
	if wasDead {
		m.prefDirty = true
	}
	if rebooted && !twins {
		m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == id && h != id+"#"+boot })
		m.newRun(mb, now) // marks the preferred owners dirty too
	}
	return mb
}

// newRun records that member mb restarted: what its former run advertised
// in heartbeats is void (a drain ends with the run that drained), and its
// new run's heartbeat is asked for with the next message from it (Node.step,
// wantBeat). Gossip may not have brought that heartbeat (a link from it was
// cut as it started), and under the probe protocol a peer heartbeats
// again only when what it advertises changes: a member held drained for
// good was passed over as its partitions' owner here and preferred by the
// peers that had the heartbeat, and the two sides handed leadership to
// each other every transferHold.
func (m *mesh) newRun(mb *member, now time.Time) {
	mb.rebootAt = m.instant(now)
	m.n.forgetAnswers(RaftID(mb.id))
	mb.draining, mb.beat, mb.askedAt = false, false, 0
	mb.setVersion("") // its new run's heartbeat names its build
	m.prefDirty = true
}

// learn merges a heartbeat's membership view. Merging a list twice
// changes nothing (members leave only by forget, which learn respects), so
// the list last merged from each sender is remembered and a heartbeat that
// carries the very same list is skipped; one that names exactly the known
// membership is skipped without lookups.
func (m *mesh) learn(from string, hb *Heartbeat, now time.Time) {
	for _, id := range hb.Recover {
		m.markRecover(id)
	}
	m.heardClaims(from, hb.Claims)
	for _, id := range hb.Forgotten {
		if id == m.n.cfg.ID {
			m.forgottenBy = from
			continue
		}
		// A forget heard second-hand applies to a peer this one does not
		// hear from any more: forget is for dead peers (needle forget),
		// and one keyed host must not be able to remove live peers from
		// the whole mesh. For a peer alive here it waits until this peer
		// holds it dead (forgetLater).
		if mb := m.members[id]; mb != nil && mb.state == PeerAlive {
			m.forgetLater(mb)
			continue
		}
		m.forget(id, now)
	}
	if hb.Sum != 0 && m.sameMembers(hb) {
		// The list names exactly this peer's members (a settled mesh's
		// every heartbeat): nothing to add, and no mark to make (a weak
		// pointer made for each heartbeat was a tenth of the work of an
		// idle 1,000-peer mesh's first contacts).
		return
	}
	sender := m.members[from]
	if sender != nil && sender.merged.is(hb.Members) {
		return
	}
	if !m.sameMembers(hb) {
		for _, id := range hb.Members {
			if m.members[id] == nil && !m.forgotten[id] && !m.isRefused(id, "") && id != "" && (m.n.cfg.ValidID == nil || m.n.cfg.ValidID(id)) {
				m.add(&member{id: id, heard: m.instant(now), state: PeerAlive, listed: true})
				m.changedAt = now
				m.detectAt = earliest(m.detectAt, now.Add(m.n.cfg.DeadAfter/2))
			}
		}
	}
	if sender != nil {
		sender.merged = markOf(hb.Members)
	}
}

// sameMembers reports whether hb's membership list names exactly this
// peer's members: by its digest when it has one (Heartbeat.Sum: at 1,000
// peers every member's first heartbeat to each other is a million lists
// of a thousand), else compared.
func (m *mesh) sameMembers(hb *Heartbeat) bool {
	if len(hb.Members) != len(m.members) {
		return false
	}
	if hb.Sum != 0 {
		return hb.Sum == m.sum
	}
	return slices.Equal(hb.Members, m.memberIDs())
}

// sliceMark tells a slice seen before from another without keeping it
// alive: a member remembered the very slices its last heartbeat carried
// (a sender's list and address book, shared where messages are not
// copied: the simulator), and 1,000 simulated peers each holding the
// lists of 999 others at as many versions kept 440 MB of old lists. A
// weak pointer compares equal only for the same allocation, also after
// that is freed and its memory reused.
type sliceMark[T any] struct {
	first weak.Pointer[T]
	n     int
}

// markOf marks s (empty: a mark no slice is).
func markOf[T any](s []T) sliceMark[T] {
	if len(s) == 0 {
		return sliceMark[T]{}
	}
	return sliceMark[T]{first: weak.Make(&s[0]), n: len(s)}
}

// is reports whether s is the slice marked (not merely an equal one).
func (k sliceMark[T]) is(s []T) bool {
	return len(s) > 0 && k.n == len(s) && k.first == weak.Make(&s[0])
}

// isForgotten reports whether id was removed from the membership for good:
// it will never run anything again, so the tasks pinned to it fail
// (shard.FailPinnedTo).
func (m *mesh) isForgotten(id string) bool { return m.forgotten[id] }

// tellForgottenEvery is how often a forgotten peer that still sends here
// is told it was forgotten.
const tellForgottenEvery = 10 * time.Second

// tellForgotten answers a message from a forgotten peer with this peer's
// heartbeat, whose Forgotten list names it (now and then: it may send
// many). A forgotten peer restarted on its old data would otherwise never
// become ready, and only the other peers' logs would say why.
func (m *mesh) tellForgotten(to string, now time.Time) {
	if last, ok := m.toldForgotten[to]; ok && now.Sub(last) < tellForgottenEvery {
		return
	}
	if m.toldForgotten == nil {
		m.toldForgotten = map[string]time.Time{}
	}
	m.toldForgotten[to] = now
	m.sendBeat(to, 0)
}

// ForgottenBy names the peer that told this one it was removed from the
// mesh for good (needle forget), "" while none has: its id never rejoins,
// and it must start afresh (a new data dir, a new identity) to serve again.
func (n *Node) ForgottenBy() string { return n.mesh.forgottenBy }

// forget removes a peer from the membership for good.
func (m *mesh) forget(id string, now time.Time) {
	if id == m.n.cfg.ID || m.forgotten[id] {
		return
	}
	m.forgotten[id], m.forgotNew = true, true
	m.recoverScan = m.recoverScan || m.recover[id]
	if m.recover[id] {
		m.recoverAt = now
	}
	delete(m.claims, id)
	delete(m.forgetAtDeath, id)
	delete(m.twins, id)
	m.enqueue(Update{ID: id, State: peerForgotten})
	m.n.steal.forgetLoad(id)
	if mb := m.members[id]; mb != nil {
		m.setLegacy(mb, false, now)
		if mb.stranded() > 0 {
			m.strandedPeers--
		}
		mb.gone = true
		delete(m.members, id)
		m.bookMark(id)
		delete(m.noAddrs, id)
		delete(m.byRaft, RaftID(id))
		m.sum -= RaftID(id)
		m.ids, m.idsAdd = nil, m.idsAdd[:0]
		m.version++
		m.detectAt = time.Time{}
		m.changedAt = now
		m.prefDirty = true
		if mb.state != PeerDead {
			// Forgotten before the failure detector declared it dead
			// (needle forget right after a kill): its leases would
			// otherwise wait for their tasks' timeouts.
			m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == id })
		}
	}
}

// forgetLater records a forget heard second-hand for member mb, alive
// here: it applies once this peer holds mb dead. Applied at once, one
// keyed host could remove live peers from the whole mesh; dropped, as
// it was until 2026-12-06, a peer that heard it while it still counted
// mb alive (one that restarted, or was cut off, as mb left) kept mb for
// up to syncEvery after its death, until a membership exchange brought
// the forget again. Its ring kept mb while its peers' had dropped it,
// they disagreed on partitions' preferred owners, and two of them handed
// a partition's leadership to each other every 3 s for 20 s (simulate:
// seed 490089, --peers 5 --workload w4).
func (m *mesh) forgetLater(mb *member) {
	if m.forgetAtDeath == nil {
		m.forgetAtDeath = map[string]bool{}
	}
	m.forgetAtDeath[mb.id] = true
}

// Forget removes a peer from the membership (needle forget): its replicas
// move to other peers.
func (n *Node) Forget(id string) { n.mesh.forget(id, n.now) }

// tick runs the failure detector, gossips a heartbeat, rebuilds the ring
// once the membership is stable, and re-sends unacknowledged outcomes.
func (m *mesh) tick(now time.Time) {
	cfg := &m.n.cfg
	m.self.heard, m.self.state = m.instant(now), PeerAlive
	if !now.Before(m.detectAt) {
		if m.swimOn() {
			m.detectSWIM(now)
		} else {
			m.detect(now)
		}
	}
	if m.ringVersion != m.version && now.Sub(m.changedAt) >= cfg.Debounce {
		if slices.Equal(m.ringSet, m.memberIDs()) {
			m.ringVersion = m.version
		} else {
			m.rebuildRing()
		}
	}
	if m.prefDirty {
		m.computePreferred()
	}
	if m.beatDue(now) {
		m.lastBeat = now
		m.n.ext.beatSoon = false
		hb := m.heartbeat()
		m.lastReady = hb.Heartbeat.Load.Ready
		m.sw.sig = m.beatSig(hb.Heartbeat.Load.Ready, hb.Heartbeat.Stranded)
		if len(m.members) <= 1 {
			hb.Heartbeat.Sync = SyncJoin
		}
		m.n.rd.Gossip = append(m.n.rd.Gossip, hb)
	}
	if m.swimOn() {
		m.probeTick(now)
	}
	if len(m.outbox) > 0 && now.Sub(m.lastSend) >= cfg.HeartbeatEvery/2 {
		m.lastSend = now
		m.resend()
	}
}

// detect is the failure detector's pass over the members: suspect after
// DeadAfter/2 of silence, dead after DeadAfter, forgotten after
// ForgetAfter. It sets detectAt to the next time a threshold can be
// crossed, so that the per-input tick does not walk every member.
func (m *mesh) detect(now time.Time) {
	cfg := &m.n.cfg
	next := now.Add(cfg.ForgetAfter)
	for _, id := range m.memberIDs() {
		mb := m.members[id]
		if id == cfg.ID {
			continue
		}
		silent := now.Sub(m.at(mb.heard))
		switch {
		case silent >= cfg.ForgetAfter:
			m.forget(id, now)
			continue
		case silent >= cfg.DeadAfter && mb.state != PeerDead:
			m.markDead(mb, now) // its detectAt is overwritten below
		case silent >= cfg.DeadAfter/2 && silent < cfg.DeadAfter && mb.state == PeerAlive:
			mb.state = PeerSuspect
		}
		if mb.state == PeerDead && m.forgetAtDeath[id] {
			m.forget(id, now)
			continue
		}
		heard := m.at(mb.heard)
		next = earliest(next, heard.Add(cfg.ForgetAfter))
		if mb.state != PeerDead {
			next = earliest(next, heard.Add(cfg.DeadAfter))
		}
		if mb.state == PeerAlive {
			next = earliest(next, heard.Add(cfg.DeadAfter/2))
		}
	}
	m.detectAt = next
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// loadJumped reports a large change of this node's READY count since the
// last heartbeat (work arrived, or ran out): idle peers should not wait a
// whole heartbeat interval to learn of it (docs/design.md, W3). Rate-limited.
func (m *mesh) loadJumped(now time.Time) bool {
	return now.Sub(m.lastBeat) >= eagerBeatEvery && m.loadJump()
}

// loadJump reports whether this node's READY count moved enough since the
// last heartbeat to gossip it early (loadJumped, less the rate limit).
func (m *mesh) loadJump() bool {
	ready := 0
	for _, i := range m.n.held {
		if p := m.n.parts[i]; p.serving {
			ready += p.shard.ReadyLen()
		}
	}
	jump := max(m.n.cfg.Slots, 4)
	return (ready > 0) != (m.lastReady > 0) || ready-m.lastReady > jump || m.lastReady-ready > jump*4
}

// eagerBeatEvery bounds the heartbeats sent on load changes.
const eagerBeatEvery = 50 * time.Millisecond

// memberIDs returns the member ids, sorted. The slice is cached until the
// membership changes: callers must not modify it (heartbeats carry it).
// Members added since it was sorted are merged into a new slice: a
// forming mesh adds them one at a time between heartbeats, and sorting
// the whole membership again each time was a tenth of the first seconds
// of a 1,000-peer simulation.
func (m *mesh) memberIDs() []string {
	switch {
	case m.ids == nil:
		m.ids = slices.Sorted(maps.Keys(m.members))
		mbs := m.mbsSpare[:0]
		for _, id := range m.ids {
			mbs = append(mbs, m.members[id])
		}
		m.mbs, m.mbsSpare = mbs, m.mbs
	case len(m.idsAdd) > 0:
		slices.Sort(m.idsAdd)
		merged := make([]string, 0, len(m.ids)+len(m.idsAdd))
		mbs := m.mbsSpare[:0]
		i := 0
		for _, id := range m.idsAdd {
			j := i + sort.SearchStrings(m.ids[i:], id)
			merged = append(append(merged, m.ids[i:j]...), id)
			mbs = append(append(mbs, m.mbs[i:j]...), m.members[id])
			i = j
		}
		m.ids = append(merged, m.ids[i:]...)
		m.mbs, m.mbsSpare = append(mbs, m.mbs[i:]...), m.mbs
	}
	m.idsAdd = m.idsAdd[:0]
	return m.ids
}

// sortedMembers returns the members in the order of memberIDs, without a
// lookup each: the passes over every member (the address book, a blind
// steal's candidates) at 1,000 peers cost a map lookup per member, most
// of it a cache miss. The slice is this mesh's: do not modify or keep it.
func (m *mesh) sortedMembers() []*member {
	m.memberIDs()
	return m.mbs
}

func (m *mesh) heartbeat() Message {
	ready, stranded := m.n.readyLoad()
	var forgotten []string
	if len(m.forgotten) > 0 {
		forgotten = slices.Sorted(maps.Keys(m.forgotten))
	}
	hb := &Heartbeat{
		Boot: m.n.cfg.Boot, Partitions: m.n.cfg.Partitions, Addrs: m.n.cfg.Addrs,
		Load: Load{Ready: ready, Running: len(m.n.running), Slots: m.n.cfg.Slots}, Draining: m.n.draining,
		Members: m.memberIDs(), Sum: m.sum, Forgotten: forgotten,
		Labels: m.self.labelList(), Stranded: stranded, Features: Features,
		Workers: m.n.workerAds(), Replicas: m.n.cfg.Replicas, Placement: m.n.cfg.Placement, Inc: m.sw.inc,
		Version: m.self.version(),
	}
	if len(m.recover) > 0 {
		hb.Recover = slices.Sorted(maps.Keys(m.recover))
		hb.Claims = m.ownClaims
	}
	if stranded > 0 {
		hb.StrandedFor = m.strandedFor()
	}
	return Message{Type: MsgHeartbeat, From: m.n.cfg.ID, Heartbeat: hb}
}

// maxStrandedFor caps the peers a heartbeat names for its stranded tasks;
// past it, it names none and any peer may ask.
const maxStrandedFor = 32

// strandedFor returns the live members, not draining, that may run some of
// the READY tasks this node holds but may not run itself, sorted; nil when
// there are more than maxStrandedFor.
func (m *mesh) strandedFor() []string {
	var cands []shard.Placement
	for _, id := range m.memberIDs() {
		if mb := m.members[id]; id != m.n.cfg.ID && mb.state != PeerDead && !mb.draining {
			cands = append(cands, shard.Placement{Peer: id, Labels: mb.labels()})
		}
	}
	var runners map[string]bool
	for _, i := range m.n.held {
		if p := m.n.parts[i]; p.serving {
			runners = p.shard.StrandedRunners(m.n.placement, cands, runners)
		}
	}
	if len(runners) > maxStrandedFor {
		return nil
	}
	return slices.Sorted(maps.Keys(runners))
}
