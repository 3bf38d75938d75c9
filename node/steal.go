package node

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/steal"
)

// NodeStats are counters of the node's protocol work, for metrics and
// /v1/peers.
type NodeStats struct {
	StaleOutcomes int // outcomes refused by fencing (stale round or holder)
	StealsAsked   int // steal requests sent
	StealsGranted int // tasks received from victims
	StealsRefused int // refusals and empty grants received
	StealsSampled int // of StealsAsked, blind asks: no known peer had advertised work (Thief.Sample)
	StaleGrants   int // grants received for this peer's former run (dropped)
	TasksGranted  int // tasks this node granted to thieves
	LeaseExpiries int // leases that ended without an outcome
	Abdications   int // partition leaderships given up for want of a majority's answers (abdicate)
	Stalls        int // partitions whose leader stopped serving for want of a majority no other voter could replace (stall)
	// RejectedEntries counts committed entries (or events in them) that
	// could not be applied and changed nothing (see rejectEntry).
	RejectedEntries int
	// DroppedRaft counts Raft messages from the network refused before
	// Raft saw them (see checkRaft).
	DroppedRaft int
	// Entries counts the entries of events this node proposed as leader
	// that Raft took (one per partition per Ready under load, and one per
	// request other than a submission): over the tasks run, the log's
	// cost per task.
	Entries int
	// Quiesced counts the partitions this node quiesced as leader, Woken
	// the quiesced replicas it woke (quiesce.go).
	Quiesced, Woken int
	// Left counts the partitions this node dropped (leave.go),
	// ReplicaAsks the MsgReplicaAsk it sent, StaleRaft the Raft messages
	// for partitions it does not hold that it did not open one for.
	Left, ReplicaAsks, StaleRaft int
	// Thaws counts the gaps in this node's clock after which it voided
	// the read leases of the partitions it leads (lease.go, thawed).
	Thaws int
	// Deaths counts the peers this node declared dead (Node.Deaths): in a
	// mesh without faults, every one is a false failover.
	Deaths int
	// IdentityConflicts counts the identity conflicts this node declared:
	// two live processes heard under one peer id (twins.go).
	IdentityConflicts int
	// LeaderChanges counts the times this node gained or lost the
	// leadership of a partition it holds (softState): a rate of them
	// well above the mesh's membership changes is leadership flapping.
	LeaderChanges int
	// UnsafeRecoveries counts the partitions this node recovered as their
	// last voter after an operator's needle forget --unsafe-recover
	// (recover.go).
	UnsafeRecoveries int
	// RecoveredElsewhere counts the copies this node dropped and rebuilt
	// from a snapshot because another survivor's unsafe recovery left
	// them disagreeing with the recovered log (recover.go: rebuild).
	RecoveredElsewhere int
}

// stealer is the node's side of work stealing: the pure policy of package
// steal as thief, and the grants this node owes thieves as victim.
type stealer struct {
	t       *steal.Thief            // nil when stealing is off
	owed    map[shard.TaskID]string // leases proposed for a thief, by task
	grants  map[string][]Grant      // grants to send with the next Ready, by thief holder (id#boot)
	applied map[string]bool         // the holders of grants whose leases applied (flushGrants)
	refuse  []string                // thieves to answer with a refusal
	notNow  []string                // thieves to answer "not now" (steal.TailCap)
	drain   steal.Drainers          // the slots that drain this peer's backlog
	askedAt time.Time               // when the last steal request went out
	// stranded is the victim of the request in flight for its stranded
	// tasks (askStranded), "" when none is: a slot is kept for its grant.
	stranded string
	enabled  bool
	// asks are the tasks asked of each victim that neither its reply nor
	// its leases have accounted for yet, and when it was last asked. The
	// Thief abandons a request after RequestTTL, but a victim whose
	// commits lag (a restart's elections, a loaded disk) still grants it
	// later: a thief that asked another victim for as much meanwhile held
	// up to twice the leases it has room for (a restarted peer of a
	// loaded mesh, 673 runs for 387). Until askReserve has passed, what
	// is asked keeps its room (reserved, maybeSteal).
	asks map[string]pendingAsk
	// later are the tasks a victim's grant replies named that this node
	// did not start from the reply and starts when their leases apply on
	// its replica (stepGrant): they keep their room the same way, apart
	// from asks, which the next reply of that victim ends.
	later map[string]pendingAsk
}

