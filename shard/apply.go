package shard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Apply folds committed events into the state, in log order. It is
// deterministic: every replica applying the same events holds the same
// state. An event that no longer fits the state (a stale round, a task
// already terminal, a group submitted twice) changes nothing: fencing is
// re-checked here because the state may have moved between proposal and
// commit.
func (s *Shard) Apply(evs []Event) {
	for i := range evs {
		s.apply(&evs[i])
	}
}

func (s *Shard) apply(e *Event) {
	s.evTask = e.Task
	s.applied++
	s.recordAudit(e)
	firedOK := s.firedOK
	s.firedOK = ""
	if e.Type.PeerAction() {
		return // recorded above; a peer's id names no group
	}
	if e.Type == EvSubmitted {
		if isFiringGroup(e.Group) && firedOK != e.Group {
			return // a firing whose EvScheduleFired did not take effect
		}
		s.applySubmitted(e)
		return
	}
	if e.Type.schedule() {
		s.applySchedule(e)
		return
	}
	g := s.groups[e.Group]
	if g == nil {
		return
	}
	if e.Type == EvRemoved {
		s.applyRemoved(g)
		return
	}
	if e.Type == EvNotified {
		s.applyNotified(g, e)
		return
	}
	if e.Type == EvRetried {
		s.applyRetried(g, e)
		return
	}
	if e.Type == EvCanceled && e.Task == "" {
		for _, t := range g.tasks {
			s.cancel(t, e, "group canceled")
		}
		return
	}
	gid, idx, ok := e.Task.Split()
	if !ok || gid != g.id || idx >= len(g.tasks) {
		return
	}
	t := g.tasks[idx]
	switch e.Type {
	case EvLeased:
		s.applyLeased(t, e)
	case EvRenewed:
		if t.state == Running && t.round == e.Round && t.holder == e.Holder {
			t.expiry = stampOf(e.Expiry)
			s.addTimer(t, timer{at: e.Expiry.UnixNano(), kind: timerExpiry, round: t.round})
		}
	case EvSucceeded:
		s.applySucceeded(t, e)
	case EvFailed:
		s.applyFailed(t, e)
	case EvExpired:
		if t.state == Running && t.round == e.Round {
			s.recordExpired(t, e)
			t.died(e.Died)
			t.holder = ""
			t.readyAt = stampOf(e.At)
			s.requeue(t)
		}
	case EvReadied:
		if t.state == Waiting {
			s.record(t, e)
			t.readyAt = stampOf(e.At)
			s.setState(t, Ready)
		}
	case EvCanceled:
		s.cancel(t, e, "canceled")
	}
}

func (s *Shard) applySubmitted(e *Event) {
	if e.Spec == nil || s.groups[e.Group] != nil || e.Spec.ID != e.Group {
		return // idempotent repeat (same key) or malformed: nothing to do
	}
	if e.Spec.ValidateStored() != nil {
		// Proposed by a buggy or hostile leader: applied, it could not be
		// snapshotted and restored. Refused alike on every replica.
		s.rejected++
		return
	}
	g := &group{id: e.Spec.ID, spec: headOf(e.Spec), state: GroupRunning, created: e.At}
	newTasks(g, e.Spec.Tasks, historyCap)
	linkDeps(g)
	g.initGates()
	s.groups[g.id] = g
	s.forgetLookup()   // a group of this id may have been removed and looked up since
	s.remKnown = false // it may reuse the id of a removed group still in done
	s.indexAdd(g)
	for _, t := range g.tasks {
		t.addEvent(taskEvent{typ: EvSubmitted, at: stampOf(e.At)})
		g.counts[StateUnknown]++
		s.counts[StateUnknown]++
		if t.depsLeft > 0 {
			s.setState(t, Pending)
		} else {
			s.release(t, e)
		}
	}
}

