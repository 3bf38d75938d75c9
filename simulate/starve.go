package simulate

import (
	"fmt"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// invStarve is the starvation invariant: a peer that holds READY tasks of
// its own that it may run does not keep taking other owners' surplus. A
// peer steals only when it has none (maybeSteal: its request's load
// counts no READY work), and a busy peer asks an owner only for the tasks
// stranded there (askStranded: pinned to it, or requiring labels the
// owner lacks), which the owner cannot run; so the surplus that reaches a
// busy peer is what it asked for while it had none, granted as its own
// work arrived. A build that granted a busy asker the surplus too kept a
// peer's slots on another owner's backlog while a task pinned to it
// waited at the head of its own queue for 80 s (docs/decisions.md, "A
// busy peer asks for the tasks only it may run"); each of its asks took
// one more task of that backlog.
const invStarve = "starve"

// starveGrants is how many grants of other owners' surplus beyond what
// it asked them for while it had none a peer may take while it holds
// READY work of its own, without a moment with none between them. The
// correct build broke it on none of the seeds docs/simulator.md lists.
const starveGrants = 8

// starveRec is one peer's streak: the grants of surplus beyond its idle
// asks it took since it last held no READY work it may run.
type starveRec struct {
	gen   int // the incarnation the streak is of
	since time.Duration
	n     int      // grants of surplus in the streak
	tasks int      // surplus tasks they granted
	own   int      // starts of its own tasks in the streak
	stole int      // starts of other owners' tasks in the streak
	what  []string // the first few grants, for the message
	// seen are the surplus tasks counted: a copy of a grant (the network
	// duplicates messages) is not another grant.
	seen map[shard.TaskID]bool
	// credit is, per owner, the tasks this peer asked it for while it
	// said it had no READY work of its own (a steal request whose load
	// counts none, each copy delivered), and when it last asked so: what
	// the owner grants against those is no starvation, however busy the
	// peer is by the time the grant arrives.
	credit   map[int]int
	creditAt map[int]time.Duration
}

// starveCredit is how long an idle ask's credit lasts: a grant waits for
// its owner's commit and for the thief to resume from a pause.
const starveCredit = time.Minute

// starveAsk records a steal request nd receives from node from.
func (s *sim) starveAsk(nd *simNode, from int, m *node.Message) {
	if m.Load.Ready != 0 || from >= len(s.nodes) {
		return
	}
	rec := s.starveRec(s.nodes[from])
	if rec.credit == nil {
		rec.credit, rec.creditAt = map[int]int{}, map[int]time.Duration{}
	}
	if s.now-rec.creditAt[nd.idx] > starveCredit {
		rec.credit[nd.idx] = 0
	}
	rec.credit[nd.idx] += m.Want
	rec.creditAt[nd.idx] = s.now
}

func (s *sim) starveRec(nd *simNode) *starveRec {
	if s.starve == nil {
		s.starve = make([]starveRec, len(s.nodes))
	}
	rec := &s.starve[nd.idx]
	if rec.gen != nd.gen {
		rec.reset()
		rec.gen = nd.gen
	}
	return rec
}

func (r *starveRec) reset() {
	r.n, r.tasks, r.own, r.stole, r.what = 0, 0, 0, 0, r.what[:0]
	clear(r.seen)
}

// starveGrant looks at a grant from node from before nd steps it.
func (s *sim) starveGrant(nd *simNode, from int, m *node.Message) {
	if len(m.Grants) == 0 || m.Refused || m.Holder != nd.n.Holder() || from >= len(s.nodes) {
		return
	}
	rec := s.starveRec(nd)
	ready := nd.n.ReadyRunnable()
	if ready == 0 {
		rec.reset()
	}
	owner := s.nodes[from]
	credit := 0
	if s.now-rec.creditAt[from] <= starveCredit {
		credit = rec.credit[from]
	}
	surplus := 0
	var first shard.TaskID
	for _, g := range m.Grants {
		t := s.chk.task(g.Task)
		if t == nil || rec.seen[g.Task] || g.Handler == extHandler {
			// A firing's task the checker has not seen, one counted, or
			// one for its external workers (their demand, not a steal).
			continue
		}
		if ts := &t.g.spec.Tasks[t.idx()]; !ts.Matches(owner.id, nodeLabels(s.cfg, owner.idx)) {
			continue // stranded at its owner: nd is asked for those whatever its load
		}
		if credit > 0 {
			credit-- // asked for while it had none
			continue
		}
		if surplus == 0 {
			first = g.Task
		}
		surplus++
	}
	if rec.credit != nil {
		rec.credit[from] = credit
	}
	if ready == 0 {
		return
	}
	if surplus == 0 {
		return
	}
	if rec.n == 0 {
		rec.since = s.now
	}
	if rec.seen == nil {
		rec.seen = map[shard.TaskID]bool{}
	}
	for _, g := range m.Grants {
		rec.seen[g.Task] = true
	}
	rec.n++
	rec.tasks += surplus
	if len(rec.what) < 4 {
		rec.what = append(rec.what, fmt.Sprintf("%s from %s at %v", first, owner.id, s.now))
	}
	if rec.n >= starveGrants {
		s.fail(invStarve, fmt.Sprintf("n%d took %d grants of other owners' surplus (%d tasks: %s, ...) in %v since %v while it held READY tasks of its own it may run (%d now); meanwhile it started %d of its own tasks and %d of other owners'%s",
			nd.idx, rec.n, rec.tasks, strings.Join(rec.what, ", "), s.now-rec.since, rec.since, ready, rec.own, rec.stole, s.oldestOwn(nd)))
	}
}

// starveStart counts nd's starts in a streak: stolen says the task's
// partition is not nd's own.
func (s *sim) starveStart(nd *simNode, stolen bool) {
	if s.starve == nil {
		return
	}
	if rec := s.starveRec(nd); rec.n > 0 {
		if stolen {
			rec.stole++
		} else {
			rec.own++
		}
	}
}

// starveIdle ends nd's streak when it holds no READY work it may run
// (after each of its drains while a streak is on).
func (s *sim) starveIdle(nd *simNode) {
	if s.starve == nil {
		return
	}
	if rec := &s.starve[nd.idx]; rec.n > 0 && (rec.gen != nd.gen || nd.n.ReadyRunnable() == 0) {
		rec.reset()
	}
}

// oldestOwn names the oldest READY task nd serves and may run, for a
// failure's message.
func (s *sim) oldestOwn(nd *simNode) string {
	res := nd.n.List(&shard.Filter{States: []shard.State{shard.Ready}, Limit: shard.MaxListLimit}, false)
	labels := nodeLabels(s.cfg, nd.idx)
	var oldest *shard.TaskView
	for i := range res.Tasks {
		v := &res.Tasks[i]
		spec := shard.TaskSpec{Pin: v.Pin, Require: v.Require}
		if spec.Matches(nd.id, labels) && (oldest == nil || v.CreatedAt.Before(oldest.CreatedAt)) {
			oldest = v
		}
	}
	if oldest == nil {
		return ""
	}
	return fmt.Sprintf("; its oldest is %s (pin %q, requires %v), created at %v", oldest.ID, oldest.Pin, oldest.Require, oldest.CreatedAt.Format("15:04:05.000"))
}
