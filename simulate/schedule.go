package simulate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
)

// Schedules (docs/decisions.md "Schedules"): the client creates schedules
// on the node serving each one's partition (shard.RouteKey of the id, as
// for groups), pauses, resumes and deletes some, and the checker holds the
// owners to invariant 6: each tick fires at most once, and at least once
// unless the misfire or overlap policy skips it.
//
//   - At most once: the checker reads every live schedule from the node
//     serving it each virtual second (the last 20 firings are kept; no
//     schedule fires faster than once a second) and merges the firings
//     into its own history: ticks strictly increase within a view, a tick
//     once seen never changes (group or overlap skip), and a tick seen
//     between two ticks of a later view must be in that view (no accepted
//     EvScheduleFired is forgotten, none is accepted twice). A firing
//     group (its "<sid>~<unix>" id) that the Changes or Runs show must be
//     the group of its tick's accepted firing.
//   - At least once: once the faults healed (plus settle), every tick of a
//     schedule that is live and not paused (with a margin for the nodes'
//     clock offsets and for commands in flight) must be in the history,
//     as a group or an overlap skip. Misfire applies only to downtime,
//     which a healthy window has none of.
//
// Firing groups join the checker's groups when first seen, so invariants
// 1-3 and liveness cover them like any acknowledged group.

const invSched = "6-schedule" // each tick at most once, and at least once in a healthy window

// schedSettle is how long after the faults heal ticks must all fire.
const schedSettle = 10 * time.Second

// schedPlan is one schedule the client creates, and what it does to it.
type schedPlan struct {
	spec        *shard.ScheduleSpec
	at          time.Duration // creation
	pauseAfter  time.Duration // > 0: pause this long after the creation's ack
	resumeAfter time.Duration // > 0: resume this long after the pause's ack
	deleteAt    time.Duration // delete at (or after the previous step)
	// update, when set, is spec with other timing (every, cron, overlap,
	// misfire), the same group: sent updateAfter after the creation's
	// ack (before the pause, if any).
	update      *shard.ScheduleSpec
	updateAfter time.Duration
}

// schedule draws schedule i: an every of 1-10 s or a cron with seconds,
// overlap skip or allow, misfire once or skip, and a firing group of 1-3
// short sleeps (sometimes one longer than the interval, so that overlap
// skip has something to skip), or a broadcast of one.
func (g *gen) schedule(i int) *shard.ScheduleSpec {
	sp := &shard.ScheduleSpec{ID: shard.KeyedScheduleID(fmt.Sprintf("sched-%d-%d", g.cfg.Seed, i)), Name: "s" + strconv.Itoa(i),
		Overlap: shard.OverlapSkip, Misfire: shard.MisfireOnce}
	if g.rng.IntN(5) == 0 {
		sp.Cron = []string{"*/2 * * * * *", "*/5 * * * * *", "0,7,30,31 * * * * *"}[g.rng.IntN(3)]
	} else {
		sp.Every = []time.Duration{1, 1, 2, 3, 5, 10}[g.rng.IntN(6)] * time.Second
	}
	if g.rng.IntN(2) == 0 {
		sp.Overlap = shard.OverlapAllow
	}
	if g.rng.IntN(2) == 0 {
		sp.Misfire = shard.MisfireSkip
	}
	n := 1 + g.rng.IntN(3)
	tasks := make([]shard.TaskSpec, n)
	for j := range tasks {
		b := behaviour{dur: time.Duration(5+g.rng.IntN(200)) * time.Millisecond, failPM: []uint16{0, 100}[g.rng.IntN(2)], permPM: 300}
		if sp.Overlap == shard.OverlapSkip && g.rng.IntN(4) == 0 {
			b.dur = time.Duration(1000+g.rng.IntN(3000)) * time.Millisecond
		}
		tasks[j] = g.task(b, j)
	}
	mode := shard.ModeParallel
	if n == 1 {
		mode, tasks[0].Name = shard.ModeSingle, ""
	}
	if g.rng.IntN(5) == 0 {
		// A broadcast: one copy per live peer at each firing, short and
		// never failing, so that without faults each copy runs once
		// (checker.broadcastRuns).
		mode, tasks = shard.ModeBroadcast, tasks[:1]
		tasks[0] = g.task(behaviour{dur: time.Duration(5+g.rng.IntN(200)) * time.Millisecond}, 0)
		tasks[0].Name = ""
	}
	sp.Group = shard.GroupSpec{Mode: mode, Tasks: tasks}
	return sp
}