// linkDeps fills deps, dependents and depsLeft from the spec: names for a
// dag, the previous stage for a pipeline.
func linkDeps(g *group) {
	if m := g.spec.Mode; m != ModeDAG && m != ModePipeline && m != ModeStream {
		return // no deps: depsLeft is 0 as newTasks made it
	}
	var names map[string]int // a DAG's deps name their tasks
	if g.spec.Mode == ModeDAG {
		names = make(map[string]int, len(g.tasks))
		for i, t := range g.tasks {
			if t.name != "" {
				names[t.name] = i
			}
		}
	}
	byStage := map[int][]int{}
	if g.spec.Mode == ModePipeline {
		for i, t := range g.tasks {
			byStage[int(t.stage)] = append(byStage[int(t.stage)], i)
		}
	}
	// Every task's deps, task after task in one slice, and their number
	// in depsLeft; then the links and the dependents are carved from one
	// allocation each: a pipeline or a stream links nearly every task,
	// and three allocations a task (more as its dependents grew) were a
	// good part of a submission's.
	all := make([]int, 0, len(g.tasks))
	for i, t := range g.tasks {
		from := len(all)
		switch g.spec.Mode {
		case ModeDAG:
			for _, name := range t.depNames() {
				if d, ok := names[name]; ok && d != i {
					all = append(all, d)
				}
			}
		case ModePipeline:
			if int(t.stage) > 0 {
				all = append(all, byStage[int(t.stage)-1]...)
			}
		case ModeStream:
			if int(t.stage) > 0 {
				all = append(all, i-1) // the same item, one stage earlier
			}
		}
		t.depsLeft = int32(len(all) - from)
	}
	if len(all) == 0 {
		return
	}
	dependents := make([]int32, len(g.tasks)) // each task's number of them
	for _, d := range all {
		dependents[d]++
	}
	need := 0
	for i, t := range g.tasks {
		if t.links == nil && (t.depsLeft > 0 || dependents[i] > 0) {
			need++
		}
	}
	room := make([]taskLinks, need)
	linked := func(t *task) *taskLinks {
		if t.links == nil {
			t.links, room = &room[0], room[1:]
		}
		return t.links
	}
	of := make([]int, len(all)) // the dependents' lists, in the tasks' order
	for i, t := range g.tasks {
		if n := int(t.depsLeft); n > 0 {
			linked(t).deps, all = all[:n:n], all[n:]
		}
		if n := int(dependents[i]); n > 0 {
			linked(t).dependents, of = of[:0:n], of[n:]
		}
	}
	for i, t := range g.tasks {
		for _, d := range t.deps() {
			l := g.tasks[d].links
			l.dependents = append(l.dependents, i) // within its room
		}
	}
}

// requeue moves running task t back to READY in the place it held in the
// queue: its lease ended without an attempt (its holder died, its worker
// went away, its lease ran out), so it goes before the tasks that became
// READY while it ran, not behind them. A dead owner's tasks would
// otherwise run again only after the backlog that outlived it.
func (s *Shard) requeue(t *task) {
	s.moveTo(t, Ready, t.seq)
}

// release moves a task whose dependencies are done to READY, or to WAITING
// when its delay has not passed at the event's time.
func (s *Shard) release(t *task, e *Event) {
	if g := t.g; g.gateFull(t) {
		if t.state != Pending {
			s.setState(t, Pending) // at submission: from no state yet
		}
		g.held[g.gate(t)].push(int(t.idx)) // PENDING until the gate has room
		return
	}
	if t.pol.Delay > 0 {
		nb := t.g.created.Add(t.pol.Delay)
		if nb.After(e.At) {
			t.notBefore = stampOf(nb)
			s.setState(t, Waiting)
			s.addTimer(t, timer{at: nb.UnixNano(), kind: timerReady})
			return
		}
	}
	t.readyAt = stampOf(e.At)
	s.setState(t, Ready)
}

func (s *Shard) applyLeased(t *task, e *Event) {
	if s.leader {
		delete(s.inflight, t.idOr(e.Task))
	}
	if t.state != Ready || e.Round != t.round+1 {
		return
	}
	t.round = e.Round
	t.holder = s.holderOf(e.Holder)
	t.expiry = stampOf(e.Expiry)
	t.started = stampOf(e.At)
	s.record(t, e)
	s.setState(t, Running)
	s.addTimer(t, timer{at: e.Expiry.UnixNano(), kind: timerExpiry, round: t.round})
}

func (s *Shard) fenced(t *task, e *Event) bool {
	return t.state == Running && t.round == e.Round && t.holder == e.Holder
}

func (s *Shard) applySucceeded(t *task, e *Event) {
	if !s.fenced(t, e) {
		return
	}
	defer s.admitNext(t, e)
	t.attempt++
	t.crash = 0
	t.result = e.Result
	t.err = ""
	t.finished = stampOf(e.At)
	s.record(t, e)
	s.setState(t, Succeeded)
	for _, d := range t.dependents() {
		dt := t.g.tasks[d]
		dt.depsLeft--
		if dt.depsLeft == 0 && dt.state == Pending {
			s.release(dt, e)
		}
	}
}