// pendingAsk is what a thief still waits for from one victim.
type pendingAsk struct {
	tasks int
	at    time.Time
}

// askReserve is how long the tasks of an unanswered steal request keep
// their room in the thief's capacity: long past Config.RequestTTL (1 s),
// for a victim whose commits lag, and short enough that a reply lost on
// the way leaves the thief asking for less only for a while.
const askReserve = 2 * time.Second

// asked notes a request for tasks sent to victim.
func (s *stealer) asked(victim string, tasks int, now time.Time) {
	addTasks(&s.asks, victim, tasks, now)
}

// grantedLater notes tasks of victim's grant reply that start here only
// when their leases apply.
func (s *stealer) grantedLater(victim string, tasks int, now time.Time) {
	addTasks(&s.later, victim, tasks, now)
}

// addTasks adds tasks to (*m)[victim], dated now.
func addTasks(m *map[string]pendingAsk, victim string, tasks int, now time.Time) {
	if *m == nil {
		*m = map[string]pendingAsk{}
	}
	(*m)[victim] = pendingAsk{tasks: (*m)[victim].tasks + tasks, at: now}
}

// took notes one lease to this peer from victim that applied here and
// started: one of the tasks a reply named and this node did not start
// from it, or one that applied before the victim's reply came (the reply
// then ends the rest of the request).
func (s *stealer) took(victim string) {
	if !takeOne(s.later, victim) {
		takeOne(s.asks, victim)
	}
}

// takeOne takes one task off m[victim], and reports whether there was one.
func takeOne(m map[string]pendingAsk, victim string) bool {
	a, ok := m[victim]
	switch {
	case !ok:
		return false
	case a.tasks <= 1:
		delete(m, victim)
	default:
		m[victim] = pendingAsk{tasks: a.tasks - 1, at: a.at}
	}
	return true
}

// reserved returns the tasks asked or granted and not yet accounted for,
// forgetting those older than askReserve.
func (s *stealer) reserved(now time.Time) int {
	return unexpired(s.asks, now) + unexpired(s.later, now)
}

// unexpired sums the tasks of m, dropping the entries older than
// askReserve.
func unexpired(m map[string]pendingAsk, now time.Time) int {
	k := 0
	for v, a := range m {
		if now.Sub(a.at) >= askReserve {
			delete(m, v)
			continue
		}
		k += a.tasks
	}
	return k
}

func newStealer(cfg NodeConfig) (stealer, error) {
	s := stealer{owed: map[shard.TaskID]string{}, grants: map[string][]Grant{}, applied: map[string]bool{}, enabled: cfg.Steal}
	if !cfg.Steal {
		return s, nil
	}
	sc := steal.DefaultConfig()
	sc.Rand = rand.New(rand.NewPCG(RaftID(cfg.ID), cfg.Rand.Uint64()))
	if cfg.ProbeEvery > 0 {
		// Under the probe protocol a peer heartbeats when what it
		// advertises changes (READY work or none), not every second: its
		// last load stands until it sends another or dies (forgetLoad).
		// Three silent seconds made a loaded peer that had nothing new to
		// say no victim at all, and its backlog waited for its own slots.
		sc.StaleAfter = cfg.ForgetAfter
	}
	t, err := steal.New(sc)
	s.t = t
	return s, err
}

// Observe feeds a gossiped or replied load to the policy.
func (s *stealer) Observe(peer string, l Load, now time.Time) {
	if s.t != nil {
		s.t.Observe(steal.Load{Peer: peer, Ready: l.Ready, Running: l.Running, Slots: l.Slots, At: now})
	}
}

// forgetLoad drops what the thief knows of a peer declared dead or
// forgotten: loads do not go stale under the probe protocol, so a dead
// victim would otherwise be asked until its backoff grew to the maximum.
func (s *stealer) forgetLoad(peer string) {
	delete(s.asks, peer)
	delete(s.later, peer)
	if s.t != nil {
		s.t.Forget(peer)
	}
}

// load returns this node's load as it gossips it.
func (n *Node) load() Load {
	return Load{Ready: n.readyTotal() - n.readyExternal(), Running: n.busy, Slots: n.cfg.Slots}
}

