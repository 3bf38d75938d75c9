package steal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// This file checks the safety property of stealing against shard: whatever
// the interleaving of leases, expiries, dead holders, leader changes and
// stale, duplicated, reordered or late-committed outcomes, every task has
// at most one accepted outcome per round and at most one terminal outcome,
// a terminal state never changes, every accepted outcome belongs to a lease
// that was granted, and the shard agrees with a naive reference model.

// modelTask is the reference model of one task: what the committed events
// imply, written without looking at shard's implementation.
type modelTask struct {
	state    shard.State
	round    shard.Round
	holder   string
	attempt  int
	accepted int // outcome events accepted
	terminal shard.State
}

// lateEvent is a proposed event not yet committed.
type lateEvent struct {
	ev   shard.Event
	term int // leader term it was proposed in
}

type leaseKey struct {
	task   shard.TaskID
	round  shard.Round
	holder string
}

// fenceRun is one random run.
type fenceRun struct {
	tb       testing.TB
	seed     uint64
	r        *rand.Rand
	s        *shard.Shard
	now      time.Time
	term     int
	ids      []shard.TaskID
	model    map[shard.TaskID]*modelTask
	granted  map[leaseKey]bool // every lease committed and accepted
	inflight []shard.Outcome   // outcomes sent by holders, not yet delivered
	late     []lateEvent
	trace    []string
	stats    *fenceStats
}

// fenceStats shows that the runs exercise both sides of the fence.
type fenceStats struct{ accepted, rejected, lateApplied, terminal int }

var fenceHolders = []string{"p1#a", "p2#a", "p2#b", "p3#a"}

const fenceAttempts = 3

func newFenceRun(tb testing.TB, seed uint64, st *fenceStats) *fenceRun {
	tb.Helper()
	cfg := shard.DefaultConfig()
	cfg.Rand = rand.New(rand.NewPCG(seed, 1))
	cfg.LeaseGrace = 500 * time.Millisecond
	s, err := shard.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	f := &fenceRun{tb: tb, seed: seed, r: rand.New(rand.NewPCG(seed, 2)), s: s, now: t0,
		model: map[shard.TaskID]*modelTask{}, granted: map[leaseKey]bool{}, stats: st}
	s.SetLeader(true, t0)
	spec := &shard.GroupSpec{ID: "g", Mode: shard.ModeParallel}
	for i := range 1 + f.r.IntN(4) {
		spec.Tasks = append(spec.Tasks, shard.TaskSpec{Name: fmt.Sprint("t", i), Handler: "h",
			Timeout: time.Second, Retry: shard.Retry{MaxAttempts: fenceAttempts,
				Backoff: 200 * time.Millisecond, MaxBackoff: time.Second}})
	}
	ev, _, err := s.Submit(t0, spec)
	if err != nil {
		tb.Fatal(err)
	}
	s.Apply([]shard.Event{ev})
	for i := range spec.Tasks {
		id := shard.TaskIDOf("g", i)
		f.ids = append(f.ids, id)
		f.model[id] = &modelTask{state: shard.Ready}
	}
	return f
}

// step performs one random action and checks the invariants.
func (f *fenceRun) step() {
	switch k := f.r.IntN(100); {
	case k < 22:
		f.lease()
	case k < 35:
		f.advance()
	case k < 60:
		f.deliver(f.r.IntN(4) == 0)
	case k < 65:
		f.forge()
	case k < 70:
		dead := fenceHolders[f.r.IntN(len(fenceHolders))]
		f.trace = append(f.trace, "expire holder "+dead)
		f.propose(f.s.ExpireHolders(f.now, func(h string) bool { return h == dead }))
	case k < 88:
		f.commitLate()
	case k < 91:
		f.flipLeader()
	default:
		f.cancel()
	}
	f.check()
}

// propose commits each event now, or (one in four) holds it to commit late.
func (f *fenceRun) propose(evs []shard.Event) {
	for _, ev := range evs {
		if f.r.IntN(4) == 0 {
			f.late = append(f.late, lateEvent{ev: ev, term: f.term})
			continue
		}
		f.commit(ev)
	}
}

func (f *fenceRun) lease() {
	holder := fenceHolders[f.r.IntN(len(fenceHolders))]
	evs := f.s.Lease(f.now, 1+f.r.IntN(2), holder, nil)
	f.trace = append(f.trace, fmt.Sprintf("lease %d to %s", len(evs), holder))
	if f.r.IntN(10) == 0 {
		f.trace = append(f.trace, "proposal dropped")
		f.s.Unlease(evs)
		return
	}
	f.propose(evs)
}

func (f *fenceRun) advance() {
	f.now = f.now.Add(time.Duration(f.r.IntN(3000)) * time.Millisecond)
	f.trace = append(f.trace, "advance to "+f.now.Sub(t0).String())
	f.propose(f.s.Due(f.now))
}

// deliver hands one in-flight outcome (chosen at random: reordering) to
// Report; dup keeps it in flight to be delivered again.
func (f *fenceRun) deliver(dup bool) {
	if len(f.inflight) == 0 {
		return
	}
	i := f.r.IntN(len(f.inflight))
	o := f.inflight[i]
	if !dup {
		f.inflight = append(f.inflight[:i], f.inflight[i+1:]...)
	}
	f.report(o)
}