// schedPlans draws n schedules created over [0, createBy), deleted at
// deleteAt (the earliest), a third of them paused for 1-6 s (some never
// resumed).
func (g *gen) schedPlans(n int, createBy, deleteAt time.Duration) []*schedPlan {
	var out []*schedPlan
	for i := range n {
		p := &schedPlan{spec: g.schedule(i), at: time.Duration(g.rng.Int64N(int64(max(createBy, time.Millisecond)))), deleteAt: deleteAt}
		if g.rng.IntN(3) == 0 {
			p.pauseAfter = time.Duration(1+g.rng.IntN(max(1, int(deleteAt/time.Second)/2))) * time.Second
			if g.rng.IntN(4) != 0 {
				p.resumeAfter = time.Duration(1000+g.rng.IntN(5000)) * time.Millisecond
			}
		}
		out = append(out, p)
	}
	return out
}

// sched is the schedule-only workload: ten schedules live for the run's
// MaxSimTime less two minutes (so --max-sim-time sets the schedule-hours);
// faults happen over the first half of that, the second half is healthy.
func (g *gen) sched() *workload {
	life := max(g.cfg.MaxSimTime-2*time.Minute, 30*time.Second)
	w := &workload{span: life / 2}
	w.scheds = g.schedPlans(10, 5*time.Second, life)
	g.schedUpdates(w.scheds, life)
	return w
}

// schedUpdates gives about half of the plans an update of their timing,
// drawn from a generator of their own (the main stream, and so every other
// draw of a seed, stays as it was). An update that would allow overlap
// keeps overlap skip when the schedules' open load would then pass
// openBudget (see there).
func (g *gen) schedUpdates(plans []*schedPlan, life time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0x5eedc4a9e))
	open := 0.0
	for _, p := range plans {
		open += g.openLoad(p.spec)
	}
	for _, p := range plans {
		if rng.IntN(2) == 0 {
			continue
		}
		up := *p.spec
		up.Group.Tasks = slices.Clone(p.spec.Group.Tasks)
		up.Cron, up.Every = "", 0
		if rng.IntN(4) == 0 {
			up.Cron = []string{"*/3 * * * * *", "*/4 * * * * *", "0,10,20,21 * * * * *"}[rng.IntN(3)]
		} else {
			up.Every = []time.Duration{1, 2, 4, 7}[rng.IntN(4)] * time.Second
		}
		if rng.IntN(3) == 0 {
			up.Misfire = 3 - up.Misfire // once <-> skip
		}
		if up.Overlap == shard.OverlapSkip && rng.IntN(3) == 0 {
			up.Overlap = shard.OverlapAllow
		}
		if d := g.openLoad(&up) - g.openLoad(p.spec); d > 0 && up.Overlap == shard.OverlapAllow && p.spec.Overlap == shard.OverlapSkip {
			if open+d > g.openBudget() {
				up.Overlap = shard.OverlapSkip
			}
		}
		open += max(g.openLoad(&up)-g.openLoad(p.spec), 0)
		up.Name += "-updated"
		p.update = &up
		p.updateAfter = time.Duration(1+rng.IntN(max(1, int(life/time.Second)/3))) * time.Second
	}
}

