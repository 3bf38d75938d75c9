package simulate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Workers restarted as another instance, in the simulated hub, by the
// runtime hub's rule (peer/workers.go, Poll; node.WorkerInstance): a
// worker's polls name its process's instance, and the first poll of
// another instance under a known id means the process restarted: the
// leases of the one before are buried at once (each a death recorded
// with its task, node.WorkerDeath), not the TTL later, as the new
// process holds none of them.
//
// The "restart" fault (WorkerRestart) restarts a worker's process. The
// checker (workerLease) fails a hub that hands a worker a lease while it
// still holds a lease of the worker's process before its restart (that
// lease would wait for its deadline, its task an attempt spent, instead
// of running again at once).

// polls takes note of the instance each polling worker's polls name: a
// restarted worker's leases are buried.
func (h *simHub) polls() {
	for _, w := range h.workers() {
		if !w.polling() {
			continue
		}
		inst := w.instance()
		switch node.WorkerInstance(h.instance[w], inst, h.retired[w]) {
		case node.InstanceConflict:
			panic(fmt.Sprintf("simulate: worker %s polls as retired instance %s", w.id, inst)) // a simulated worker never does
		case node.InstanceRestarted:
			h.nd.s.chk.workerRestarts++
			h.nd.s.chk.restartBuried += h.held[w]
			if h.nd.s.cfg.bugNoBurial {
				h.instance[w] = inst
				continue
			}
			h.bury(w, fmt.Sprintf("it polls again as another instance (%s, was %s): its process restarted", inst, h.instance[w]))
			h.retired[w] = append(h.retired[w], h.instance[w])
			fallthrough
		case node.InstanceFirst:
			h.instance[w] = inst
		}
	}
}

// WorkerRestart restarts the process of worker slot Worker (the
// "restart" fault kind: a deploy, or a supervisor restarting it after a
// crash): what it runs vanishes, and For later the new process polls the
// same peer under the same id, as another instance, well within the TTL.
type WorkerRestart struct {
	Span
	Worker int
	w      *simWorker
}

func (f *WorkerRestart) start(s *sim) {
	w := s.workers[f.Worker]
	if w.dead || w.down {
		return
	}
	f.w = w
	w.inst++ // the old process's tasks vanish with it (finish drops them)
	w.down, w.stalled, w.busy = true, false, false
	w.running, w.held, w.slowed, w.jobs, w.hangs, w.hung = 0, nil, nil, nil, nil, false
	w.silent, w.polled = s.now, s.now
}

func (f *WorkerRestart) stop(s *sim) {
	w := f.w
	if w == nil || w.dead {
		return
	}
	w.down, w.silent, w.polled = false, -1, s.now
	if nd := s.nodes[w.node]; nd.hub != nil {
		nd.hub.wake() // its first poll
	}
}

func (f *WorkerRestart) String() string {
	return fmt.Sprintf("worker slot %d restarts at %v, polling again %v later", f.Worker, f.At, f.For)
}

// restartFaults draws the "restart" fault: three worker restarts over
// the window, each polling again 10-300 ms later, and two graceful stops
// (WorkerRelease), each replaced 0.5-2 s later, from a generator of its
// own (the draws of the other faults and of the run stay the same).
func (s *sim) restartFaults(window time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x72657374617274))
	at := func() time.Duration { return 100*time.Millisecond + time.Duration(rng.Int64N(int64(window*6/10))) }
	var fs []Fault
	for range 3 {
		d := 10*time.Millisecond + time.Duration(rng.Int64N(int64(290*time.Millisecond)))
		fs = append(fs, &WorkerRestart{Span: Span{At: at(), For: d}, Worker: rng.IntN(len(s.workers))})
	}
	for range 2 {
		d := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
		fs = append(fs, &WorkerRelease{Span: Span{At: at(), For: d}, Worker: rng.IntN(len(s.workers))})
	}
	return fs
}