// forge reports an outcome for a lease that may never have existed (a
// random holder and a round around the current one), through Report or as
// an event proposed without Report.
func (f *fenceRun) forge() {
	id := f.ids[f.r.IntN(len(f.ids))]
	o := shard.Outcome{Task: id, Round: f.model[id].round + shard.Round(f.r.IntN(3)) - 1,
		Holder: fenceHolders[f.r.IntN(len(fenceHolders))], OK: f.r.IntN(2) == 0}
	if o.Round > 1<<60 {
		o.Round = 0
	}
	if f.r.IntN(2) == 0 {
		f.report(o)
		return
	}
	// An outcome event that skipped Report (a buggy or former owner):
	// Apply alone must fence it.
	ev := shard.Event{Type: shard.EvFailed, At: f.now, Group: "g", Task: o.Task, Round: o.Round,
		Holder: o.Holder, Error: "forged", NotBefore: f.now.Add(time.Second)}
	if o.OK {
		ev = shard.Event{Type: shard.EvSucceeded, At: f.now, Group: "g", Task: o.Task, Round: o.Round, Holder: o.Holder}
	}
	f.trace = append(f.trace, "forged event:")
	f.propose([]shard.Event{ev})
}

// report checks Report's fencing against the model, and proposes the event.
func (f *fenceRun) report(o shard.Outcome) {
	m := f.model[o.Task]
	want := m.state == shard.Running && m.round == o.Round && m.holder == o.Holder
	ev, err := f.s.Report(f.now, o)
	f.trace = append(f.trace, fmt.Sprintf("report %s r%d %s ok=%v: %v", o.Task, o.Round, o.Holder, o.OK, err))
	switch {
	case want && err != nil:
		f.fail("Report(%+v) = %v; want accepted (model %+v)", o, err, *m)
	case !want && !errors.Is(err, shard.ErrStaleRound):
		f.fail("Report(%+v) = %v; want ErrStaleRound (model %+v)", o, err, *m)
	case err != nil:
		f.stats.rejected++
		return
	}
	f.propose([]shard.Event{ev})
}

func (f *fenceRun) commitLate() {
	if len(f.late) == 0 {
		return
	}
	i := f.r.IntN(len(f.late))
	le := f.late[i]
	f.late = append(f.late[:i], f.late[i+1:]...)
	f.stats.lateApplied++
	f.trace = append(f.trace, fmt.Sprintf("late commit (term %d of %d):", le.term, f.term))
	f.commit(le.ev)
}

// flipLeader loses and regains leadership (a new term). Raft loses some of
// the old term's uncommitted entries; the rest still commit later.
func (f *fenceRun) flipLeader() {
	f.trace = append(f.trace, "leader change")
	f.s.SetLeader(false, f.now)
	f.s.SetLeader(true, f.now)
	f.term++
	kept := f.late[:0]
	for _, le := range f.late {
		if f.r.IntN(2) == 0 {
			kept = append(kept, le)
		}
	}
	f.late = kept
}

func (f *fenceRun) cancel() {
	id := f.ids[f.r.IntN(len(f.ids))]
	evs, err := f.s.Cancel(f.now, "g", id, "test")
	if err != nil {
		f.fail("Cancel(%s) = %v", id, err)
	}
	f.trace = append(f.trace, fmt.Sprintf("cancel %s: %d events", id, len(evs)))
	f.propose(evs)
}

// commit applies one committed event to the shard and to the model.
func (f *fenceRun) commit(ev shard.Event) {
	m := f.model[ev.Task]
	ok := m != nil && f.modelApply(m, ev)
	f.trace = append(f.trace, fmt.Sprintf("  apply %v %s r%d %s: model accepts %v", ev.Type, ev.Task, ev.Round, ev.Holder, ok))
	f.s.Apply([]shard.Event{ev})
	if !ok || ev.Type != shard.EvLeased {
		return
	}
	f.granted[leaseKey{ev.Task, ev.Round, ev.Holder}] = true
	o := shard.Outcome{Task: ev.Task, Round: ev.Round, Holder: ev.Holder, OK: f.r.IntN(2) == 0}
	o.Permanent = !o.OK && f.r.IntN(5) == 0
	if f.r.IntN(8) != 0 { // some holders die before reporting
		f.inflight = append(f.inflight, o)
	}
}