// maybeSteal asks a loaded peer for work when this node has free slots and
// nothing READY of its own. It runs after every local scheduling pass, not
// only on gossip, so an idle peer does not wait for the next round.
func (n *Node) maybeSteal() {
	if n.steal.t == nil || n.draining || n.busy >= n.stealCapacity() {
		return
	}
	if n.readyRunnable() > 0 {
		return
	}
	self := n.load()
	self.Ready = 0 // what it holds READY is for other peers only (pins, labels)
	// Capacity counts the slots plus the leases that hide a steal's round
	// trip (Little's law on measured averages): a thief asks again before
	// its last task ends, and long tasks stay with the victim instead of
	// waiting in a thief's queue. What unanswered requests asked for keeps
	// its room (stealer.asks) for up to askReserve.
	capacity := n.stealCapacity()
	reserved := n.steal.reserved(n.now)
	if self.Running+reserved >= capacity {
		return
	}
	me := steal.Load{Peer: n.cfg.ID, Ready: self.Ready, Running: self.Running + reserved, Slots: capacity, At: n.now}
	victim, want, ok := n.steal.t.Next(n.now, me)
	if !ok { // nobody known to have work: ask one at random now and then
		victim, want, ok = n.steal.t.Sample(n.now, me, n.mesh.memberIDs(), n.mesh.askableAt)
		if ok {
			n.stats.StealsSampled++
		}
	}
	if !ok {
		return
	}
	n.askSteal(victim, min(want, max(capacity-me.Running, 1)), self)
}

// stealCapacity is how many leases this node holds at most before it
// stops asking thieves' questions: its slots, plus the leases that hide a
// steal's round trip unless a victim said its backlog is in its tail
// (steal.Thief.Ahead).
func (n *Node) stealCapacity() int {
	if n.steal.t != nil && !n.steal.t.Ahead(n.now) {
		return n.cfg.Slots
	}
	return n.cfg.Slots + n.pace.stealAhead(n.cfg.Slots, n.cfg.LeaseAhead)
}

// askSteal sends a steal request for want tasks, with this node's load.
func (n *Node) askSteal(victim string, want int, load Load) {
	n.steal.askedAt = n.now
	n.steal.asked(victim, want, n.now)
	n.stats.StealsAsked++
	n.rd.Early = append(n.rd.Early, Envelope{To: victim, Msg: Message{Type: MsgStealReq, From: n.cfg.ID, Want: want, Load: load, Holder: n.holder}})
}

// askStranded lets a peer with work of its own still take the tasks that
// other owners hold READY for want of a peer that may run them (pinned to
// it, or requiring labels it has): without it, a peer whose own queue never
// ran dry never stole, and a task pinned to it (a scheduled broadcast's
// copy) waited for as long as that lasted. When a live member advertises
// such tasks (its heartbeat's Stranded) and is not in backoff, this peer
// asks it for one, and local scheduling keeps a slot free until the reply
// (or the request's expiry): the victim grants the stranded tasks this
// peer may run (LeaseStranded), none of its surplus (the load this ask
// carries counts READY work: stepSteal), and a refusal backs it off as
// any steal does. A member whose heartbeat names the peers its stranded
// tasks wait for (StrandedFor) is asked only by those. An idle peer needs
// none of this: maybeSteal asks. Reports whether a slot is kept.
func (n *Node) askStranded() bool {
	if n.steal.t == nil {
		return false
	}
	if n.steal.stranded != "" {
		if v, ok := n.steal.t.Pending(n.now); ok && v == n.steal.stranded {
			return true
		}
		n.steal.stranded = ""
	}
	if n.mesh.strandedPeers <= 0 || n.readyRunnable() == 0 {
		return false
	}
	victim, most := "", 0
	for _, id := range n.mesh.memberIDs() {
		mb := n.mesh.members[id]
		if id == n.cfg.ID || mb.stranded() <= most || mb.state == PeerDead || mb.boot == "" ||
			n.now.Before(n.steal.t.BackoffUntil(id)) ||
			mb.strandedFor() != nil && !slices.Contains(mb.strandedFor(), n.cfg.ID) {
			continue
		}
		victim, most = id, mb.stranded()
	}
	if victim == "" || !n.steal.t.Ask(n.now, victim) {
		return false
	}
	n.steal.stranded = victim
	n.askSteal(victim, 1, n.load())
	return true
}

