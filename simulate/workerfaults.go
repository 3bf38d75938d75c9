package simulate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// The worker faults and invariant 6 (see workers.go).

// WorkerDie kills worker slot Worker (kill -9): what it runs vanishes;
// the hub declares it dead after the TTL and its tasks run again. For
// later a new worker (a new id) polls the same peer in its place.
type WorkerDie struct {
	Span
	Worker int
	id     string
}

func (f *WorkerDie) start(s *sim) {
	w := s.workers[f.Worker]
	f.id = w.id
	if w.dead {
		return
	}
	s.chk.workerDeaths++
	w.dead, w.silent, w.stalled = true, s.now, false
	w.polled = s.now // its poll ends with it (its free slots stand a while)
}

func (f *WorkerDie) stop(s *sim) {
	s.workers[f.Worker] = s.addWorker(s.workers[f.Worker].node)
}

func (f *WorkerDie) String() string {
	return fmt.Sprintf("worker %s dies at %v, replaced %v later", f.id, f.At, f.For)
}

// WorkerStall stops worker slot Worker (SIGSTOP) for For, past the TTL:
// the hub declares it dead and its tasks run again; when it continues, it
// sends the reports it finished meanwhile, which must be refused.
type WorkerStall struct {
	Span
	Worker int
	w      *simWorker
}

func (f *WorkerStall) start(s *sim) {
	w := s.workers[f.Worker]
	if w.dead || w.stalled {
		return
	}
	f.w = w
	s.chk.workerStalls++
	w.stalled, w.silent = true, s.now
}

func (f *WorkerStall) stop(s *sim) {
	w := f.w
	if w == nil || w.dead {
		return
	}
	w.stalled, w.silent = false, -1
	held := w.held
	w.held = nil
	for _, j := range held {
		w.send(s, j)
		w.running--
	}
	if nd := s.nodes[w.node]; nd.hub != nil {
		nd.hub.wake()
	}
}

func (f *WorkerStall) String() string {
	return fmt.Sprintf("worker slot %d stalls at %v for %v", f.Worker, f.At, f.For)
}

// WorkerRepeat makes every worker send each report twice for a while, as
// workers retrying after lost responses (a flaky network in front of the
// peers) do.
type WorkerRepeat struct {
	Span
}

func (f *WorkerRepeat) start(s *sim) { s.workersRepeat = true }
func (f *WorkerRepeat) stop(s *sim)  { s.workersRepeat = false }
func (f *WorkerRepeat) String() string {
	return fmt.Sprintf("workers repeat their reports at %v for %v", f.At, f.For)
}

// WorkerBusy overloads the host of peer Node's workers for For (the
// "busy" fault kind): each polls no more (its client's back-pressure) and
// what it runs finishes only once the overload ends, heartbeating
// meanwhile (it is alive to the hub; one that holds nothing is silent,
// and dead after the TTL). Their free slots stand in the peer's demand
// for node.WorkerStandingFor after their last polls, and the runs the
// owners lease for them meanwhile wait in the hub's queue, which no
// worker there asks for: node.WorkerUnwantedFor later the hub hands them
// back to their owners (node.QueuedUnwanted), for workers elsewhere.
type WorkerBusy struct {
	Span
	Node int
	ws   []*simWorker
}

func (f *WorkerBusy) start(s *sim) {
	for _, w := range s.workers {
		if w.node != f.Node || w.dead || w.busy {
			continue
		}
		f.ws = append(f.ws, w)
		w.busy, w.polled = true, s.now
		if w.running == 0 && !w.stalled {
			w.silent = s.now // nothing to heartbeat
		}
	}
	if len(f.ws) > 0 {
		s.chk.workerBusy++
		if h := s.nodes[f.Node].hub; h != nil {
			h.setDemand() // their free slots stand now, and lapse at a sweep
		}
	}
}

func (f *WorkerBusy) stop(s *sim) {
	for _, w := range f.ws {
		w.busy = false
		if w.dead {
			continue
		}
		if !w.stalled {
			w.silent, w.polled = -1, s.now
		}
		slowed := w.slowed
		w.slowed = nil
		for _, j := range slowed {
			w.finish(s, j)
		}
	}
	if nd := s.nodes[f.Node]; nd.hub != nil {
		nd.hub.wake()
	}
}

func (f *WorkerBusy) String() string {
	return fmt.Sprintf("workers of n%d busy (no polls) at %v for %v", f.Node, f.At, f.For)
}

// busyFaults draws the "busy" fault: one peer's workers overloaded for
// the standing and unwanted times and up to 2 s more, from a generator of
// its own (the draws of the other faults and of the run stay the same).
func (s *sim) busyFaults(window time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x62757379))
	at := 100*time.Millisecond + time.Duration(rng.Int64N(int64(window*6/10)))
	d := node.WorkerStandingFor + node.WorkerUnwantedFor + 500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
	return []Fault{&WorkerBusy{Span: Span{At: at, For: d}, Node: rng.IntN(s.cfg.Peers)}}
}

