package simulate

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/ring"
)

// sim is one run: the virtual clock, the event queue, the one random
// source, the nodes, the network, the client and the checker.
type sim struct {
	// digestBuf is the encoding buffer the replica checks reuse (digest).
	digestBuf []byte
	// runBuf is hashRun's buffer.
	runBuf []byte
	// partSetsNext is the node the next periodic checkPartSets starts at.
	partSetsNext int
	cfg          Config
	// initial is every peer's initial membership under StartTogether.
	initial []node.PeerAddrs
	rng     *rand.Rand
	q       eventQueue
	// soon are the events scheduled for now, in order, from soonHead on
	// (at).
	soon     []event
	soonHead int
	seq      uint64
	now      time.Duration // virtual time since the start
	// warmKinds is the network's message counts when --warmup ended,
	// warmWall the wall clock then (reported only, as Run's wall).
	warmKinds [3]uint64
	warmWall  time.Time

	forgerGone bool // the forge fault ended and forgot its host
	// replicaPairs counts the replica states checkReplicas compared
	// against another replica at the same applied index (invariant 5).
	replicaPairs int
	replicaNext  int // the partition the next periodic replica check covers (see periodicReplicas)
	// replicaEntries is entries when the last periodic check of a large
	// run ran (see periodicReplicas).
	replicaEntries uint64
	nodes          []*simNode
	freeWake       *wake // wakeups fired, to reuse (scheduleWake)
	byID           map[string]int
	deadKnown      time.Duration   // when every running node held the killed one dead (Config.Kill)
	killAt         time.Duration   // when the kill ran (Config.Kill, later with KillVoters; 0: not yet)
	victims        []*simNode      // the nodes a KillVoters kill stopped
	victimPart     int             // the partition whose voters they were
	owners         []int           // partition -> node index that serves it (see route)
	rings          *node.RingCache // ring builds shared by the nodes (pure: no effect on results)
	net            *network
	cl             *client
	chk            *checker
	wl             *workload
	faults         []Fault
	healAt         time.Duration // when the last fault heals
	// formerHeld holds, per task seen RUNNING under a former run of its
	// holder's peer, since when (checkFormerHolders).
	formerHeld map[string]formerSince
	flap       []leadTrack // each partition's serving leader (checkFlap)
	starve     []starveRec // each node's grants of surplus taken while it has work of its own (starve.go)
	hash       hashLog     // over persisted entries and runs, in order
	viol       *Violation
	// durCheck is set by a restart: invariant 1 is checked (every second)
	// until every acknowledged group was found on a serving node.
	durCheck bool
	st       stats
	// entries counts the event entries the partitions' logs took;
	// entryTop is the highest index counted per partition (hashPersist).
	entries  uint64
	entryTop map[uint32]uint64
	// External workers (Config.Workers; workers.go): every worker started,
	// the current one of each slot (faults name slots), and a counter for
	// their ids.
	allWorkers, workers []*simWorker
	workerSeq           int
	workersRepeat       bool            // every report is sent twice (WorkerRepeat)
	poisons             []*WorkerPoison // the poison faults started (workerquarantine.go)
}

// stats are the run's counters.
type stats struct {
	runs, syncs, crashes, restarts, pauses, refusedMsgs uint64
	drains, drainsTimedOut                              uint64 // graceful stops (churn), and those the drain timeout cut short
	wakeups                                             uint64 // Ticks at a node's deadline (scheduleWake)
}

// Run runs one simulation. The error is for a bad Config or a setup
// failure; broken invariants are in Report.Violations.
func Run(cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	wall := time.Now() // reported only; the run never reads real time
	s, err := newSim(cfg.withDefaults())
	if err != nil {
		return Report{}, err
	}
	s.loop()
	return s.conclude(wall), nil
}