func (n *Node) stepSteal(from string, m Message) error {
	if m.Type == MsgGrant {
		n.stepGrant(from, m)
		return nil
	}
	n.steal.Observe(from, m.Load, n.now)
	mb := n.mesh.members[from]
	// Tasks shorter than a commit are cheaper to run here than to ship: a
	// stolen task costs a lease commit, a grant, and an outcome sent back
	// and committed, while the lease-ahead pacing keeps this peer's slots
	// busy. Only longer work is worth moving. Until this peer has timed a
	// task it does not know which kind it has, and it ships: refusing sent
	// every thief into backoff for the first task's duration, which for a
	// fresh burst of long tasks idles the mesh at the start (W3 lost 2% of
	// its makespan so), while a few short tasks shipped early cost little.
	// The exception to "short stays" is a backlog that this peer's slots
	// would take many commits to drain (thousands of 1 ms tasks): then the
	// slots are the bottleneck, and a batch granted for one commit buys the
	// thief's slots.
	ready := n.readyRunnable()
	short := n.pace.run > 0 && n.pace.commit > 0 && n.pace.run < n.pace.commit && !n.pace.backlogged(ready, n.cfg.Slots)
	holder := stealHolder(mb, from, m.Holder)
	if holder == "" || mb.draining {
		n.steal.refuse = append(n.steal.refuse, from)
		return nil
	}
	thief := shard.Placement{Peer: from, Labels: mb.labels()}
	// Tasks this peer may not run itself but the thief may go first, and
	// all of them (up to what it asked for), whatever the pacing says:
	// nobody else here can take them. Then, when stealing is on, tasks
	// are long enough to be worth moving and the thief has no READY work
	// of its own, a share of the surplus.
	want := m.Want
	granted := n.grant(want, func(p *partition, k int) []shard.Event {
		return p.shard.LeaseStranded(n.now, k, holder, thief, n.placement)
	}, from)
	// A thief whose load counts READY tasks is busy with a queue of its
	// own and asks only for what is stranded here (askStranded; an idle
	// thief's request counts none, maybeSteal): a share of this backlog
	// would run there ahead of the thief's own older tasks, among them
	// tasks pinned to it that no other peer may run, and its slots do not
	// drain this backlog (drain). Granted so, a peer's asks kept its slots
	// on other owners' backlogs, and a task pinned to it stayed READY for
	// 156 s, 80 of them at the head of its own queue (simulator, sched
	// seed 890008 on 5 peers).
	busyThief := m.Load.Ready > 0
	tail := false
	if n.steal.enabled && !short && !busyThief {
		n.steal.drain.Asked(n.now, from, m.Load.Slots)
		// What this peer's own slots take: those free now and the leases
		// it would hold ahead, none in a tail thieves drain (ownAhead).
		// Counting leases ahead it then does not take kept a backlog's
		// last task READY until one of its own slots freed.
		limit := n.cfg.Slots + n.ownAhead()
		tail = n.inTail(ready, steal.TailSlowRuns)
		most := steal.TailCap(tail, m.Load.Slots-m.Load.Running, want-granted)
		give := min(steal.GrantSize(ready, max(limit-n.busy, 0), want), most)
		granted += n.grant(give, func(p *partition, k int) []shard.Event {
			return p.shard.LeaseFor(n.now, k, holder, thief, nil)
		}, from)
	}
	switch {
	case granted == 0 && tail && m.Load.Running >= m.Load.Slots:
		n.steal.notNow = append(n.steal.notNow, from)
	case granted == 0:
		n.steal.refuse = append(n.steal.refuse, from)
	}
	return nil
}

// inTail reports whether this peer's backlog of ready tasks is in its
// tail (steal.InTail), drained by its own slots and those of the thieves
// that asked lately.
func (n *Node) inTail(ready, slowRuns int) bool {
	return steal.InTail(ready, n.steal.drain.Slots(n.now, n.cfg.Slots), time.Duration(n.pace.run), time.Duration(n.pace.slow), slowRuns)
}