// openLoad is the work a second that a schedule with timing sp offers
// whatever is running, in slot-seconds: with overlap allowed, a firing's
// work (each copy of a broadcast's) over the shortest gap between its
// ticks; with overlap skip none, as at most one firing is in flight and
// a backlog holds up its next tick rather than growing.
func (g *gen) openLoad(sp *shard.ScheduleSpec) float64 {
	if sp.Overlap != shard.OverlapAllow {
		return 0
	}
	var work time.Duration
	for _, ts := range sp.Group.Tasks {
		work += decodeBehaviour(ts.Payload).dur
	}
	if sp.Group.Mode == shard.ModeBroadcast {
		work *= time.Duration(g.cfg.Peers)
	}
	return work.Seconds() / minGap(sp).Seconds()
}

// openBudget is the most open load (openLoad) the schedule workload's
// updates may bring its schedules to: half the slots of the mesh with one
// peer fewer (the churn fault's leave). The long tasks (1-4 s) are drawn
// for overlap skip to skip, and an update that allowed overlap on such a
// firing every second offered 5.6 slot-seconds a second alone: seed
// 890008 of --peers 5 --workload sched offered 8.1-8.3 after the update,
// on the 8 slots left after n0 left, and its backlog grew at every owner
// until a firing waited more than the liveness bound. No scheduler meets
// a bound past saturation; the workload is there for the schedules'
// ticks, not to overload the mesh.
func (g *gen) openBudget() float64 {
	return float64(g.cfg.Slots*max(g.cfg.Peers-1, 1)) / 2
}

// minGap is the shortest gap between two ticks of timing sp (a cron's,
// over two minutes).
func minGap(sp *shard.ScheduleSpec) time.Duration {
	if sp.Every > 0 {
		return sp.Every
	}
	gap := time.Minute
	t, _ := cron.Next(sp, epoch)
	for range 120 {
		n, err := cron.Next(sp, t)
		if err != nil || n.IsZero() {
			break
		}
		gap, t = min(gap, n.Sub(t)), n
	}
	return max(gap, time.Second)
}

// schedRec is what the checker knows of one schedule.
type schedRec struct {
	plan       *schedPlan
	id         shard.ScheduleID
	created    bool          // the creation was acknowledged
	createAck  time.Duration //
	quiet      [][2]time.Duration
	pauseSent  time.Duration // -1: not paused (or resumed)
	deleteSent time.Duration // -1: not being deleted
	deleted    bool
	lostTotal  bool          // its partition is a total loss (schedTotalLost)
	activeFrom time.Duration // -1 while paused, deleted or not created
	active     time.Duration // live and unpaused, summed
	fired      map[int64]firingObs
	seen       map[int64]shard.GroupID // firing groups seen in Changes and Runs
	verified   time.Time               // ticks up to here checked (at least once)
	pausedOnce bool
	updated    bool          // the update was acknowledged
	updateSent time.Duration // -1: no update sent
}

// specAt is the timing in force at virtual time vt: the update's from its
// send on, once it is acknowledged (the quiet window covers the rest).
func (r *schedRec) specAt(vt time.Duration) *shard.ScheduleSpec {
	if r.updated && vt >= r.updateSent {
		return r.plan.update
	}
	return r.plan.spec
}

type firingObs struct {
	group   shard.GroupID
	skipped bool
}

func (c *checker) schedule(p *schedPlan) *schedRec {
	if c.scheds == nil {
		c.scheds = map[shard.ScheduleID]*schedRec{}
	}
	r := c.scheds[p.spec.ID]
	if r == nil {
		r = &schedRec{plan: p, id: p.spec.ID, pauseSent: -1, deleteSent: -1, activeFrom: -1, updateSent: -1,
			fired: map[int64]firingObs{}, seen: map[int64]shard.GroupID{}}
		r.quiet = append(r.quiet, [2]time.Duration{0, -1}) // until the creation's ack
		c.scheds[r.id] = r
		c.schedOrder = append(c.schedOrder, r)
	}
	return r
}

