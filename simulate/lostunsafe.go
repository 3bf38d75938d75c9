package simulate

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Lost disks (--unsafe-recover with --kill-count 2, or --kill-select
// voters). A partition whose lost voters were a majority (two of three,
// or every one) recovers from one survivor alone, a voter or a learner,
// and what the lost ones committed without it is gone: docs/decisions.md
// "unsafe recovery" accepts that cost. The checker tells such a loss from
// any other by what the surviving replicas held. From the kill until the
// operator's declaration (when such a partition can commit nothing) it
// reads, every second, each running survivor's replica of such a
// partition (a copy restored from its state): the groups, terminal
// outcomes and schedules there, and what the replica is by its own
// configuration (roleOf). At the declaration it keeps what the survivors
// that may recover the partition held (recoverers: its last voter; else a
// learner that knows of no other surviving one; else all of them, the
// most up to date recovering with a log that holds the others'):
//
//   - an acknowledged group none held, found gone (or created again by a
//     retry of its submit), is counted apart (Report.LostUnsafe) and no
//     longer waited for;
//   - a terminal outcome (or committed retry) none held is forgotten: the
//     task may run again and end otherwise (counted apart when it does),
//     or the survivor's log, committed by the recovery, may bring the
//     same one back (read again every second: recheckRewound);
//   - a schedule none held, found gone, is counted apart and no longer
//     checked;
//   - a broadcast firing none held, fired again by its schedule with other
//     copies (the peers its new owner matched then, without the lost
//     ones), starts afresh with those copies; the old ones count apart
//     (refired).
//
// A partition of which no survivor held a replica naming itself (every
// voter and learner lost, or a learner whose snapshot never came) is a
// total loss, when every survivor ran at the kill: its acknowledged
// groups count in Report.LostTotal, nothing of it is waited for, and the
// client abandons its requests (nobody serves it again).
//
// Anything else acknowledged found gone still breaks invariant 1, and an
// outcome a survivor held that changes still breaks invariant 2.

// unsafeLoss is what the checker keeps for that (nil: no declaration,
// or one lost peer or none with --kill-select last, and nothing here
// runs).
type unsafeLoss struct {
	lost        map[int]bool // node indexes whose disks are lost
	lostIDs     []string
	lostTwo     map[int]bool           // partitions whose lost voters were a majority (lossyOf)
	held        map[int]bool           // partitions a survivor holds a replica of, named in its configuration
	allUp       bool                   // every survivor ran at the kill (held is then complete)
	total       map[int]bool           // partitions no replica survived (at the declaration)
	totalGone   []*groupRec            // groups of those partitions, in order
	totalAck    int                    // tasks of the acknowledged ones
	views       map[int]*survivorView  // by node index: what each survivor held
	roles       map[int]map[int]roleOf // by partition, then node index: what each survivor's replica is
	named       map[int]map[int]bool   // by partition: the survivors another survivor's replica names
	seenGroup   map[shard.GroupID]bool
	seenTask    map[shard.TaskID]int                // retries + 1 of the terminal outcome a survivor held
	seenRetry   map[shard.TaskID]int                // the most retries a survivor held
	seenSched   map[shard.ScheduleID]map[int64]bool // the ticks whose firing a survivor held
	recovered   bool                                // the declaration ran: what was seen is final
	rewound     map[*taskRec]outcomeRec
	rewoundAt   []*taskRec             // rewound, in order (recheckRewound)
	gone        map[shard.GroupID]bool // groups counted gone (or created again)
	tasks       int                    // tasks of gone groups, and outcomes lost
	scheds      int                    // schedules gone
	totalScheds int                    // acknowledged schedules of total losses
}

// survivorView is what one survivor's replicas of the lossy partitions
// held (seeReplica); the seen* maps of unsafeLoss merge those of the
// survivors that may recover each partition (recoverers).
type survivorView struct {
	group map[shard.GroupID]bool
	task  map[shard.TaskID]int
	retry map[shard.TaskID]int
	sched map[shard.ScheduleID]map[int64]bool
}

// roleOf is what a survivor's replica of a partition is, as its own
// configuration says: which of them may recover it (node/recover.go).
type roleOf uint8

const (
	roleVoter       roleOf = iota + 1 // a voter naming no other survivor: it recovers
	roleLearnerLone                   // a learner naming no other survivor: it recovers
	roleLearner                       // a member naming others: the most up to date of them recovers
)

func newUnsafeLoss(cfg Config) *unsafeLoss {
	if cfg.UnsafeRecover == 0 || cfg.KillSelect == KillLast && cfg.KillCount < 2 {
		return nil
	}
	u := &unsafeLoss{lost: map[int]bool{}, lostTwo: map[int]bool{}, held: map[int]bool{}, total: map[int]bool{},
		views: map[int]*survivorView{}, roles: map[int]map[int]roleOf{}, named: map[int]map[int]bool{}, seenGroup: map[shard.GroupID]bool{}, seenTask: map[shard.TaskID]int{}, seenRetry: map[shard.TaskID]int{},
		seenSched: map[shard.ScheduleID]map[int64]bool{}, rewound: map[*taskRec]outcomeRec{}, gone: map[shard.GroupID]bool{}}
	if cfg.KillSelect == KillLast {
		for i := cfg.Peers - cfg.KillCount; i < cfg.Peers; i++ {
			u.lost[i] = true
			u.lostIDs = append(u.lostIDs, fmt.Sprintf("n%d", i))
		}
	}
	return u
}

// observeSurvivors reads what the running survivors' replicas of the
// partitions that lost two voters hold; from the kill until the
// declaration only.
func (c *checker) observeSurvivors() {
	u := c.unsafe
	if u == nil || u.recovered || c.s.now < c.s.cfg.Kill || c.s.cfg.KillSelect == KillVoters && c.s.killAt == 0 {
		return
	}
	var buf []byte
	for _, nd := range c.s.nodes {
		if u.lost[nd.idx] || !nd.up {
			continue
		}
		for _, p := range nd.n.Held() {
			if r, ok := nd.n.Replica(p); ok {
				if u.lostTwoOf(r.Voters) {
					u.lostTwo[p] = true
				}
				if role := u.roleOf(c.s, nd, r); c.s.killAt > 0 && role != 0 {
					u.held[p] = true
					if u.roles[p] == nil {
						u.roles[p] = map[int]roleOf{}
					}
					u.roles[p][nd.idx] = role
					for _, id := range slices.Concat(r.Voters, r.Learners) {
						if i := c.s.peerIndex(id); i >= 0 && id != nd.id && !u.lost[i] {
							if u.named[p] == nil {
								u.named[p] = map[int]bool{}
							}
							u.named[p][i] = true
						}
					}
				}
			}
			if !u.lostTwo[p] {
				continue
			}
			_, _, b, ok := nd.n.DigestBuf(p, buf)
			if !ok {
				continue
			}
			buf = b
			sh, err := shard.New(shard.DefaultConfig())
			if err != nil {
				panic(err)
			}
			if err := sh.Restore(b); err != nil {
				c.s.fail(invWAL, fmt.Sprintf("n%d: a copy of partition %d does not restore: %v", nd.idx, p, err))
				return
			}
			c.seeReplica(u.view(nd.idx), p, sh)
		}
	}
}

// roleOf returns what nd's replica r is (0: not a member by its own
// configuration, as a learner whose snapshot never came): a member that
// names no other survivor recovers alone (roleVoter, roleLearnerLone),
// one that names others claims the partition with them (roleLearner).
func (u *unsafeLoss) roleOf(s *sim, nd *simNode, r node.ReplicaInfo) roleOf {
	voter := slices.Contains(r.Voters, nd.id)
	if !voter && !slices.Contains(r.Learners, nd.id) {
		return 0
	}
	survivor := func(id string) bool { i := s.peerIndex(id); return id != nd.id && i >= 0 && !u.lost[i] }
	switch {
	case slices.ContainsFunc(r.Voters, survivor) || slices.ContainsFunc(r.Learners, survivor):
		return roleLearner
	case voter:
		return roleVoter
	}
	return roleLearnerLone
}

func (u *unsafeLoss) view(idx int) *survivorView {
	v := u.views[idx]
	if v == nil {
		v = &survivorView{group: map[shard.GroupID]bool{}, task: map[shard.TaskID]int{}, retry: map[shard.TaskID]int{},
			sched: map[shard.ScheduleID]map[int64]bool{}}
		u.views[idx] = v
	}
	return v
}

// recoverers returns the survivors whose copy of lossy partition p may
// become the recovered one, as node/recover.go picks it: a member that
// names no other survivor (a voter, or a learner that lagged behind the
// change adding the others) and that no other names recovers alone, the
// others wait, and what they held is lost; else every member (the one
// whose log is the most up to date recovers, and its log holds what the
// others applied): a member named by another's claim claims with it.
func (u *unsafeLoss) recoverers(p int) map[int]bool {
	for _, want := range []roleOf{roleVoter, roleLearnerLone} {
		out := map[int]bool{}
		for idx, role := range u.roles[p] {
			if role == want && !u.named[p][idx] {
				out[idx] = true
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	out := map[int]bool{}
	for idx := range u.roles[p] {
		out[idx] = true
	}
	return out
}

// mergeViews makes the seen* maps what the recoverers of each lossy
// partition held.
func (c *checker) mergeViews() {
	u := c.unsafe
	rec := map[int]map[int]bool{}
	for p := range u.lostTwo {
		rec[p] = u.recoverers(p)
	}
	for _, idx := range slices.Sorted(maps.Keys(u.views)) {
		v := u.views[idx]
		for g := range v.group {
			if rec[c.s.partitionOf(g)][idx] {
				u.seenGroup[g] = true
			}
		}
		for t, n := range v.retry {
			if g, _, _ := t.Split(); rec[c.s.partitionOf(g)][idx] {
				u.seenRetry[t] = max(u.seenRetry[t], n)
			}
		}
		for t, n := range v.task {
			if g, _, _ := t.Split(); rec[c.s.partitionOf(g)][idx] {
				u.seenTask[t] = max(u.seenTask[t], n)
			}
		}
		for id, ticks := range v.sched {
			if !rec[c.s.partitionOf(shard.GroupID(id))][idx] {
				continue
			}
			if u.seenSched[id] == nil {
				u.seenSched[id] = map[int64]bool{}
			}
			for tick := range ticks {
				u.seenSched[id][tick] = true
			}
		}
	}
}

// lostTwoOf reports whether voters, as a replica names them, count a
// majority of lost ones (two of three, or every one): an entry they
// committed may be on lost peers only. A replica that cannot name a
// voter ("?": it no longer holds it a member, as after its death) tells
// nothing.
func (u *unsafeLoss) lostTwoOf(voters []string) bool {
	if len(voters) == 0 || slices.Contains(voters, "?") {
		return false
	}
	lost := 0
	for _, id := range u.lostIDs {
		if slices.Contains(voters, id) {
			lost++
		}
	}
	return lost >= len(voters)/2+1
}

// killing runs just before the kill: every running replica names the
// voters of its partitions (the killed ones' too, still members of all).
// A partition whose lost voters are a majority keeps them: it can commit
// nothing more, a reconfiguration included.
func (c *checker) killing() {
	u := c.unsafe
	if u == nil {
		return
	}
	if len(u.lostIDs) == 0 { // KillVoters: the voters the kill chose
		for _, nd := range c.s.killed() {
			u.lost[nd.idx] = true
			u.lostIDs = append(u.lostIDs, nd.id)
		}
	}
	u.allUp = !slices.ContainsFunc(c.s.nodes, func(nd *simNode) bool { return !u.lost[nd.idx] && !nd.up })
	for _, nd := range c.s.nodes {
		if !nd.up {
			continue
		}
		for _, p := range nd.n.Held() {
			if r, ok := nd.n.Replica(p); ok && u.lostTwoOf(r.Voters) {
				u.lostTwo[p] = true
			}
		}
	}
}

// seeReplica records in u what sh, a survivor's copy of partition p,
// holds.
func (c *checker) seeReplica(u *survivorView, p int, sh *shard.Shard) {
	for _, g := range c.order {
		if c.s.partitionOf(g.id) != p || !sh.HasGroup(g.id) {
			continue
		}
		u.group[g.id] = true
		for _, t := range g.tasks {
			v, err := sh.Task(t.id)
			if err != nil {
				continue
			}
			u.retry[t.id] = max(u.retry[t.id], v.Retries)
			if v.State.Terminal() {
				u.task[t.id] = max(u.task[t.id], v.Retries+1)
			}
		}
	}
	for _, r := range c.schedOrder {
		if c.s.partitionOf(shard.GroupID(r.id)) != p {
			continue
		}
		v, err := sh.Schedule(r.id)
		if err != nil {
			continue
		}
		if u.sched[r.id] == nil {
			u.sched[r.id] = map[int64]bool{}
		}
		for _, f := range v.Firings {
			u.sched[r.id][f.At.Unix()] = true
		}
	}
}

// recovering runs just before the operator declares the disks lost: what
// the survivors held is final, and the outcomes they did not hold are
// forgotten (rewound).
func (c *checker) recovering() {
	u := c.unsafe
	if u == nil || u.recovered {
		return
	}
	c.observeSurvivors()
	u.recovered = true
	c.mergeViews()
	if u.allUp {
		for p := range u.lostTwo {
			if !u.held[p] {
				u.total[p] = true
			}
		}
	}
	for _, g := range c.order {
		if p := c.s.partitionOf(g.id); !u.lostTwo[p] || u.total[p] {
			c.dropTotal(g)
			continue
		}
		for _, t := range g.tasks {
			if sr := u.seenRetry[t.id]; t.retries > sr { // (0 when no survivor held the group)
				c.unretry(t, sr)
			}
			if t.state == 0 || u.seenTask[t.id] == t.retries+1 {
				continue
			}
			u.rewound[t] = outcomeRec{state: t.state, result: t.result, hasResult: t.hasResult}
			u.rewoundAt = append(u.rewoundAt, t)
			t.state, t.result, t.hasResult, t.at = 0, nil, false, 0
			c.outstanding++
			if g.left++; g.left == 1 {
				c.head = 0
			}
		}
	}
	for _, r := range c.schedOrder {
		ticks := u.seenSched[r.id] // nil: no survivor held it (its log may, but for a total loss)
		if !u.lostTwo[c.s.partitionOf(shard.GroupID(r.id))] {
			continue
		}
		for tick := range r.fired {
			if !ticks[tick] {
				delete(r.fired, tick) // a firing only the lost peers held: it may fire again
			}
		}
		for tick := range r.seen {
			if !ticks[tick] {
				delete(r.seen, tick)
			}
		}
	}
	c.s.durCheck = true // invariant 1 once the partitions serve again
}

// totalLost reports whether g's partition is a total loss: the recovery
// ran and no replica of it survived (nobody serves it again).
func (c *checker) totalLost(g shard.GroupID) bool {
	u := c.unsafe
	return u != nil && u.recovered && u.total[c.s.partitionOf(g)]
}

// dropTotal stops waiting for group g if its partition is a total loss,
// counting its tasks (Report.LostTotal) when it was acknowledged; once.
func (c *checker) dropTotal(g *groupRec) {
	u := c.unsafe
	if g == nil || !c.totalLost(g.id) || u.gone[g.id] {
		return
	}
	u.totalGone = append(u.totalGone, g)
	if g.acked {
		u.totalAck += len(g.tasks)
	}
	c.abandon(g)
}

// abandon stops waiting for group g, gone with its partition's lost
// replicas: its tasks leave the outstanding count and the client's wait
// for it ends; once (unsafeLoss.gone).
func (c *checker) abandon(g *groupRec) {
	u := c.unsafe
	u.gone[g.id] = true
	for _, t := range g.tasks {
		delete(u.rewound, t)
		if t.state == 0 {
			c.outstanding--
		}
	}
	if g.left > 0 {
		g.left = 0
		c.s.cl.groupDone(g)
	}
}

// unretry takes t back to the survivors' retries sr: the retries after
// them were committed by the lost peers alone (each counted lost), and
// its state is what was observed of the runs before retry sr+1.
func (c *checker) unretry(t *taskRec, sr int) {
	u := c.unsafe
	wasOpen := t.state == 0
	prev := t.more.past[sr]
	u.tasks += t.retries - sr
	t.more.past = t.more.past[:sr]
	t.retries = sr
	t.state, t.result, t.hasResult = prev.state, prev.result, prev.hasResult
	switch open := t.state == 0; {
	case wasOpen && !open:
		c.outstanding--
		t.g.left--
	case !wasOpen && open:
		c.outstanding++
		if t.g.left++; t.g.left == 1 {
			c.head = 0
		}
	}
}

// mayLose reports whether acknowledged group g may be gone: its partition
// lost two of three voters and no survivor held it.
func (u *unsafeLoss) mayLose(c *checker, g *groupRec) bool {
	return u != nil && u.recovered && !u.seenGroup[g.id] && u.lostTwo[c.s.partitionOf(g.id)]
}

// lostUnsafe reports whether acknowledged group g, found gone, is a loss
// the recovery allows; if so it counts it (once) and stops waiting for
// its tasks.
func (c *checker) lostUnsafe(g *groupRec) bool {
	u := c.unsafe
	if !u.mayLose(c, g) {
		return false
	}
	if u.gone[g.id] {
		return true
	}
	u.tasks += len(g.tasks)
	c.abandon(g)
	return true
}

// createdAgain reports whether group g, created again by a reply sent at
// sent, was created again after the recovery lost it; if so g starts
// afresh: its tasks run again, but for the outcomes observed since sent
// (the new group's, when the reply arrived after its tasks ended).
func (c *checker) createdAgain(g *groupRec, sent time.Duration) bool {
	u := c.unsafe
	if !u.mayLose(c, g) {
		return false
	}
	before, after := 0, 0
	if !u.gone[g.id] {
		u.gone[g.id] = true
		u.tasks += len(g.tasks)
		for _, t := range g.tasks {
			if t.state == 0 {
				before++
			}
		}
	}
	for _, t := range g.tasks {
		delete(u.rewound, t)
		if t.state != 0 && t.at >= sent {
			continue
		}
		t.state, t.result, t.hasResult, t.at, t.retries = 0, nil, false, 0, 0
		if t.more != nil {
			t.more.past = nil
		}
		after++
	}
	c.outstanding += after - before
	g.left = after
	c.head = 0
	u.seenGroup[g.id] = true // from now on it must stay
	return true
}

// refired reports whether g, a broadcast firing the recovery may have lost
// (no survivor held it), was fired again by its schedule on the recovered
// partition with other copies: the copies are the peers the new owner
// matched then (the lost ones are gone), so the tasks under g's ids are
// new ones. If so the old copies count as lost (once) and g starts afresh
// with the copies read from nd's replica (or another running one).
func (c *checker) refired(nd *simNode, g *groupRec) bool {
	u := c.unsafe
	if u == nil || g.spec.Mode != shard.ModeBroadcast || !u.mayLose(c, g) {
		return false
	}
	if _, _, ok := shard.ParseFiringGroupID(g.id); !ok {
		return false
	}
	v, ok := c.s.replicaGroup(nd, g.id)
	if !ok || sameCopies(v, g.spec) {
		return false
	}
	if !u.gone[g.id] {
		u.gone[g.id] = true
		u.tasks += len(g.tasks)
	}
	for _, t := range g.tasks {
		delete(u.rewound, t)
		if t.state == 0 {
			c.outstanding--
		}
	}
	stale := func(t *taskRec) bool { return t.g == g }
	c.terminal = slices.DeleteFunc(c.terminal, stale)
	u.rewoundAt = slices.DeleteFunc(u.rewoundAt, stale)
	spec := cloneSpec(g.spec)
	tmpl := spec.Tasks[0]
	spec.Tasks = make([]shard.TaskSpec, len(v.Tasks))
	for i, tv := range v.Tasks {
		spec.Tasks[i] = tmpl
		spec.Tasks[i].Name, spec.Tasks[i].Pin = tv.Name, tv.Pin
	}
	fresh := c.newGroupRec(spec)
	c.ntasks -= len(g.tasks)
	g.spec, g.tasks, g.left = fresh.spec, fresh.tasks, fresh.left
	for _, t := range g.tasks {
		t.g = g
	}
	c.outstanding += len(g.tasks)
	c.head = 0
	u.seenGroup[g.id] = true // from now on it must stay
	return true
}

// sameCopies reports whether a broadcast group's copies in v are those
// of spec: the same peers, in order.
func sameCopies(v shard.GroupView, spec *shard.GroupSpec) bool {
	return slices.EqualFunc(v.Tasks, spec.Tasks, func(tv shard.TaskView, ts shard.TaskSpec) bool {
		return tv.Name == ts.Name && tv.Pin == ts.Pin
	})
}

// recheckRewound reads, every second after the declaration, the tasks
// whose outcome was forgotten on a node serving them: one it holds
// terminal (a survivor down from the kill to the declaration held it, or
// its log brought it back) is observed again, as the Change that told it
// came before the declaration.
func (c *checker) recheckRewound() {
	u := c.unsafe
	if u == nil || !u.recovered {
		return
	}
	keep := u.rewoundAt[:0]
	for _, t := range u.rewoundAt {
		if _, ok := u.rewound[t]; !ok || t.state != 0 {
			continue
		}
		keep = append(keep, t)
		nd := c.s.serving(t.g.id)
		if nd == nil {
			continue
		}
		v, err := nd.n.Task(t.id)
		if err != nil || v.Retries < t.retries || !v.State.Terminal() {
			continue
		}
		if v.Retries > t.retries {
			if c.retried(nd, t, v.Retries); c.s.viol != nil {
				return
			}
		}
		c.observe(nd, t, v.State)
		if c.s.viol != nil {
			return
		}
		keep = keep[:len(keep)-1]
	}
	clear(u.rewoundAt[len(keep):])
	u.rewoundAt = keep
}

// reobserved counts a forgotten outcome of t lost when t, observed
// terminal again, ended otherwise (st): a run the survivor started again.
// Runs alone tell nothing (a stale replica or a thief may start one while
// the survivor holds the outcome). It reports whether t's group is counted
// gone (and not created again): its tasks are no longer waited for.
func (c *checker) reobserved(t *taskRec, st shard.State) bool {
	u := c.unsafe
	if u == nil {
		return false
	}
	if o, ok := u.rewound[t]; ok {
		delete(u.rewound, t)
		if st != o.state {
			u.tasks++
		}
	}
	return u.gone[t.g.id] && !u.seenGroup[t.g.id]
}

// schedLost reports whether created schedule r, found gone, is a loss the
// recovery allows; if so it counts it.
func (c *checker) schedLost(r *schedRec) bool {
	u := c.unsafe
	if u == nil || !u.recovered || u.seenSched[r.id] != nil || !u.lostTwo[c.s.partitionOf(shard.GroupID(r.id))] {
		return false
	}
	u.scheds++
	return true
}

// schedTotalLost reports whether schedule r's partition is a total loss
// (no replica survived the kill): nobody fires it or serves it again, so
// it is checked no more; counted once (Report.LostTotalSchedules) when it
// was acknowledged and not being deleted.
func (c *checker) schedTotalLost(r *schedRec) bool {
	if !c.totalLost(shard.GroupID(r.id)) {
		return false
	}
	if !r.lostTotal {
		r.lostTotal = true
		if r.created && r.deleteSent < 0 {
			c.unsafe.totalScheds++
		}
	}
	return true
}

// unsafeTasks returns the tasks counted lost by the recovery (0 without it).
func (c *checker) unsafeTasks() int {
	if c.unsafe == nil {
		return 0
	}
	return c.unsafe.tasks
}

// totalTasks returns the tasks of acknowledged groups whose partition no
// replica survived, those partitions, and the schedules they held.
func (c *checker) totalTasks() (tasks, parts, scheds int) {
	if c.unsafe == nil {
		return 0, 0, 0
	}
	return c.unsafe.totalAck, len(c.unsafe.total), c.unsafe.totalScheds
}

// unsafeScheds returns the schedules counted lost by the recovery.
func (c *checker) unsafeScheds() int {
	if c.unsafe == nil {
		return 0
	}
	return c.unsafe.scheds
}