// conclude runs the checks at the end of a run and reports it; wall is
// when the run started (reported only).
func (s *sim) conclude(wall time.Time) Report {
	if s.viol == nil {
		s.chk.recheckRuns(true)
	}
	if s.viol == nil {
		s.chk.final()
	}
	if s.viol == nil {
		s.checkReplicas(allParts(s.cfg.Partitions), true)
	}
	if s.viol == nil {
		s.checkSlots()
	}
	if s.viol == nil {
		s.checkPartSets(true)
	}
	if s.viol == nil {
		s.chk.checkNotify()
	}
	held, extra := s.heldCounts()
	if s.viol == nil {
		s.checkHeld(extra)
	}
	rep := s.report()
	rep.HeldMaxOverMean, _ = balance(held)
	rep.HeldExtra = extra
	if len(held) > 0 {
		rep.HeldMax = slices.Max(held)
	}
	rep.WallSeconds = time.Since(wall).Seconds()
	if !s.warmWall.IsZero() {
		rep.WallAfterWarmup = time.Since(s.warmWall).Seconds()
		rep.SimAfterWarmup = (s.now - s.cfg.Warmup).Seconds()
	}
	if rep.Tasks > 0 {
		rep.CPUPerTaskUS = rep.WallSeconds * 1e6 / float64(rep.Tasks)
	}
	return rep
}

func newSim(cfg Config) (*sim, error) {
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e6565646c65)), byID: map[string]int{}, formerHeld: map[string]formerSince{},
		rings: node.NewRingCache(), entryTop: map[uint32]uint64{}}
	if err := s.placeGroups(); err != nil {
		return nil, err
	}
	s.net = newNetwork(s, cfg.Peers+1)
	s.chk = newChecker(s)
	s.chk.unsafe = newUnsafeLoss(cfg)
	s.wl = newWorkload(cfg, s.rng)
	if cfg.Workers > 0 {
		s.wl.external(cfg.Workload == "workers")
	}
	s.cl = newClient(s, s.wl)
	ids := make([]string, cfg.Peers)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i)
	}
	if cfg.Start == StartTogether {
		for _, id := range ids {
			s.initial = append(s.initial, node.PeerAddrs{ID: id, Addrs: []string{"/sim/" + id}})
		}
		// In id order, as an operator may list them in any: each node then
		// takes the list as it is (startTogether).
		slices.SortFunc(s.initial, func(a, b node.PeerAddrs) int { return strings.Compare(a.ID, b.ID) })
	}
	// No collection while the nodes are built: what they allocate stays
	// (their members, partitions and rings), and at 1,000 peers the
	// collector marked the growing heap over and over for nothing.
	gc := debug.SetGCPercent(-1)
	for i := range cfg.Peers {
		// One string per id, shared by the initial membership and the
		// node: a node's member map compares the sender's id with its
		// key, at once when both are the same string.
		nd := &simNode{s: s, idx: i, id: ids[i], log: newDisk(), lateSeed: s.rng.Uint64()}
		s.nodes = append(s.nodes, nd)
		s.byID[nd.id] = i
		if err := nd.start(); err != nil {
			debug.SetGCPercent(gc)
			return nil, err
		}
	}
	debug.SetGCPercent(gc)
	s.startWorkers()
	s.faults, s.healAt = s.planFaults()
	for _, f := range s.faults {
		if j, ok := f.(*Join); ok {
			// Not part of the mesh until it joins: stopped before its
			// first event, with an empty disk.
			nd := s.nodes[j.Node]
			nd.stop(false)
			nd.log, nd.joining = newDisk(), true
		}
	}
	if cfg.Warmup > 0 {
		s.wl.delay(cfg.Warmup)
		s.at(cfg.Warmup, func() {
			s.warmKinds = s.net.kinds
			s.warmWall = time.Now()
			s.cl.start(s.wl.sequential)
		})
	} else {
		s.cl.start(s.wl.sequential)
	}
	s.after(time.Second, s.periodic)
	if cfg.Kill > 0 {
		s.at(cfg.Kill, s.kill)
	}
	if cfg.UnsafeRecover > 0 && cfg.KillSelect == KillLast { // (KillVoters: after the kill found its victims)
		s.at(cfg.Kill+cfg.UnsafeRecover, s.unsafeRecover)
		s.healAt = max(s.healAt, cfg.Kill+cfg.UnsafeRecover)
	}
	return s, nil
}