// stealHolder is the holder a thief's leases are for: its incarnation as
// its heartbeats named it, or, before one reached this peer, as its steal
// request names it (holder, when it is the sender's). "" for a thief this
// peer cannot lease to. At 1,000 peers a member's heartbeat comes
// directly only at the first probe between the two, minutes into a mesh's
// life; refusing the thieves it had not come from turned away 700 of the
// 999 that asked for a burst's tasks (W3 on 1,000 peers).
func stealHolder(mb *member, from, holder string) string {
	switch {
	case mb == nil:
		return ""
	case mb.boot != "":
		return from + "#" + mb.boot
	case len(holder) > len(from)+1 && shard.HolderPeer(holder) == from:
		return holder
	}
	return ""
}

// grant proposes up to give leases for thief, taken by lease from the
// partitions this node serves, and returns how many it proposed.
func (n *Node) grant(give int, lease func(p *partition, k int) []shard.Event, thief string) int {
	granted := 0
	for p := range n.readyHeld {
		if give-granted <= 0 {
			break
		}
		evs := lease(p, give-granted)
		if len(evs) == 0 {
			continue
		}
		granted += len(evs)
		if evs = n.holdGrants(p, evs); len(evs) == 0 {
			continue
		}
		for _, e := range evs {
			n.steal.owed[e.Task] = thief
		}
		p.propose(evs)
		n.markDirty(p.id)
	}
	return granted
}

// grantApplied turns a committed lease for a thief into a grant to send.
func (n *Node) grantApplied(p *partition, e *shard.Event) {
	delete(n.heldGrants, e.Task)
	if p.serving && n.mesh.holderGone(e.Holder) {
		// Its holder died or restarted while the lease was on its way
		// to the log (held back, or proposed): expireHolders, run
		// then, found nothing to expire. It is expired now, or the task
		// would stay RUNNING under a holder nobody is.
		delete(n.steal.owed, e.Task)
		if evs := p.shard.ExpireHolders(n.now, func(h string) bool { return h == e.Holder }); len(evs) > 0 {
			p.propose(evs)
			n.markDirty(p.id)
		}
		return
	}
	thief, ok := n.steal.owed[e.Task]
	if !ok {
		return
	}
	delete(n.steal.owed, e.Task)
	if shard.HolderPeer(e.Holder) != thief {
		// Not the lease this node proposed: a newer leader committed
		// another at that index (this node was deposed, or paused, in
		// between). Granting it would start the task on a peer that
		// holds no lease: the holder's own grant comes from its owner.
		return
	}
	spec, ok := p.shard.RunOf(e.Task, e.Round, e.Holder)
	if !ok {
		return
	}
	n.stats.TasksGranted++
	n.steal.grants[e.Holder] = append(n.steal.grants[e.Holder], n.grantOf(p, e, &spec))
	n.steal.applied[e.Holder] = true
}

// grantOf is the grant of lease e of p, a task of spec.
func (n *Node) grantOf(p *partition, e *shard.Event, spec *shard.TaskSpec) Grant {
	si, sn := p.shard.BroadcastShard(e.Task)
	return Grant{Task: e.Task, Round: e.Round, Expiry: e.Expiry,
		Handler: spec.Handler, Payload: p.shard.Payload(e.Task), Timeout: p.shard.Timeout(spec),
		Inputs: rawInputs(p.shard.Inputs(e.Task)), Attempt: p.shard.Attempts(e.Task), Trace: p.shard.Trace(e.Task),
		Shard: si, Shards: sn, Require: spec.Require, Worker: p.shard.BroadcastWorker(e.Task), Deaths: p.shard.Deaths(e.Task),
		Created: p.shard.Created(e.Task), Name: spec.Name, Pin: spec.Pin, Info: p.shard.RunInfo(e.Task)}
}