// workerFaults draws one fault of each worker kind over the window: a
// death, a stall past the TTL, repeated reports.
func (s *sim) workerFaults(window time.Duration) []Fault {
	n := len(s.workers)
	at := func() time.Duration { return 100*time.Millisecond + time.Duration(s.rng.Int64N(int64(window*6/10))) }
	return []Fault{
		&WorkerDie{Span: Span{At: at(), For: 500*time.Millisecond + time.Duration(s.rng.Int64N(int64(2*time.Second)))}, Worker: s.rng.IntN(n)},
		&WorkerStall{Span: Span{At: at(), For: workerTTL + 50*time.Millisecond + time.Duration(s.rng.Int64N(int64(time.Second)))}, Worker: s.rng.IntN(n)},
		&WorkerRepeat{Span: Span{At: at(), For: window / 3}},
	}
}

// leaseLost records that hub h lost a lease (its worker's later reports
// on it must be refused).
func (c *checker) leaseLost(h *simHub, l *simLease) {
	if c.lostLeases == nil {
		c.lostLeases = map[leaseKey]bool{}
	}
	c.lostLeases[leaseKey{h, l.token}] = true
}

// leaseKey names a lease: its hub and token. Not the worker, task and
// round: a node hands a run its external worker lost back to its workers
// in the same round (the lease is the node's, not the worker's), and the
// same worker may get it again under a new token; its report on that one
// is the right one to take (seed 580140, --peers 2 --replicas 2
// --workers 1: the checker took it for the late report on the lost one).
type leaseKey struct {
	hub   *simHub
	token uint64
}

// workerVerdict checks the hub's answer to a worker's report (invariant
// 6): an outcome the node took is the reporting worker's, for the round of
// its own lease, on a lease the hub had not lost; a repeat of an accepted
// report is answered as a repeat.
func (c *checker) workerVerdict(nd *simNode, j *wjob, verdict string, round shard.Round) {
	lost := c.lostLeases[leaseKey{j.hub, j.token}]
	switch {
	case verdict == verdictAccepted && round != j.round:
		c.s.fail(invWorkers, fmt.Sprintf("n%d handed worker %s's report on %s (its lease of round %d) to the node as round %d",
			nd.idx, j.w.id, j.task, j.round, round))
	case verdict == verdictAccepted && lost:
		c.s.fail(invWorkers, fmt.Sprintf("n%d accepted worker %s's late report on %s round %d, whose lease it had lost", nd.idx, j.w.id, j.task, j.round))
	case verdict == verdictAccepted && j.ok:
		c.s.fail(invWorkers, fmt.Sprintf("n%d accepted worker %s's report on %s round %d twice", nd.idx, j.w.id, j.task, j.round))
	case j.ok && verdict != verdictRepeat && verdict != verdictUnknown:
		c.s.fail(invWorkers, fmt.Sprintf("n%d answered %s to a repeat of worker %s's accepted report on %s round %d", nd.idx, verdict, j.w.id, j.task, j.round))
	}
	switch verdict {
	case verdictAccepted:
		j.ok = true
		c.workerAccepted++
	case verdictRepeat:
		c.workerRepeats++
	case verdictLost, verdictStale:
		if lost {
			c.workerLate++
		}
		c.workerRefused++
	default:
		c.workerRefused++
	}
}

// unwantedRun is a run a hub handed back unwanted (its workers serve its
// handler, none asked for work).
type unwantedRun struct {
	node  int
	round shard.Round
}

// unwanted records that hub h hands run r back to its owner unwanted, or
// past its lease's expiry (node.QueuedExpired). A worker must not hold a
// lease of it there (it would run twice).
func (c *checker) unwanted(h *simHub, r node.Run, expired bool) {
	if l := h.byTask[r.Task]; l != nil && l.state == leaseHeld && l.run.Round == r.Round {
		c.s.fail(invWorkers, fmt.Sprintf("n%d handed back %s round %d unwanted while worker %s holds its lease", h.nd.idx, r.Task, r.Round, l.w.id))
	}
	if c.handedBack == nil {
		c.handedBack = map[shard.TaskID][]unwantedRun{}
	}
	c.handedBack[r.Task] = append(c.handedBack[r.Task], unwantedRun{node: h.nd.idx, round: r.Round})
	if expired {
		c.workerExpired++
		return
	}
	c.workerUnwanted++
}

// checkUnwanted checks a task's history at the end against the runs of it
// hubs handed back unwanted: none of those rounds has an outcome (the run
// never reached a worker), and the task ended with one in a later round,
// of a worker on any peer (which are counted, and those on another peer
// than the one that handed it back).
func (c *checker) checkUnwanted(nd *simNode, t *taskRec, evs []shard.TaskEvent) string {
	backs := c.handedBack[t.id]
	if len(backs) == 0 {
		return ""
	}
	last := slices.MaxFunc(backs, func(a, b unwantedRun) int { return int(a.round) - int(b.round) })
	var end *shard.TaskEvent
	for i := range evs {
		e := &evs[i]
		if e.Type != shard.EvSucceeded && e.Type != shard.EvFailed {
			continue
		}
		for _, b := range backs {
			if e.Round == b.round {
				return fmt.Sprintf("an outcome in round %d, which n%d handed back unrun (unwanted, expired or released)", e.Round, b.node)
			}
		}
		end = e
	}
	if t.state == 0 {
		return fmt.Sprintf("not finished after n%d handed round %d back unrun (unwanted, expired or released)", last.node, last.round)
	}
	if end != nil && end.Round > last.round {
		c.unwantedDone++
		if shard.HolderPeer(end.Holder) != c.s.nodes[last.node].id { // a holder is "<peer id>#<boot nonce>"
			c.unwantedElsewhere++
		}
	}
	return ""
}