// placeGroups computes which node serves each partition: the ring's
// preferred owners with every member live.
func (s *sim) placeGroups() error {
	members := make([]ring.PeerID, s.cfg.Peers)
	for i := range members {
		members[i] = ring.PeerID(fmt.Sprintf("n%d", i))
	}
	r, err := ring.New(ring.Config{Partitions: s.cfg.Partitions, Replicas: min(3, s.cfg.Peers), Load: 1.25, Placement: s.cfg.Placement}, 1, members)
	if err != nil {
		return fmt.Errorf("simulate: ring: %w", err)
	}
	s.owners = make([]int, s.cfg.Partitions)
	for p, o := range r.PreferredOwners(func(ring.PeerID) bool { return true }) {
		fmt.Sscanf(string(o), "n%d", &s.owners[p])
	}
	return nil
}

// loop runs events until the run is done, broken, or out of time. A panic
// in the core is a broken invariant: it is reported with the seed.
func (s *sim) loop() {
	defer func() {
		if r := recover(); r != nil {
			s.fail(invPanic, fmt.Sprintf("%v\n%s", r, stackHead()))
		}
	}()
	for s.viol == nil && s.pending() > 0 {
		ev := s.next()
		if ev.at > s.cfg.MaxSimTime {
			s.now = s.cfg.MaxSimTime
			if s.wl.idle && s.settled() {
				return // an idle run cut short by --max-sim-time: nothing waits
			}
			msg := fmt.Sprintf("max sim time %v reached with %d tasks unfinished, client idle=%v", s.cfg.MaxSimTime, s.chk.outstanding, s.cl.idle())
			if p, ok := s.chk.unserved(); ok {
				msg += "; an acknowledged group's " + s.describePartition(p)
			}
			s.fail(invLiveness, msg)
			return
		}
		s.now = ev.at
		ev.fn()
		if s.done() {
			return
		}
	}
}

// done reports whether the run can stop: faults healed, every node up and
// running (but those that left) with no Ready left to drain (a node that
// just stepped a grant has runs to start: the end-of-run checks count
// them), the client idle and every task terminal.
func (s *sim) done() bool {
	return !(s.wl.idle && s.now < s.cfg.Warmup+s.wl.span) && s.settled()
}

// settled is done but for the idle workload's span: an idle run that
// --max-sim-time ends before its span is over stops there, settled, and
// breaks no liveness.
func (s *sim) settled() bool {
	if s.now < s.healAt || s.now < s.cfg.Warmup || !s.cl.idle() || s.chk.outstanding > 0 || s.durCheck {
		return false
	}
	for _, nd := range s.nodes {
		if (!nd.up || nd.paused) && !nd.left || nd.drainQueued {
			return false
		}
	}
	return true
}

// periodic runs the sampled checks every virtual second.
func (s *sim) periodic() {
	if s.durCheck && s.chk.durable() {
		s.durCheck = false
	}
	s.chk.observeSurvivors()
	s.chk.recheckRewound()
	s.chk.pollSchedules()
	s.chk.recheckRuns(false)
	s.chk.checkTicks()
	s.checkPartSets(false)
	s.checkFlap()
	for _, nd := range s.nodes {
		s.checkIdentity(nd)
	}
	s.chk.sample(16)
	s.chk.liveness()
	s.checkFormerHolders()
	if s.now >= s.healAt && int(s.now/time.Second)%replicaCheckEvery == 0 {
		s.checkReplicas(s.periodicReplicas(), false)
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(Progress{SimSeconds: s.now.Seconds(), Tasks: s.chk.ntasks,
			Terminal: len(s.chk.terminal), Messages: s.net.sent})
	}
	s.after(time.Second, s.periodic)
}

// fail records the first violation; the loop stops after the current event.
func (s *sim) fail(inv, msg string) {
	if s.viol != nil {
		return
	}
	s.viol = &Violation{Seed: s.cfg.Seed, AtMS: ms(s.now), Invariant: inv, Message: msg}
}

func stackHead() string {
	lines := strings.Split(string(debug.Stack()), "\n")
	return strings.Join(lines[:min(len(lines), 40)], "\n")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