// flushGrants sends the grants (and refusals) of this Ready. A grant
// whose lease this leader holds back (holdGrants) goes early
// (Ready.Early), ahead of the Ready's persist: the lease is in no
// committed entry, so the grant vouches for nothing the persist makes
// durable, and a thief whose slot is free waits for no sync of the
// victim's. The lease may ride along in an entry of this very Ready (the
// partition proposed something else: flush), which commits only once a
// majority wrote it, as it would have later; the thief's run counts
// through the log either way. So do refusals, and a thief's steal
// requests (askSteal). A grant of a lease that applied (grantApplied)
// waits for the persist: a partition with one voter commits an entry
// before it is written.
func (n *Node) flushGrants() {
	if len(n.steal.grants) == 0 && len(n.steal.refuse) == 0 && len(n.steal.notNow) == 0 {
		return
	}
	self := n.load()
	granted := map[string]bool{}
	var keys [4]string
	for _, holder := range appendSortedKeys(keys[:0], n.steal.grants) {
		to := shard.HolderPeer(holder)
		granted[to] = true
		out := &n.rd.Early
		if n.steal.applied[holder] {
			out = &n.rd.Messages
		}
		*out = append(*out, Envelope{To: to, Msg: Message{Type: MsgGrant, From: n.cfg.ID, Load: self,
			Grants: n.steal.grants[holder], Holder: holder}})
	}
	for i, thieves := range [2][]string{n.steal.refuse, n.steal.notNow} {
		for _, to := range thieves {
			if !granted[to] {
				n.rd.Early = append(n.rd.Early, Envelope{To: to, Msg: Message{Type: MsgGrant, From: n.cfg.ID, Load: self, Refused: true, NotNow: i == 1}})
			}
		}
	}
	clear(n.steal.grants)
	clear(n.steal.applied)
	n.steal.refuse = n.steal.refuse[:0]
	n.steal.notNow = n.steal.notNow[:0]
}

// stepGrant starts the tasks a victim leased to this node. Their outcomes
// go to the owner through the outbox like any outcome for a partition led
// elsewhere.
func (n *Node) stepGrant(from string, m Message) {
	n.steal.Observe(from, m.Load, n.now)
	if len(m.Grants) > 0 && !slices.ContainsFunc(m.Grants, func(g Grant) bool { return !n.External(g.Handler) }) {
		n.stepOffer(from, m) // offered to this peer's workers, not asked for
		return
	}
	asked := 0
	if m.Holder == "" || m.Holder == n.holder {
		asked = n.steal.asks[from].tasks
		delete(n.steal.asks, from) // answered: what it granted is counted in busy, or kept below
	}
	if n.steal.t != nil {
		switch {
		case len(m.Grants) == 0 && m.NotNow:
			n.steal.t.NotNow(n.now, from)
		case len(m.Grants) == 0:
			n.steal.t.Refused(n.now, from)
		default:
			n.steal.t.Granted(n.now, from, len(m.Grants))
		}
	}
	if len(m.Grants) == 0 {
		n.stats.StealsRefused++
		return
	}
	if m.Holder != "" && m.Holder != n.holder {
		// Leases for this peer's former run (it restarted since it asked):
		// their outcomes would be refused, and the owner re-runs them when
		// they expire.
		n.stats.StaleGrants += len(m.Grants)
		return
	}
	n.pace.stole(n.now.Sub(n.steal.askedAt))
	later := 0
	for _, g := range m.Grants {
		if !n.grantable(g, from) {
			later++
			continue
		}
		n.mesh.granter[n.PartitionOf(g.Task.Group())] = from
		if n.External(g.Handler) {
			n.startOffered(g, from)
			continue
		}
		if g.Timeout <= 0 || !n.claimGrant(g.Task, g.Round, g.Expiry, from) {
			continue // a duplicate or late grant, or one this replica already started
		}
		n.stats.StealsGranted++
		n.busy++
		n.startRun(g.Task, g.Round)
		n.rd.Run = append(n.rd.Run, Run{Task: g.Task, Round: g.Round, Handler: g.Handler, Trace: g.Trace, Payload: g.Payload, Timeout: g.Timeout, Inputs: g.Inputs, Attempt: g.Attempt,
			Shard: g.Shard, Shards: g.Shards})
	}
	if later = min(later, asked); later > 0 {
		// Grants this replica does not take from the message (it knows no
		// leader of their partition yet: a peer just restarted, catching
		// up) start when their leases apply here (applyLease, stealer.took).
		// Until then they keep their room: a thief that forgot them asked
		// again at once, and the leases it had been granted meanwhile all
		// started as its logs caught up (a restarted peer with 955 runs
		// for 387 places).
		n.steal.grantedLater(from, later, n.now)
	}
}

