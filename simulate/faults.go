package simulate

import (
	"fmt"
	"slices"
	"time"
)

// Fault is one injected fault: it starts at At and heals For later. The
// values are small and printable, so a report can list what happened.
type Fault interface {
	// Window returns when the fault starts and how long it lasts.
	Window() (at, dur time.Duration)
	start(s *sim)
	stop(s *sim)
	String() string
}

// Span is the time window of a fault.
type Span struct {
	At  time.Duration // start, virtual time
	For time.Duration // duration
}

// Window implements Fault.
func (w Span) Window() (time.Duration, time.Duration) { return w.At, w.For }

// Partition cuts every link between the two sides; the client is on side 0.
// A one-way partition cuts only the messages from side 1 to side 0 (a
// firewall rule in one direction, a broken return route): side 1 hears
// side 0 but is not heard.
type Partition struct {
	Span
	Sides  [2][]int // node indexes
	OneWay bool
}

func (f *Partition) start(s *sim) { f.set(s, true) }
func (f *Partition) stop(s *sim)  { f.set(s, false) }
func (f *Partition) set(s *sim, cut bool) {
	a := append(slices.Clone(f.Sides[0]), s.net.client())
	if f.OneWay {
		s.net.cutFrom(f.Sides[1], a, cut)
		return
	}
	s.net.isolate(a, f.Sides[1], cut)
}
func (f *Partition) String() string {
	if f.OneWay {
		return fmt.Sprintf("partition %v<-%v one-way (only %v is heard) at %v for %v", f.Sides[0], f.Sides[1], f.Sides[0], f.At, f.For)
	}
	return fmt.Sprintf("partition %v|%v at %v for %v", f.Sides[0], f.Sides[1], f.At, f.For)
}

// Slow makes one node slow for a while, as an overloaded or degraded host
// is: its handlers take Factor times as long (those started meanwhile) and
// every message to or from it takes Delay more.
type Slow struct {
	Span
	Node   int
	Factor int
	Delay  time.Duration
}

func (f *Slow) start(s *sim) {
	nd := s.nodes[f.Node]
	nd.slowFactor = f.Factor
	s.net.slow[f.Node] = f.Delay
}
func (f *Slow) stop(s *sim) {
	s.nodes[f.Node].slowFactor = 0
	s.net.slow[f.Node] = 0
}
func (f *Slow) String() string {
	return fmt.Sprintf("slow n%d handlers x%d messages +%v at %v for %v", f.Node, f.Factor, f.Delay, f.At, f.For)
}

// Crash kills a node (kill -9; with LoseUnsynced its disk drops what was
// not synced) and restarts it from its disk For later. Graceful stops
// (churn: leave, then rejoin) are crashes without LoseUnsynced, and
// drain first, as needled does on SIGTERM: the node stops once Drained,
// or after drainTimeout (virtual), and stays down For from then.
type Crash struct {
	Span
	Node         int
	LoseUnsynced bool
	skipped      bool // the node was already down
	draining     bool // a graceful stop waiting for Drained
	restartDue   bool // the span ended while the node still drained
}

// drainTimeout bounds a graceful stop's drain, as needled's
// --drain-timeout (default 30 s) does.
const drainTimeout = 30 * time.Second

func (f *Crash) start(s *sim) {
	nd := s.nodes[f.Node]
	if f.skipped = !nd.up; f.skipped {
		return
	}
	if !f.LoseUnsynced {
		s.st.drains++
		f.draining = true
		nd.n.Drain()
		nd.queueDrain()
		f.awaitDrained(s, nd.gen, s.now+drainTimeout)
		return
	}
	s.st.crashes++
	nd.stop(f.LoseUnsynced)
}

// awaitDrained stops the node of generation gen once it is drained or at
// deadline, looking every 50 ms; the node restarts For after it stopped.
// A node that went down meanwhile (another fault) is left to that fault.
func (f *Crash) awaitDrained(s *sim, gen int, deadline time.Duration) {
	nd := s.nodes[f.Node]
	if !nd.up || nd.gen != gen {
		f.draining, f.skipped = false, true
		return
	}
	done := false
	if !nd.paused {
		done, _ = nd.n.Drained()
	}
	if !done && s.now < deadline {
		s.after(50*time.Millisecond, func() { f.awaitDrained(s, gen, deadline) })
		return
	}
	if !done {
		s.st.drainsTimedOut++
	}
	f.draining = false
	s.st.crashes++
	nd.stop(false)
	s.healAt = max(s.healAt, s.now+f.For)
	if f.restartDue {
		s.after(f.For, func() { f.stop(s) })
	}
}

func (f *Crash) stop(s *sim) {
	if f.skipped {
		return
	}
	if f.draining {
		f.restartDue = true // awaitDrained schedules the restart
		return
	}
	nd := s.nodes[f.Node]
	if s.cfg.has("skew") {
		// A restarted host's clock may be anywhere: up to 2 s either way.
		nd.clk.jump(s.now, time.Duration(s.rng.Int64N(int64(4*time.Second)))-2*time.Second)
	}
	s.st.restarts++
	nd.restart()
}
func (f *Crash) String() string {
	kind := "stop"
	if f.LoseUnsynced {
		kind = "crash"
	}
	return fmt.Sprintf("%s n%d at %v for %v", kind, f.Node, f.At, f.For)
}