// schedSent records a schedule command's first send.
func (c *checker) schedSent(r *schedRec, k opKind) {
	switch k {
	case opSchedPause:
		r.pauseSent = c.s.now
		r.quiet = append(r.quiet, [2]time.Duration{c.s.now, -1})
	case opSchedDelete:
		r.deleteSent = c.s.now
	case opSchedUpdate:
		// Ticks of either timing may fire until the update is
		// acknowledged: none is required meanwhile.
		r.quiet = append(r.quiet, [2]time.Duration{c.s.now, -1})
		if r.updateSent < 0 {
			r.updateSent = c.s.now
		}
	}
}

// schedAcked records a schedule command's acknowledgement.
func (c *checker) schedAcked(r *schedRec, k opKind, err error) {
	now := c.s.now
	switch k {
	case opSchedSet:
		if err != nil {
			c.s.fail(invSched, fmt.Sprintf("create of schedule %s refused: %v", r.id, err))
			return
		}
		r.created, r.createAck, r.activeFrom = true, now, now
		r.quiet[0][1] = now
	case opSchedPause:
		if r.activeFrom >= 0 {
			r.active += now - r.activeFrom
			r.activeFrom = -1
		}
		r.pausedOnce = true
	case opSchedResume:
		r.quiet[len(r.quiet)-1][1] = now
		r.pauseSent, r.activeFrom = -1, now
	case opSchedUpdate:
		r.quiet[len(r.quiet)-1][1] = now
		r.updated = true // ticks from updateSent on are the update's
	case opSchedDelete:
		if r.activeFrom >= 0 {
			r.active += now - r.activeFrom
			r.activeFrom = -1
		}
		r.deleted = true
	}
}

// schedUpdates counts the schedules whose update was acknowledged.
func (c *checker) schedUpdates() int {
	n := 0
	for _, r := range c.schedOrder {
		if r.updated {
			n++
		}
	}
	return n
}

// scheduleHours sums the time schedules were live and not paused.
func (c *checker) scheduleHours() float64 {
	var d time.Duration
	for _, r := range c.schedOrder {
		d += r.active
		if r.activeFrom >= 0 {
			d += c.s.now - r.activeFrom
		}
	}
	return d.Hours()
}

// firingGroup registers the group of a firing the first time the checker
// sees it (Changes, Runs, or the schedule's firings). It returns false
// when g is not a firing group of a schedule the client created.
func (c *checker) firingGroup(nd *simNode, g shard.GroupID) bool {
	sid, at, ok := shard.ParseFiringGroupID(g)
	r := c.scheds[sid]
	if !ok || r == nil {
		return false
	}
	if prev, ok := r.seen[at.Unix()]; ok && prev != g {
		c.s.fail(invSched, fmt.Sprintf("schedule %s: tick %d has groups %s and %s", sid, at.Unix(), prev, g))
	}
	r.seen[at.Unix()] = g
	if c.groups[g] == nil {
		spec := r.plan.spec.Group
		spec.ID = g
		if spec.Mode == shard.ModeBroadcast {
			// The copies are the peers the owner matched at the firing:
			// read them from a replica that applied it (the reporting
			// node may be a peer running its copy, with no replica).
			v, ok := c.s.replicaGroup(nd, g)
			if !ok {
				c.s.fail(invSched, fmt.Sprintf("n%d reports broadcast firing %s, which no running replica holds", nd.idx, g))
				return true
			}
			tmpl := spec.Tasks[0]
			spec.Tasks = make([]shard.TaskSpec, len(v.Tasks))
			for i, tv := range v.Tasks {
				spec.Tasks[i] = tmpl
				spec.Tasks[i].Name, spec.Tasks[i].Pin = tv.Name, tv.Pin
			}
		}
		c.register(cloneSpec(&spec))
		gr := c.groups[g]
		gr.acked, gr.ackAt = true, c.s.now
		c.firings++
	}
	return true
}