// grantable reports whether a grant from peer from may start here. Only
// a partition's leader grants its leases, and a replica knows its leader
// and applies the leases from the log anyway: a replica takes a grant
// only from the leader it knows (none while it knows none, or for a
// partition it leads itself: it starts its own leases from its log,
// claimLease). A peer that holds no replica cannot tell and takes any
// member's grant: a joining peer's view of a partition's owner is the
// ring's, which trails leadership moves. Anything else is forged (any
// holder of the swarm key can send a grant, for a real task that is not
// READY yet, with any round) or stale, and its lease still runs here from
// the log.
func (n *Node) grantable(g Grant, from string) bool {
	if leader, ok := n.GrantSource(n.PartitionOf(g.Task.Group())); ok && leader != from {
		n.stats.StaleGrants++
		return false
	}
	return true
}

// GrantSource returns the peer whose grants for partition part this node
// takes when it can tell (ok): its Raft leader where this node holds a
// replica of the current configuration, "" when it knows none or leads
// the partition itself. ok is false where it holds no replica: then any
// member's grant is taken (grantable).
func (n *Node) GrantSource(part int) (leader string, ok bool) {
	if part < 0 || part >= len(n.parts) {
		return "", false
	}
	p := n.parts[part]
	if p == nil || !n.replica(p) {
		return "", false
	}
	if p.serving {
		return "", true
	}
	if id, known := n.mesh.peerOf(p.rn.BasicStatus().Lead); known && id != n.cfg.ID {
		return id, true
	}
	return "", true
}

// claimed is the last round of a task started here, the expiry of the
// lease it started under when a grant told it (two leases of one round
// differ in it; unix nanoseconds, 0 when not told), and the peer whose
// grant started it ("" when a committed lease did). A peer keeps one for
// each of the last maxStarted tasks it ran: 32 bytes, not 48 with a
// time.Time.
type claimed struct {
	round  shard.Round
	expiry int64
	by     string
}

// claimOf is the claim of round r under the lease expiring at expiry (the
// zero time when not known), started by a grant from by.
func claimOf(r shard.Round, expiry time.Time, by string) claimed {
	c := claimed{round: r, by: by}
	if !expiry.IsZero() {
		c.expiry = expiry.UnixNano()
	}
	return c
}

// claimGrant records that this peer starts task t in round r under the
// lease expiring at expiry, granted by peer from, and reports false when
// it already started that lease (or a later round): a lease reaches a
// thief both as a grant message and, when the thief is a replica of the
// partition, as a committed entry; it must run once. A grant of the same
// round with another expiry is another lease of that round: the one this
// peer ran took nothing (its task was canceled before it applied, and the
// round is spent only by a lease that takes), and a retry leased the
// round again. It starts unless the earlier run is under way or its
// outcome waits in the outbox, which then counts for the new lease. A
// thief that holds no replica never sees the log say so (voidClaim), and
// the retried task stayed RUNNING on it until its timeout.
func (n *Node) claimGrant(t shard.TaskID, r shard.Round, expiry time.Time, from string) bool {
	if cur, running := n.running[t]; running && cur == r {
		// A run of this round is under way here, whatever its claim says
		// (voidClaim cleared it: the lease applied without taking): a
		// second would take a second slot for one running entry, and the
		// slot was never freed.
		return false
	}
	if prev, ok := n.started[t]; ok && prev.round >= r {
		if !prev.other(r, expiry) || n.runPending(t, r) {
			return false
		}
	}
	n.setClaim(t, claimOf(r, expiry, from))
	return true
}

// other reports whether claim c is of another lease of round r than the
// one expiring at expiry: the same round, both expiries known, and
// different. A claim whose expiry is not known (a run started from this
// node's own proposal) is taken for any lease of its round.
func (c claimed) other(r shard.Round, expiry time.Time) bool {
	return c.round == r && c.expiry != 0 && !expiry.IsZero() && c.expiry != expiry.UnixNano()
}

// runPending reports whether a run of task t in round r is under way here,
// its outcome waits in the outbox for the owner, or this node, the owner,
// proposed that outcome and it has not applied yet: in the log behind the
// lease, it is the lease's (same task, round and holder), and if it
// applies first it takes nothing and is forgotten (localOut).
func (n *Node) runPending(t shard.TaskID, r shard.Round) bool {
	if cur, running := n.running[t]; running && cur == r {
		return true
	}
	if o, ok := n.localOut[t]; ok && o.Round == r {
		return true
	}
	_, waiting := n.mesh.outbox[outboxKey(t, r)]
	return waiting
}