// restartedHeld returns a lease hub h holds for worker w's process
// before its restart, if any.
func (h *simHub) restartedHeld(w *simWorker) *simLease {
	i := slices.IndexFunc(h.heldBy(w), func(l *simLease) bool { return l.inst != w.inst })
	if i < 0 {
		return nil
	}
	return h.heldBy(w)[i]
}

// WorkerRelease stops worker slot Worker gracefully (the "release" fault
// kind: SIGTERM, a deploy): it hands back every lease it holds unfinished
// (a release: its task READY again in a new round, no attempt spent, no
// death counted, node.ReleaseText), polls no more, and exits; For later
// a new worker (a new id) polls the same peer in its place. The checker
// holds each released task to finishing in a later round, with no
// outcome in the round released (checkUnwanted).
type WorkerRelease struct {
	Span
	Worker int
	id     string
}

func (f *WorkerRelease) start(s *sim) {
	w := s.workers[f.Worker]
	if w.dead || w.down || w.stalled || w.busy {
		return
	}
	f.id = w.id
	s.chk.workerStops++
	jobs := w.jobs
	w.jobs, w.running = nil, 0
	for _, j := range jobs {
		j.out = shard.Outcome{Lost: true, Error: "the worker is stopping"}
		w.send(s, j)
	}
	w.dead, w.silent, w.polled = true, s.now, s.now
}

func (f *WorkerRelease) stop(s *sim) {
	if f.id != "" {
		s.workers[f.Worker] = s.addWorker(s.workers[f.Worker].node)
	}
}

func (f *WorkerRelease) String() string {
	return fmt.Sprintf("worker slot %d stops at %v, releasing its leases, replaced %v later", f.Worker, f.At, f.For)
}

// released records that hub h took a release of run r (its task runs
// again in a later round, elsewhere or there).
func (c *checker) released(h *simHub, r node.Run) {
	if c.handedBack == nil {
		c.handedBack = map[shard.TaskID][]unwantedRun{}
	}
	c.handedBack[r.Task] = append(c.handedBack[r.Task], unwantedRun{node: h.nd.idx, round: r.Round})
	c.workerReleased++
}

// WorkerHang makes the handlers of worker slot Worker hang for For (the
// "hang" fault kind: a handler stuck in a call that ignores its
// cancellation), past the lease deadline and the lease expiry: the worker
// heartbeats (alive to the hub) and polls while it has a free slot, what
// it runs finishes only once the hang ends (the hub timed the leases out
// meanwhile: the late reports are refused), and with its slots full the
// copies of broadcasts pinned to it wait in the hub's queue, no other
// worker may take them, until their leases expire: the hub hands them
// back (node.QueuedExpired), unless the owner's expiry aborted them first.
type WorkerHang struct {
	Span
	Worker int
	w      *simWorker
}

func (f *WorkerHang) start(s *sim) {
	w := s.workers[f.Worker]
	if w.dead || w.down || w.hung {
		return
	}
	f.w = w
	w.hung = true
	s.chk.workerHangs++
}

func (f *WorkerHang) stop(s *sim) {
	w := f.w
	if w == nil || !w.hung {
		return // dead, or restarted (what hung vanished)
	}
	w.hung = false
	hangs := w.hangs
	w.hangs = nil
	for _, j := range hangs {
		w.finish(s, j)
	}
}

func (f *WorkerHang) String() string {
	return fmt.Sprintf("worker slot %d hangs at %v for %v", f.Worker, f.At, f.For)
}

// hangFaults draws the "hang" fault: one worker's handlers hang for 15-18
// s (past the 10 s timeouts and 2 s grace of the workers workload's
// leases), from a generator of its own.
func (s *sim) hangFaults(window time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x68616e67))
	at := 100*time.Millisecond + time.Duration(rng.Int64N(int64(window*6/10)))
	d := 15*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
	return []Fault{&WorkerHang{Span: Span{At: at, For: d}, Worker: rng.IntN(len(s.workers))}}
}