// Leave takes a node out of the mesh for good, as when a host is
// decommissioned: it stops and never comes back, and For later an operator
// runs needle forget on every peer still up (gossip tells the rest). Its
// replicas move to the others, and tasks pinned to it fail once it is
// forgotten (shard.FailPinnedTo). Like an operator, it waits (second by
// second, up to a minute) for a healthy mesh, every partition with all
// its replicas on running peers: a partition whose only replica left
// would be lost, which no replicated store survives.
type Leave struct {
	Span
	Node    int
	waited  int
	skipped bool // the mesh never became healthy
}

func (f *Leave) start(s *sim) {
	if !s.fullyReplicated() {
		if f.waited++; f.waited > 60 {
			f.skipped = true
			return
		}
		s.healAt = max(s.healAt, s.now+time.Second+f.For)
		s.after(time.Second, func() { f.start(s) })
		return
	}
	nd := s.nodes[f.Node]
	nd.left = true
	s.st.crashes++
	nd.stop(false)
	f.At = s.now
	s.healAt = max(s.healAt, s.now+f.For)
	s.after(f.For, func() {
		for _, o := range s.nodes {
			if o.up && !o.paused {
				o.n.Forget(nd.id)
				o.queueDrain()
			}
		}
	})
}

// stop does nothing: start schedules the forget once the node has left.
func (f *Leave) stop(*sim) {}

func (f *Leave) String() string {
	if f.skipped {
		return fmt.Sprintf("leave n%d skipped: the mesh was not healthy for a minute", f.Node)
	}
	return fmt.Sprintf("leave n%d at %v, forgotten %v later", f.Node, f.At, f.For)
}

// Join brings a node into the mesh late, with an empty disk, as when a
// host is added to a running cluster: the ring takes it in, replicas move
// to it, and it steals work. It was never started before (newSim stops
// it at time 0, before it did anything, and nothing restarts it early).
type Join struct {
	Span
	Node int
}

func (f *Join) start(s *sim) {
	nd := s.nodes[f.Node]
	nd.joining = false
	nd.restart()
}
func (f *Join) stop(*sim)      {}
func (f *Join) String() string { return fmt.Sprintf("join n%d at %v", f.Node, f.At) }

// Clog degrades every link: drop and duplicate with a probability, and
// reorder by up to Reorder of extra delay.
type Clog struct {
	Span
	Drop, Dup float64
	Reorder   time.Duration
}

func (f *Clog) start(s *sim) {
	s.net.drop, s.net.dup, s.net.reorder = max(s.net.drop, f.Drop), max(s.net.dup, f.Dup), max(s.net.reorder, f.Reorder)
}
func (f *Clog) stop(s *sim) {
	if f.Drop > 0 {
		s.net.drop = 0
	}
	if f.Dup > 0 {
		s.net.dup = 0
	}
	if f.Reorder > 0 {
		s.net.reorder = 0
	}
}
func (f *Clog) String() string {
	return fmt.Sprintf("clog drop=%.2f dup=%.2f reorder=%v at %v for %v", f.Drop, f.Dup, f.Reorder, f.At, f.For)
}

// Pause stops a node (SIGSTOP, a long GC, a VM migration) and resumes it.
type Pause struct {
	Span
	Node    int
	skipped bool
}

func (f *Pause) start(s *sim) {
	f.skipped = !s.nodes[f.Node].pause()
	if !f.skipped {
		s.st.pauses++
	}
}
func (f *Pause) stop(s *sim) {
	if !f.skipped {
		s.nodes[f.Node].resume()
	}
}
func (f *Pause) String() string { return fmt.Sprintf("pause n%d at %v for %v", f.Node, f.At, f.For) }

// SkewKind is how a Skew bends a node's clock.
type SkewKind uint8

// Skew kinds.
const (
	Linear   SkewKind = iota + 1 // runs fast or slow by PPM
	Step                         // jumps forward by Step at the start
	Periodic                     // alternates +PPM and -PPM every Period/2
)

// Skew bends one node's clock for a while; a Step stays.
type Skew struct {
	Span
	Node   int
	Kind   SkewKind
	PPM    int64
	Step   time.Duration
	Period time.Duration
	on     bool
}

func (f *Skew) start(s *sim) {
	f.on = true
	clk := &s.nodes[f.Node].clk
	switch f.Kind {
	case Linear:
		clk.setRate(s.now, f.PPM)
	case Step:
		clk.jump(s.now, f.Step)
	case Periodic:
		f.flip(s, f.PPM)
	}
	s.nodes[f.Node].rescheduleWake() // its deadline comes at another virtual time
}

func (f *Skew) flip(s *sim, ppm int64) {
	if !f.on {
		return
	}
	s.nodes[f.Node].clk.setRate(s.now, ppm)
	s.nodes[f.Node].rescheduleWake()
	s.after(f.Period/2, func() { f.flip(s, -ppm) })
}

func (f *Skew) stop(s *sim) {
	f.on = false
	s.nodes[f.Node].clk.setRate(s.now, 0)
	s.nodes[f.Node].rescheduleWake()
}
func (f *Skew) String() string {
	switch f.Kind {
	case Linear:
		return fmt.Sprintf("skew n%d linear %+dppm at %v for %v", f.Node, f.PPM, f.At, f.For)
	case Step:
		return fmt.Sprintf("skew n%d step %+v at %v", f.Node, f.Step, f.At)
	}
	return fmt.Sprintf("skew n%d periodic ±%dppm/%v at %v for %v", f.Node, f.PPM, f.Period, f.At, f.For)
}