func (s *Shard) applyFailed(t *task, e *Event) {
	if e.Holder == "" {
		s.applyUnplaceable(t, e)
		return
	}
	if !s.fenced(t, e) {
		return
	}
	t.attempt++
	t.crash = 0
	t.err = e.Error
	s.record(t, e)
	maxAttempts := max(t.pol.Retry.MaxAttempts, 1)
	if e.Permanent || int(t.attempt-t.retried) >= maxAttempts || e.NotBefore.IsZero() {
		s.fail(t, e)
		return
	}
	t.notBefore = stampOf(e.NotBefore)
	s.setState(t, Waiting)
	s.addTimer(t, timer{at: e.NotBefore.UnixNano(), kind: timerReady})
}

// fail moves t to FAILED for good: its dependents are canceled (in a
// streaming pipeline its item is skipped) and a held item may start.
func (s *Shard) fail(t *task, e *Event) {
	t.finished = stampOf(e.At)
	s.setState(t, Failed)
	if len(t.dependents()) > 0 { // the reason is made only for them
		why := fmt.Sprintf("dependency %s failed", t.id())
		if t.g.spec.Mode == ModeStream {
			why = fmt.Sprintf("%s item %d at stage %q: %s", skippedPrefix, int(t.item), t.g.spec.Stages[int(t.stage)].Name, e.Error)
		}
		s.cancelDependents(t, e, why)
	}
	s.admitNext(t, e)
}

// applyUnplaceable fails a READY task no peer may ever run (see
// FailPinnedTo): an EvFailed without a holder. Like a lease it takes the
// next round, so whichever of the two applies first wins and the other is
// dropped, and the round's one outcome is this failure (an earlier
// attempt's outcome keeps its own round). No attempt is counted.
func (s *Shard) applyUnplaceable(t *task, e *Event) {
	if s.leader {
		delete(s.inflight, t.idOr(e.Task))
	}
	if t.state != Ready || e.Round != t.round+1 || !e.Permanent {
		return
	}
	t.round, t.holder = e.Round, ""
	t.err = e.Error
	s.record(t, e)
	s.fail(t, e)
}

// cancel moves t (if not terminal) and its dependents to CANCELED.
func (s *Shard) cancel(t *task, e *Event, why string) {
	if t.state.Terminal() {
		return
	}
	wasRunning := t.state == Running
	defer s.admitNext(t, e)
	t.err = why
	t.finished = stampOf(e.At)
	t.addEvent(taskEvent{typ: EvCanceled, at: stampOf(e.At), round: t.round, note: noteOf(why, e.By)})
	s.setState(t, Canceled)
	if wasRunning {
		c := &s.changes[len(s.changes)-1] // setState recorded the terminal change
		c.Abort, c.Holder = true, t.holder
	}
	if len(t.dependents()) == 0 {
		return // the reason below is made only for them
	}
	next := why // every later stage of a skipped item is skipped, not canceled
	if !strings.HasPrefix(why, skippedPrefix) {
		next = fmt.Sprintf("dependency %s %s", t.id(), "canceled")
	}
	s.cancelDependents(t, e, next)
}

func (s *Shard) cancelDependents(t *task, e *Event, why string) {
	for _, d := range t.dependents() {
		s.cancel(t.g.tasks[d], e, why)
	}
}

func (s *Shard) applyRemoved(g *group) {
	if !g.state.Terminal() {
		return
	}
	for _, t := range g.tasks {
		s.ready.Remove(t)
		if t.ref != nil {
			t.ref.t = nil // its timers no longer hold it
		}
	}
	delete(s.groups, g.id)
	s.forgetLookup()
	for st, n := range g.counts {
		s.counts[st] -= n
	}
	delete(s.removing, g.id)
	s.indexRemoved(g)
	// Forget the removed groups at the head of the finish order (removals
	// go in that order), and compact now and then.
	s.removalsChanged()
	for s.doneHead < len(s.done) && s.groups[s.done[s.doneHead]] == nil {
		s.done[s.doneHead] = ""
		s.doneHead++
	}
	if s.doneHead > 1024 && s.doneHead*2 > len(s.done) {
		s.done = append(s.done[:0], s.done[s.doneHead:]...)
		s.doneHead = 0
	}
	s.notifyPending = slices.DeleteFunc(s.notifyPending, func(id GroupID) bool { return id == g.id })
}

// historyCap is the room a new task's history starts with: its submission,
// a lease and an outcome, the whole life of most tasks.
const historyCap = 3