// modelApply is the naive reference: the transition table of docs/design.md's
// task states, fenced by round and holder. It reports whether ev changed m.
func (f *fenceRun) modelApply(m *modelTask, ev shard.Event) bool {
	fenced := m.state == shard.Running && m.round == ev.Round && m.holder == ev.Holder
	switch {
	case ev.Type == shard.EvLeased && m.state == shard.Ready && ev.Round == m.round+1:
		m.state, m.round, m.holder = shard.Running, ev.Round, ev.Holder
	case ev.Type == shard.EvSucceeded && fenced:
		m.attempt++
		m.accepted++
		m.state = shard.Succeeded
	case ev.Type == shard.EvFailed && fenced:
		m.attempt++
		m.accepted++
		m.state = shard.Waiting
		if ev.Permanent || m.attempt >= fenceAttempts || ev.NotBefore.IsZero() {
			m.state = shard.Failed
		}
	case ev.Type == shard.EvExpired && m.state == shard.Running && m.round == ev.Round:
		m.state, m.holder = shard.Ready, ""
	case ev.Type == shard.EvReadied && m.state == shard.Waiting:
		m.state = shard.Ready
	case ev.Type == shard.EvCanceled && !m.state.Terminal():
		m.state = shard.Canceled
	default:
		return false
	}
	if m.state.Terminal() {
		f.stats.terminal++
		if m.terminal != shard.StateUnknown {
			f.fail("model: %s reached terminal state twice", ev.Task)
		}
		m.terminal = m.state
	}
	if ev.Type == shard.EvSucceeded || ev.Type == shard.EvFailed {
		f.stats.accepted++
	}
	return true
}

// check compares every task with the model and checks the fencing
// invariants on its committed history.
func (f *fenceRun) check() {
	ready := 0
	for _, id := range f.ids {
		m := f.model[id]
		v, err := f.s.Task(id)
		if err != nil {
			f.fail("Task(%s) = %v", id, err)
		}
		if v.State != m.state || v.Round != m.round || (m.state == shard.Running && v.Holder != m.holder) {
			f.fail("Task(%s) = %v r%d %q; model %v r%d %q", id, v.State, v.Round, v.Holder, m.state, m.round, m.holder)
		}
		if m.terminal != shard.StateUnknown && v.State != m.terminal {
			f.fail("%s left terminal state %v for %v", id, m.terminal, v.State)
		}
		if m.state == shard.Ready {
			ready++
		}
		f.checkHistory(id, m)
	}
	if n := f.s.ReadyLen(); n > ready {
		f.fail("ReadyLen() = %d; model has %d READY", n, ready)
	}
}

// checkHistory: rounds of leases strictly increase (one holder per round),
// each round has at most one outcome, every outcome matches a granted lease,
// at most one outcome is terminal, and nothing follows a terminal event.
func (f *fenceRun) checkHistory(id shard.TaskID, m *modelTask) {
	hist, err := f.s.TaskEvents(id)
	if err != nil {
		f.fail("TaskEvents(%s) = %v", id, err)
	}
	leased := map[shard.Round]string{}
	outcomes := map[shard.Round]int{}
	var last shard.Round
	accepted, succeeded := 0, 0
	for i, e := range hist {
		switch e.Type {
		case shard.EvLeased:
			if e.Round <= last {
				f.fail("%s leased in round %d after round %d", id, e.Round, last)
			}
			last, leased[e.Round] = e.Round, e.Holder
		case shard.EvSucceeded, shard.EvFailed:
			h, ok := leased[e.Round]
			if !ok || h != e.Holder || !f.granted[leaseKey{id, e.Round, e.Holder}] {
				f.fail("%s outcome r%d %q matches no granted lease", id, e.Round, e.Holder)
			}
			outcomes[e.Round]++
			accepted++
			if outcomes[e.Round] > 1 {
				f.fail("%s has %d outcomes in round %d", id, outcomes[e.Round], e.Round)
			}
		}
		if e.Type == shard.EvSucceeded {
			succeeded++
		}
		if (e.Type == shard.EvSucceeded || e.Type == shard.EvCanceled) && i != len(hist)-1 {
			f.fail("%s: %v after terminal %v", id, hist[i+1].Type, e.Type)
		}
	}
	final := succeeded
	if m.state == shard.Failed {
		final++
		if hist[len(hist)-1].Type != shard.EvFailed {
			f.fail("%s FAILED but its last event is %v", id, hist[len(hist)-1].Type)
		}
	}
	if final > 1 || accepted != m.accepted {
		f.fail("%s: %d terminal and %d accepted outcomes; model accepted %d", id, final, accepted, m.accepted)
	}
}

func (f *fenceRun) fail(format string, args ...any) {
	f.tb.Helper()
	tail := f.trace[max(0, len(f.trace)-40):]
	f.tb.Fatalf("seed %d: %s\nlast steps:\n%s", f.seed, fmt.Sprintf(format, args...), strings.Join(tail, "\n"))
}

// TestFencingProperty runs 2,000 random interleavings (200 with -short).
func TestFencingProperty(t *testing.T) {
	runs := 2000
	if testing.Short() {
		runs = 200
	}
	var st fenceStats
	for seed := range uint64(runs) {
		f := newFenceRun(t, seed, &st)
		for range 120 {
			f.step()
		}
	}
	t.Logf("accepted %d, rejected %d, late commits %d, terminal %d", st.accepted, st.rejected, st.lateApplied, st.terminal)
	if st.accepted < runs || st.rejected < runs || st.lateApplied < runs || st.terminal < runs {
		t.Fatalf("runs did not exercise the fence: %+v", st)
	}
}