// firingUnseen reports whether g is a broadcast firing of a known schedule
// that no running replica has applied yet: a thief may run its copy just
// after the commit, with every replica that applied it stopped since. Its
// copies cannot be learned yet; recheckRuns checks the run later.
func (c *checker) firingUnseen(nd *simNode, g shard.GroupID) bool {
	sid, _, ok := shard.ParseFiringGroupID(g)
	r := c.scheds[sid]
	if !ok || r == nil || c.groups[g] != nil || r.plan.spec.Group.Mode != shard.ModeBroadcast {
		return false
	}
	_, found := c.s.replicaGroup(nd, g)
	return !found
}

// recheckRuns checks the runs of broadcast firings that no running replica
// held when they started, once one does; a firing still unseen after the
// liveness bound (or at the end of the run) is a violation.
func (c *checker) recheckRuns(final bool) {
	keep := c.unseen[:0]
	for _, u := range c.unseen {
		g, _, _ := u.r.Task.Split()
		if _, found := c.s.replicaGroup(u.nd, g); found {
			c.firingGroup(u.nd, g)
			if u.nd.up && u.nd.n != nil {
				c.run(u.nd, u.r)
			} else if t := c.task(u.r.Task); t != nil {
				// The thief is down now: what run checks of a
				// thief's start, without asking it.
				t.runs++
				c.steals++
				c.placed(t, u.nd.idx, func() string { return "start of round " + fmt.Sprint(u.r.Round) })
			}
			continue
		}
		if final || c.s.now-u.at > c.s.cfg.Liveness {
			c.s.fail(invSched, fmt.Sprintf("n%d ran a copy of broadcast firing %s at %v, which no running replica holds", u.nd.idx, g, u.at))
			return
		}
		keep = append(keep, u)
	}
	c.unseen = keep
}

// pollSchedules reads every live schedule from a node serving it and
// checks its firings against the history (at most once).
func (c *checker) pollSchedules() {
	for _, r := range c.schedOrder {
		if r.deleted || c.s.viol != nil || c.schedTotalLost(r) {
			continue
		}
		nd := c.s.serving(shard.GroupID(r.id))
		if nd == nil {
			continue
		}
		v, err := nd.n.Schedule(r.id)
		if errors.Is(err, shard.ErrNotFound) && r.created && r.deleteSent < 0 && c.schedLost(r) {
			r.deleted = true // the recovery lost it (lostunsafe.go): checked no more
			continue
		}
		if errors.Is(err, shard.ErrNotFound) {
			if r.created && r.deleteSent < 0 {
				c.s.fail(invLost, fmt.Sprintf("n%d serves schedule %s (acknowledged at %v) and does not know it", nd.idx, r.id, r.createAck))
			}
			continue
		}
		if err != nil {
			continue
		}
		c.checkFirings(nd, r, v.Firings)
	}
}

func (c *checker) checkFirings(nd *simNode, r *schedRec, fs []shard.Firing) {
	if len(fs) == 0 {
		return
	}
	prev := int64(-1 << 62)
	in := map[int64]bool{}
	for _, f := range fs {
		u := f.At.Unix()
		if u <= prev {
			c.s.fail(invSched, fmt.Sprintf("n%d: schedule %s fired tick %d after tick %d (twice, or out of order): %s", nd.idx, r.id, u, prev, firingsString(fs)))
			return
		}
		prev = u
		in[u] = true
		if f.Group != "" && f.Group != shard.FiringGroupID(r.id, f.At) {
			c.s.fail(invSched, fmt.Sprintf("n%d: schedule %s tick %d fired group %s", nd.idx, r.id, u, f.Group))
			return
		}
		obs := firingObs{group: f.Group, skipped: f.Skipped}
		if old, ok := r.fired[u]; ok {
			if old != obs {
				c.s.fail(invSched, fmt.Sprintf("n%d: schedule %s tick %d reads %+v, observed %+v", nd.idx, r.id, u, obs, old))
				return
			}
		} else {
			r.fired[u] = obs
			if f.Skipped {
				c.skips++
			}
		}
		if f.Group != "" {
			c.firingGroup(nd, f.Group)
		}
	}
	first, last := fs[0].At.Unix(), fs[len(fs)-1].At.Unix()
	for u, obs := range r.fired {
		if u > first && u < last && !in[u] {
			c.s.fail(invSched, fmt.Sprintf("n%d: schedule %s forgot tick %d (%+v): %s", nd.idx, r.id, u, obs, firingsString(fs)))
			return
		}
	}
	for u, g := range r.seen {
		if u >= first && u <= last && r.fired[u].group != g {
			c.s.fail(invSched, fmt.Sprintf("n%d: group %s exists but schedule %s's tick %d reads %+v", nd.idx, g, r.id, u, r.fired[u]))
			return
		}
	}
}