// newTasks makes g's tasks from their specs, each with room for hist
// events of history. They are allocated together, with their histories'
// room, in two allocations per group rather than two to four per task
// (the tasks of a group are removed together; a task whose history
// outgrows its room moves it to an allocation of its own, and when the
// group finishes each history leaves it, settleGroup): under W1 a
// peer holds millions of tasks, and allocating them one by one was a
// good part of its garbage collector's work.
func newTasks(g *group, specs []TaskSpec, hist int) {
	n := len(specs)
	g.tasks = make([]*task, n)
	slab := make([]task, n)
	var events []taskEvent
	if hist > 0 {
		events = make([]taskEvent, n*hist)
	}
	for i := range slab {
		t := &slab[i]
		*t = task{g: g, idx: int32(i), heapIdx: -1}
		if hist > 0 {
			t.history = events[i*hist : i*hist : (i+1)*hist]
		}
		g.tasks[i] = t
	}
	newPolicies(g, specs)
}

// record appends e to t's history.
func (s *Shard) record(t *task, e *Event) {
	t.addEvent(taskEvent{
		typ: e.Type, at: stampOf(e.At), round: e.Round, holder: s.holderOf(e.Holder), note: noteOf(e.Error, e.By),
	})
}

// recordExpired records expiry e of running task t. One that names no
// holder and no reason (the owner found the lease's holder gone:
// ExpireHolders; or the lease ran out: Due) is recorded with the lease's
// holder and why, from the state every replica holds (its expiry), so the
// history tells which peer's lease ended and that the task runs again
// because of it. The note is shared by the tasks of one holder's expiry.
func (s *Shard) recordExpired(t *task, e *Event) {
	if e.Holder != "" || e.Error != "" || e.By != "" || t.holder == "" {
		s.record(t, e)
		return
	}
	ranOut := !t.expiry.time().After(e.At)
	if n := s.expiryNote; n == nil || n.holder != t.holder || n.ranOut != ranOut {
		peer := HolderPeer(t.holder)
		why := "the lease's holder, peer " + peer + ", died or restarted before it reported: the task runs again"
		if ranOut {
			why = "the lease ran out: peer " + peer + " neither reported nor renewed it in time (stalled, cut off or gone): the task runs again"
		}
		s.expiryNote = &expiryNote{holder: t.holder, ranOut: ranOut, note: &eventNote{err: why}}
	}
	t.addEvent(taskEvent{typ: e.Type, at: stampOf(e.At), round: e.Round, holder: s.holderOf(t.holder), note: s.expiryNote.note})
}

// expiryNote is the note of the last expiry recordExpired explained, kept
// for the next tasks of the same holder's expiry (a dead peer's leases
// expire together: one note, not one per task).
type expiryNote struct {
	holder string
	ranOut bool
	note   *eventNote
}

// taskEvent is a TaskEvent as a task keeps it: 48 bytes where a TaskEvent
// takes 96, its sequence number its place in the history, its rarely set
// error and author behind a pointer. A peer under W1 holds millions of
// tasks with three events each.
type taskEvent struct {
	at     stamp
	round  Round
	holder string
	note   *eventNote // nil: no error, no author
	typ    EventType
}

// eventNote is a history event's error and author (TaskEvent.Error, By).
type eventNote struct{ err, by string }

func noteOf(err, by string) *eventNote {
	if err == "" && by == "" {
		return nil
	}
	return &eventNote{err: err, by: by}
}

// view returns the event as the API shows it, seq its place (1-based).
func (h *taskEvent) view(seq int) TaskEvent {
	v := TaskEvent{Seq: seq, Type: h.typ, At: h.at.time(), Round: h.round, Holder: h.holder}
	if h.note != nil {
		v.Error, v.By = h.note.err, h.note.by
	}
	return v
}

// holderOf returns holder as this shard already keeps it: every lease of a
// peer's run names the same holder, and each decoded event made its own
// copy of a 60-byte string.
func (s *Shard) holderOf(holder string) string { return s.holders.of(holder) }

// holderSet interns holders, up to maxHolders of them.
type holderSet map[string]string

// of returns holder as the set keeps it, kept from now on if it is new.
func (hs *holderSet) of(holder string) string {
	if holder == "" {
		return ""
	}
	if h, ok := (*hs)[holder]; ok {
		return h
	}
	if len(*hs) >= maxHolders {
		clear(*hs) // bounded: holders are peers' runs, and a restart makes a new one
	}
	if *hs == nil {
		*hs = make(holderSet)
	}
	(*hs)[holder] = holder
	return holder
}

// maxHolders bounds the holders a holderSet remembers.
const maxHolders = 4096