// claimLease is claimGrant for a committed lease of t in round r to this
// peer, proposed by the holder origin. The log is the authority: a round
// claimed first by a grant starts again here unless that grant came from
// the lease's proposer (the one legitimate grant of it, already running)
// or a run of t in that very round is under way here (its outcome,
// fenced by task, round and holder, is this lease's). A grant from anyone
// else (a forged one: a peer that holds the swarm key can send any grant,
// with any round) must not keep the committed lease from ever running: no
// lease expires while its holder lives, so its task would stay RUNNING
// forever. That holds for a run of a later round under way too: its
// outcome is stale against this lease, so the lease's own run starts and
// supersedes it (startRun), whose outcome is then dropped here.
//
// A grant's claim of round r with another expiry than this lease's was
// another lease of that round, one that took nothing (claimGrant): this
// lease starts unless that run is under way or its outcome waits in the
// outbox.
func (n *Node) claimLease(t shard.TaskID, r shard.Round, expiry time.Time, origin string) bool {
	if cur, running := n.running[t]; running && cur == r {
		return false
	}
	prev, ok := n.started[t]
	if ok && prev.round >= r {
		other := prev.other(r, expiry)
		if other && n.runPending(t, r) {
			return false
		}
		if !other && (prev.by == "" || prev.by == shard.HolderPeer(origin)) {
			return false
		}
		n.stats.StaleGrants++
	}
	n.putClaim(t, claimOf(r, expiry, ""), ok)
	return true
}

// voidClaim forgets the claim of t's round r when a lease of that round to
// this peer applied without taking: its task was canceled (or changed)
// before it, and the run it started here, speculated or granted, counts
// for nothing. The round is not spent (the shard's round moves only with
// a lease that takes), so a retry of the task leases that round again,
// and that lease must run: the claim kept it from starting, and the task
// stayed RUNNING on a live peer until its timeout (needle hostile, seed
// 7: a pipeline canceled and retried while its task's speculative run
// was under way). A run of round r still under way here keeps the new
// lease from starting a second one (claimLease): its outcome counts.
func (n *Node) voidClaim(t shard.TaskID, r shard.Round) {
	if c, ok := n.started[t]; ok && c.round == r {
		n.started[t] = claimed{}
	}
}

func (n *Node) setClaim(t shard.TaskID, c claimed) {
	_, known := n.started[t]
	n.putClaim(t, c, known)
}

// putClaim is setClaim for a caller that looked t up (known: t has a
// claim): under W1 a peer's claims were a tenth of its loop's CPU, most of
// it lookups of a map of up to maxStarted tasks.
func (n *Node) putClaim(t shard.TaskID, c claimed, known bool) {
	if !known {
		if old, full := n.startedQ.push(t, maxStarted); full {
			delete(n.started, old)
		}
	}
	n.started[t] = c
}

// idRing is a queue of task ids that grows by doubling up to a bound,
// then drops its oldest for each one pushed: the order of the started
// claims, to bound them. (A slice cut from the front and appended to at
// the back copied all of its up to maxStarted ids each time it grew.)
type idRing struct {
	buf     []shard.TaskID
	head, n int
}

// push appends t; at the bound it drops the oldest and returns it.
func (q *idRing) push(t shard.TaskID, bound int) (dropped shard.TaskID, full bool) {
	if q.n == len(q.buf) && q.n < bound {
		grown := make([]shard.TaskID, min(bound, max(64, 2*len(q.buf))))
		copy(grown, q.buf[q.head:])
		copy(grown[len(q.buf)-q.head:], q.buf[:q.head])
		q.buf, q.head = grown, 0
	}
	if q.n < len(q.buf) {
		q.buf[(q.head+q.n)%len(q.buf)] = t
		q.n++
		return "", false
	}
	dropped, q.buf[q.head] = q.buf[q.head], t
	q.head = (q.head + 1) % len(q.buf)
	return dropped, true
}

// rawInputs converts a task's inputs as the shard holds them (shared, not
// copied) to the JSON form handlers get; nil stays nil.
func rawInputs(in map[string][]byte) map[string]json.RawMessage {
	if in == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// maxStarted bounds the memory of started leases (claim).
const maxStarted = 1 << 17