func firingsString(fs []shard.Firing) string {
	var b []byte
	for _, f := range fs {
		b = strconv.AppendInt(b, f.At.Unix(), 10)
		if f.Skipped {
			b = append(b, "(skip)"...)
		}
		b = append(b, ' ')
	}
	return string(b)
}

// checkTicks is the "at least once" half: after the faults healed and
// settled, every tick of a live, unpaused schedule fired or was skipped by
// overlap, with margins for clock offsets and commands in flight.
func (c *checker) checkTicks() {
	s := c.s
	if s.now < s.healAt+schedSettle {
		return
	}
	var off time.Duration
	for _, nd := range s.nodes {
		d := nd.clk.read(s.now) - s.now
		off = max(off, d, -d)
	}
	m := off + 2*time.Second
	for _, r := range c.schedOrder {
		if !r.created || s.viol != nil || c.schedTotalLost(r) {
			continue
		}
		lo := max(r.createAck, s.healAt+schedSettle) + m
		hi := s.now - 3*time.Second - m
		if r.deleteSent >= 0 {
			hi = min(hi, r.deleteSent-m)
		}
		from := epoch.Add(lo - time.Nanosecond)
		if r.verified.After(from) {
			from = r.verified
		}
		for t := from; ; {
			sp := r.specAt(t.Sub(epoch))
			n, err := cron.Next(sp, t)
			if err != nil || n.IsZero() || n.Sub(epoch) > hi {
				break
			}
			if sp != r.specAt(n.Sub(epoch)) {
				t = epoch.Add(r.updateSent) // the update's ticks from here
				continue
			}
			t, r.verified = n, n
			if r.quietAt(n.Sub(epoch), m) {
				continue
			}
			c.ticksOK++
			if _, ok := r.fired[n.Unix()]; !ok {
				s.fail(invSched, fmt.Sprintf("schedule %s (every %v cron %q overlap %v misfire %v, updated %v) did not fire tick %d (%v) in a healthy window (faults healed at %v); fired: %s",
					r.id, sp.Every, sp.Cron, sp.Overlap, sp.Misfire, r.updated, n.Unix(), n.Sub(epoch), s.healAt, r.firedString(n.Unix())))
				return
			}
		}
	}
}

func (r *schedRec) quietAt(vt, m time.Duration) bool {
	for _, q := range r.quiet {
		if vt >= q[0]-m && (q[1] < 0 || vt <= q[1]+m) {
			return true
		}
	}
	return false
}

func (r *schedRec) firedString(around int64) string {
	var us []int64
	for u := range r.fired {
		if u > around-30 && u < around+30 {
			us = append(us, u)
		}
	}
	slices.Sort(us)
	return fmt.Sprint(us)
}

// replicaGroup reads group g from nd's replica of its partition, or else
// from any running node's.
func (s *sim) replicaGroup(nd *simNode, g shard.GroupID) (shard.GroupView, bool) {
	if nd.up && nd.n != nil {
		if v, err := nd.n.ReplicaGroup(g); err == nil {
			return v, true
		}
	}
	for _, o := range s.nodes {
		if o.up && o.n != nil {
			if v, err := o.n.ReplicaGroup(g); err == nil {
				return v, true
			}
		}
	}
	return shard.GroupView{}, false
}