// setState moves t to st, keeping the ready queue, the group counters and
// the change list in step. Every state change goes through here.
func (s *Shard) setState(t *task, st State) { s.moveTo(t, st, 0) }

// moveTo is setState; a task that becomes READY takes its place in the
// queue by seq, or, when seq is 0, by the next sequence number. The
// shard's sequence counter moves on either way.
func (s *Shard) moveTo(t *task, st State, seq uint64) {
	g := t.g
	if g.gateLive != nil {
		g.gateLive[g.gate(t)] += inFlight(st) - inFlight(t.state)
	}
	g.counts[t.state]--
	g.counts[st]++
	s.counts[t.state]--
	s.counts[st]++
	if t.state == Ready {
		s.ready.Remove(t)
	}
	t.state = st
	if st == Ready {
		s.seq++
		t.seq = cmp.Or(seq, s.seq)
		s.ready.Push(t)
	}
	if !st.Terminal() {
		return
	}
	c := Change{Task: t.idOr(s.evTask), Group: g.id, State: st, Retries: t.retries()}
	if g.counts[Succeeded]+g.counts[Failed]+g.counts[Canceled] == len(g.tasks) {
		g.state = groupOutcome(g)
		g.finished = t.finished.time()
		s.done = append(s.done, g.id)
		s.removalsChanged()
		c.GroupDone = true
		settleGroup(g)
		if g.spec.Notify != "" {
			g.notify.next = g.finished
			s.notifyPending = append(s.notifyPending, g.id)
		}
	}
	s.changes = append(s.changes, c)
}

func groupOutcome(g *group) GroupState {
	if g.spec.Mode == ModeStream {
		return streamOutcome(g)
	}
	switch {
	case g.counts[Failed] > 0:
		return GroupFailed
	case g.counts[Canceled] > 0:
		return GroupCanceled
	}
	return GroupSucceeded
}

// skippedPrefix starts the error of the later stages of a skipped item.
const skippedPrefix = "skipped:"

// admitNext lets the next held tasks into t's gate when t's leaving made
// room (a no-op in a group without gates). Held tasks that were canceled
// meanwhile are dropped on the way.
func (s *Shard) admitNext(t *task, e *Event) {
	g := t.g
	if g.gateLive == nil || !t.state.Terminal() {
		return
	}
	i := g.gate(t)
	c := g.gateCap(i)
	for c > 0 && g.gateLive[i] < c {
		j, ok := g.held[i].pop()
		if !ok {
			return
		}
		if next := g.tasks[j]; next.state == Pending && next.depsLeft == 0 {
			s.release(next, e)
		}
	}
}

// streamOutcome: a streaming pipeline succeeds when its items went through
// or were skipped (reported in the view), fails when every item was
// skipped, and is canceled when someone canceled it.
func streamOutcome(g *group) GroupState {
	for _, t := range g.tasks {
		if t.state == Canceled && !strings.HasPrefix(t.err, skippedPrefix) {
			return GroupCanceled
		}
	}
	if items := len(g.tasks) / len(g.spec.Stages); g.counts[Failed] >= items {
		return GroupFailed
	}
	return GroupSucceeded
}

// applyNotified records a webhook delivery attempt. Attempts are fenced by
// number, so a repeated report of the same attempt changes nothing.
func (s *Shard) applyNotified(g *group, e *Event) {
	n := &g.notify
	if s.leader {
		delete(s.notifyInflight, g.id)
	}
	if !g.state.Terminal() || g.spec.Notify == "" || n.delivered || n.gaveUp || int(e.Round) != n.attempts+1 {
		return
	}
	n.attempts++
	n.err = e.Error
	switch {
	case e.Error == "":
		n.delivered = true
	case e.Permanent:
		n.gaveUp = true
	default:
		n.next = e.NotBefore
	}
	if n.delivered || n.gaveUp {
		s.notifyPending = slices.DeleteFunc(s.notifyPending, func(id GroupID) bool { return id == g.id })
	}
	if len(g.tasks) == 1 {
		t := g.tasks[0]
		t.addEvent(taskEvent{typ: EvNotified, at: stampOf(e.At), round: e.Round, note: noteOf(e.Error, "")})
		t.settle() // the group is finished: no spare room
	}
}

// died counts the death of the external worker that held t's lease
// (Event.Died).
func (t *task) died(d Death) {
	n := DeathsOf(t.crash)
	switch d {
	case DiedWithOthers:
		n.Shared++
	case DiedAlone:
		n.Alone++
	}
	t.crash = n.Mark()
}
