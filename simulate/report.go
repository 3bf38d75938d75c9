package simulate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	raftpb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/wal"
)

// Violation is a broken invariant: the run stops at the first one.
type Violation struct {
	Seed      uint64  `json:"seed"`
	AtMS      float64 `json:"at_ms"`     // virtual time
	Invariant string  `json:"invariant"` // 1-lost, 2-outcome, 3-deps, 4-idempotent, 5-replicas, liveness, wal, panic
	Message   string  `json:"message"`
}

func (v Violation) String() string {
	return fmt.Sprintf("seed %d at %.3fs: invariant %s broken: %s", v.Seed, v.AtMS/1000, v.Invariant, v.Message)
}

// Report is the outcome of one run. Everything but WallSeconds is a
// function of the Config.
type Report struct {
	Seed       uint64      `json:"seed"`
	Options    string      `json:"options"`
	Violations []Violation `json:"violations"`
	// Lost counts tasks of acknowledged groups found missing.
	Lost int `json:"lost"`
	// LostUnsafe counts, with --unsafe-recover and --kill-count 2 or
	// --kill-select voters, tasks of acknowledged groups gone that only
	// the lost peers had held (lostunsafe.go): the loss unsafe recovery
	// allows, not a violation.
	LostUnsafe int `json:"lost_unsafe,omitempty"`
	// LostUnsafeSchedules counts the acknowledged schedules so gone.
	LostUnsafeSchedules int `json:"lost_unsafe_schedules,omitempty"`
	// LostTotal counts, with --unsafe-recover, tasks of acknowledged
	// groups whose partition no replica survived (every voter and learner
	// killed: nothing can recover it); LostTotalPartitions counts those
	// partitions. A total loss, not a violation.
	LostTotal           int `json:"lost_total,omitempty"`
	LostTotalPartitions int `json:"lost_total_partitions,omitempty"`
	// LostTotalSchedules counts the acknowledged schedules of those
	// partitions: they fire no more.
	LostTotalSchedules int `json:"lost_total_schedules,omitempty"`
	// Killed names, with --kill-select voters, the voters the kill
	// stopped, KilledPartition the partition they were the voters of
	// (its learner survives) and KilledAtMS when (virtual ms); Killed is
	// empty when no partition had a learner.
	Killed          []string `json:"killed,omitempty"`
	KilledPartition int      `json:"killed_partition,omitempty"`
	KilledAtMS      float64  `json:"killed_at_ms,omitempty"`
	// DoubleAccepted counts tasks whose terminal state or result changed,
	// or whose history holds two accepted outcomes for one round.
	DoubleAccepted int `json:"double_accepted"`
	// DuplicateExecutions sums, over tasks, the runs beyond the task's
	// finished attempts (at least one): work repeated because a lease was
	// lost (crash, pause, expiry), not retries the policy asked for.
	DuplicateExecutions int `json:"duplicate_executions"`
	// Steals counts runs on a node that did not serve the task's
	// partition at the time: tasks taken by a thief.
	Steals int `json:"steals"`
	// MakespanOverLB is w3's makespan over its lower bound; 0 otherwise.
	MakespanOverLB float64 `json:"makespan_over_lb"`
	// LatencyP50MS and LatencyP99MS are submit-to-terminal latencies of
	// tasks, virtual milliseconds.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	// Messages is every message the network carried (client included);
	// MessagesPerTask is Messages over Tasks.
	Messages        uint64  `json:"messages"`
	MessagesPerTask float64 `json:"messages_per_task"`
	// Traffic splits Messages into membership, Raft and task messages.
	Traffic Traffic `json:"traffic"`
	// Unlinked counts direct messages dropped because neither peer knew
	// the other's address (no connection: links.go), GossipLost gossip
	// that reached a peer before the gossip mesh took it in. Unreachable
	// counts the pairs of running peers, members of each other, that
	// still could not reach each other at the end of the run.
	Unlinked    uint64 `json:"unlinked"`
	GossipLost  uint64 `json:"gossip_lost"`
	Unreachable int    `json:"unreachable"`
	// Deaths counts the peers declared dead by the peers running at the
	// end (each declaration; restarted peers start from 0): with no faults
	// and no --kill, every one is false. DeadKnownAfter is, with --kill,
	// the seconds from the kill until every running peer held the killed
	// one dead (-1: never).
	Deaths         int     `json:"deaths"`
	DeadKnownAfter float64 `json:"dead_known_after_s,omitempty"`
	// RingMaxOverMean is the ring's balance: the most partitions one peer
	// is the preferred owner of, over the mean (all peers live).
	// LeadMaxOverMean and LeadMinOverMean are the same for the partitions
	// each up peer leads (Raft leader) at the end of the run.
	RingMaxOverMean float64 `json:"ring_max_over_mean"`
	LeadMaxOverMean float64 `json:"lead_max_over_mean"`
	LeadMinOverMean float64 `json:"lead_min_over_mean"`
	// HeldMax is the most partitions one up peer holds a replica of at
	// the end, HeldMaxOverMean that over the mean, and HeldExtra the
	// replicas held by peers their partition's latest configuration does
	// not name (removed, not left yet; see checkHeld).
	HeldMax         int     `json:"held_max"`
	HeldMaxOverMean float64 `json:"held_max_over_mean"`
	HeldExtra       int     `json:"held_extra"`
	Groups          int     `json:"groups"`
	Tasks           int     `json:"tasks"`
	Runs            uint64  `json:"runs"`
	// Refused counts handler outcomes the owner refused (stale round:
	// fencing) or could not take.
	Refused int `json:"refused"`
	Retries int `json:"client_retries"`
	// Rearmed counts task runs a committed retry (Node.Retry) re-armed:
	// a FAILED or CANCELED task made runnable again, each retry once.
	Rearmed  int    `json:"rearmed,omitempty"`
	Crashes  uint64 `json:"crashes"`
	Restarts uint64 `json:"restarts"`
	// Drains counts graceful stops (churn), which drain first; of them
	// DrainsTimedOut stopped at the drain timeout, not drained.
	Drains         uint64 `json:"drains"`
	DrainsTimedOut uint64 `json:"drains_timed_out"`
	Pauses         uint64 `json:"pauses"`
	Syncs          uint64 `json:"syncs"`
	// Entries counts the Raft entries holding events that the partitions'
	// logs took (each once, however many replicas persisted it; empty
	// and configuration entries aside); EntriesPerTask is Entries over
	// Tasks: batching puts many tasks' events in one entry.
	Entries        uint64  `json:"entries"`
	EntriesPerTask float64 `json:"entries_per_task"`
	// CPUPerTaskUS is the run's wall time per task, microseconds: the
	// simulator runs on one goroutine (its event-log hash on a second), so
	// it is the CPU a task costs the core (every peer's share, the
	// simulator's own aside).
	CPUPerTaskUS float64 `json:"cpu_us_per_task"`
	// Wakeups counts the nodes' Ticks at their deadlines
	// (Node.NextDeadline), inputs aside.
	Wakeups uint64 `json:"wakeups"`
	// ScheduleHours is the time schedules were live and not paused;
	// Firings the firing groups seen, OverlapSkips the ticks overlap
	// skipped.
	ScheduleHours float64  `json:"schedule_hours"`
	Firings       int      `json:"firings"`
	OverlapSkips  int      `json:"overlap_skips"`
	TicksChecked  int      `json:"ticks_checked"`    // ticks held to "at least once"
	Updates       int      `json:"schedule_updates"` // schedule updates acknowledged
	Faults        []string `json:"faults"`

	// PlacementChecks counts starts and accepted outcomes of constrained
	// tasks checked against their pin and labels; Broadcasts the
	// broadcast expansions checked.
	PlacementChecks int `json:"placement_checks,omitempty"`
	Broadcasts      int `json:"broadcasts,omitempty"`
	// LeftPinnedFailed counts tasks failed without running because the
	// peer they were pinned to left the mesh (each checked to be one).
	LeftPinnedFailed int `json:"left_pinned_failed,omitempty"`
	// External workers (Config.Workers): leases handed to workers, worker
	// deaths and stalls injected, reports accepted, repeats answered as
	// such, reports refused, and of those the late ones (on a lease the
	// hub had lost).
	WorkerLeases   int `json:"worker_leases,omitempty"`
	WorkerDeaths   int `json:"worker_deaths,omitempty"`
	WorkerStalls   int `json:"worker_stalls,omitempty"`
	WorkerAccepted int `json:"worker_accepted,omitempty"`
	WorkerRepeats  int `json:"worker_repeats,omitempty"`
	WorkerRefused  int `json:"worker_refused,omitempty"`
	WorkerLate     int `json:"worker_late_refused,omitempty"`
	// WorkerBusy counts the busy faults (a peer's workers poll no more);
	// WorkerUnwanted the runs hubs handed back because no worker there
	// asked for their handler (node.QueuedUnwanted), UnwantedDone the
	// tasks of them that ended in a later round, UnwantedElsewhere those
	// that ended on another peer.
	WorkerBusy        int `json:"worker_busy,omitempty"`
	WorkerUnwanted    int `json:"worker_unwanted,omitempty"`
	UnwantedDone      int `json:"worker_unwanted_done,omitempty"`
	UnwantedElsewhere int `json:"worker_unwanted_elsewhere,omitempty"`
	// WorkerExpired counts the runs hubs handed back past their lease's
	// expiry (node.QueuedExpired); their tasks count in UnwantedDone too.
	WorkerExpired int `json:"worker_expired,omitempty"`
	// The quarantine of tasks that crash their workers: tasks made to kill
	// their workers (the poison fault) and the workers they killed,
	// suspects handed to a worker alone, runs failed at the crash limit
	// and the tasks checked FAILED so at the end.
	Poisoned         int `json:"worker_poisoned,omitempty"`
	PoisonDeaths     int `json:"worker_poison_deaths,omitempty"`
	SuspectLeases    int `json:"worker_suspect_leases,omitempty"`
	CrashLimit       int `json:"worker_crash_limit,omitempty"`
	CrashLimitFailed int `json:"worker_crash_limit_failed,omitempty"`
	// WorkerRestarts counts the workers hubs saw restarted as another
	// instance, RestartBuried the leases they buried at once for them.
	WorkerRestarts int `json:"worker_restarts,omitempty"`
	RestartBuried  int `json:"worker_restart_buried,omitempty"`
	// WorkerStops counts the workers stopped gracefully, WorkerReleased
	// the leases they handed back (their tasks count in UnwantedDone).
	WorkerStops    int `json:"worker_stops,omitempty"`
	WorkerReleased int `json:"worker_released,omitempty"`
	WorkerHangs    int `json:"worker_hangs,omitempty"` // hang faults started
	// SimSeconds is the virtual time of the run; WallSeconds the real time.
	SimSeconds  float64 `json:"sim_seconds"`
	WallSeconds float64 `json:"wall_seconds"`
	// SimAfterWarmup and WallAfterWarmup are the virtual and real time
	// from the end of --warmup to the end of the run (0 without one): how
	// fast a formed mesh simulates, without the cost of forming it.
	SimAfterWarmup  float64 `json:"sim_seconds_after_warmup,omitempty"`
	WallAfterWarmup float64 `json:"wall_seconds_after_warmup,omitempty"`
	// Hash is FNV-64a over every persisted Raft entry and every Run, in
	// order: equal for equal Configs.
	Hash string `json:"hash"`

	// Webhooks counts the groups whose webhook reads delivered at the end
	// (a quarter of the generated groups carry one; see notify.go).
	Webhooks int `json:"webhooks"`
	// ReplicaChecks counts the replica states compared with another
	// replica at the same applied index (invariant 5).
	ReplicaChecks int `json:"replica_checks"`
}

// Failed reports whether an invariant broke.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }

func (s *sim) report() Report {
	c := s.chk
	r := Report{
		Seed: s.cfg.Seed, Options: s.cfg.String(), Violations: []Violation{}, Lost: c.lost,
		DoubleAccepted: c.doubleAcc, DuplicateExecutions: c.dupExec, Messages: s.net.sent, Steals: c.steals,
		Groups: len(c.order), Tasks: c.ntasks, Runs: s.st.runs, Refused: c.stale, Retries: s.cl.retries, Rearmed: c.rearmed,
		Crashes: s.st.crashes, Restarts: s.st.restarts, Drains: s.st.drains, DrainsTimedOut: s.st.drainsTimedOut, Pauses: s.st.pauses, Syncs: s.st.syncs, Wakeups: s.st.wakeups,
		ScheduleHours: c.scheduleHours(), Firings: c.firings, OverlapSkips: c.skips, TicksChecked: c.ticksOK, Updates: c.schedUpdates(),
		SimSeconds: s.now.Seconds(), Hash: fmt.Sprintf("%016x", s.hash.sum()),
		LostUnsafe: c.unsafeTasks(), LostUnsafeSchedules: c.unsafeScheds(),
	}
	r.LostTotal, r.LostTotalPartitions, r.LostTotalSchedules = c.totalTasks()
	if s.cfg.KillSelect == KillVoters && s.victims != nil {
		for _, nd := range s.victims {
			r.Killed = append(r.Killed, nd.id)
		}
		r.KilledPartition, r.KilledAtMS = s.victimPart, ms(s.killAt)
	}
	r.Traffic = s.traffic()
	r.Unlinked, r.GossipLost, r.Unreachable = s.net.links.unlinked, s.net.links.gossipLost, s.unreachable()
	for _, nd := range s.nodes {
		if nd.up {
			r.Deaths += nd.n.Deaths()
		}
	}
	if s.cfg.Kill > 0 {
		r.DeadKnownAfter = -1
		if s.deadKnown > 0 {
			r.DeadKnownAfter = (s.deadKnown - s.killAt).Seconds()
		}
	}
	r.Webhooks = c.hooksDelivered
	r.ReplicaChecks = s.replicaPairs
	r.PlacementChecks, r.Broadcasts, r.LeftPinnedFailed = c.constrained, c.broadcasts, c.leftPinned
	r.WorkerLeases, r.WorkerDeaths, r.WorkerStalls = c.workerLeases, c.workerDeaths, c.workerStalls
	r.WorkerAccepted, r.WorkerRepeats, r.WorkerRefused, r.WorkerLate = c.workerAccepted, c.workerRepeats, c.workerRefused, c.workerLate
	r.WorkerBusy, r.WorkerUnwanted, r.UnwantedDone, r.UnwantedElsewhere = c.workerBusy, c.workerUnwanted, c.unwantedDone, c.unwantedElsewhere
	r.WorkerExpired, r.WorkerRestarts, r.RestartBuried = c.workerExpired, c.workerRestarts, c.restartBuried
	r.WorkerStops, r.WorkerReleased, r.WorkerHangs = c.workerStops, c.workerReleased, c.workerHangs
	r.Poisoned, r.PoisonDeaths, r.SuspectLeases, r.CrashLimit, r.CrashLimitFailed = c.poisoned, c.poisonDeaths, c.suspectLeases, c.crashLimit, c.crashLimitFailed
	if s.viol != nil {
		r.Violations = append(r.Violations, *s.viol)
	}
	for _, f := range s.faults {
		r.Faults = append(r.Faults, f.String())
	}
	lat := slices.Clone(c.latencies)
	slices.Sort(lat)
	r.LatencyP50MS, r.LatencyP99MS = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99))
	r.Entries = s.entries
	if r.Tasks > 0 {
		r.MessagesPerTask = float64(r.Messages) / float64(r.Tasks)
		r.EntriesPerTask = float64(r.Entries) / float64(r.Tasks)
	}
	owned := make([]int, len(s.nodes))
	for _, o := range s.owners {
		owned[o]++
	}
	r.RingMaxOverMean, _ = balance(owned)
	led := []int{}
	for _, nd := range s.nodes {
		if nd.up {
			led = append(led, len(nd.n.Leading()))
		}
	}
	r.LeadMaxOverMean, r.LeadMinOverMean = balance(led)
	if s.wl.lb > 0 && c.outstanding == 0 && c.firstSubmit >= 0 {
		r.MakespanOverLB = float64(c.lastDone-c.firstSubmit) / float64(s.wl.lb)
	}
	return r
}

// balance returns the largest and the smallest count over the mean.
func balance(counts []int) (maxOverMean, minOverMean float64) {
	if len(counts) == 0 {
		return 0, 0
	}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	if sum == 0 {
		return 0, 0
	}
	mean := float64(sum) / float64(len(counts))
	return float64(slices.Max(counts)) / mean, float64(slices.Min(counts)) / mean
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// hashPersist feeds one persisted batch to the event-log hash.
func (s *sim) hashPersist(node int, b *wal.Batch) {
	for _, u := range b.Updates {
		for _, e := range u.Entries {
			if e.Index > s.entryTop[u.Partition] {
				s.entryTop[u.Partition] = e.Index
				if e.Type == raftpb.EntryNormal && len(e.Data) > 0 {
					s.entries++
				}
			}
			s.hash.header(uint64(node), uint64(u.Partition), e.Index, e.Term)
			s.hash.shared(e.Data) // Raft's: never modified
		}
	}
}

// hashRun feeds one handler start to the event-log hash: the bytes
// fmt.Fprintf(hash, "run %d %s %d %d\n", node, r.Task, r.Round, s.now)
// wrote, made in a buffer the sim keeps.
func (s *sim) hashRun(node int, r node.Run) {
	b := append(s.runBuf[:0], "run "...)
	b = strconv.AppendInt(b, int64(node), 10)
	b = append(b, ' ')
	b = append(b, r.Task...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(r.Round), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(s.now), 10)
	b = append(b, '\n')
	s.hash.copied(b)
	s.runBuf = b
}

// Text renders the report for people, one field per line.
func (r *Report) Text() string {
	var b strings.Builder
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	fmt.Fprintf(&b, "groups %d tasks %d runs %d refused %d client_retries %d rearmed %d\n", r.Groups, r.Tasks, r.Runs, r.Refused, r.Retries, r.Rearmed)
	fmt.Fprintf(&b, "lost %d double_accepted %d duplicate_executions %d steals %d\n", r.Lost, r.DoubleAccepted, r.DuplicateExecutions, r.Steals)
	if r.LostUnsafe > 0 || r.LostUnsafeSchedules > 0 {
		fmt.Fprintf(&b, "lost_unsafe %d lost_unsafe_schedules %d (acknowledged, held by the lost peers only)\n", r.LostUnsafe, r.LostUnsafeSchedules)
	}
	if r.LostTotal > 0 || r.LostTotalPartitions > 0 {
		fmt.Fprintf(&b, "lost_total %d on %d partitions, schedules %d (acknowledged, every replica lost)\n", r.LostTotal, r.LostTotalPartitions, r.LostTotalSchedules)
	}
	if r.KilledAtMS > 0 {
		fmt.Fprintf(&b, "killed %s at %.3fs: the voters of partition %d, whose learner survives\n", strings.Join(r.Killed, ","), r.KilledAtMS/1000, r.KilledPartition)
	}
	if r.PlacementChecks > 0 || r.Broadcasts > 0 || r.LeftPinnedFailed > 0 {
		fmt.Fprintf(&b, "placement_checks %d broadcasts %d left_pinned_failed %d\n", r.PlacementChecks, r.Broadcasts, r.LeftPinnedFailed)
	}
	if r.WorkerLeases > 0 {
		fmt.Fprintf(&b, "worker_leases %d deaths %d stalls %d accepted %d repeats %d refused %d (late %d)\n", r.WorkerLeases,
			r.WorkerDeaths, r.WorkerStalls, r.WorkerAccepted, r.WorkerRepeats, r.WorkerRefused, r.WorkerLate)
	}
	if r.WorkerBusy > 0 || r.WorkerUnwanted > 0 || r.WorkerExpired > 0 || r.WorkerReleased > 0 {
		fmt.Fprintf(&b, "worker_busy %d unwanted %d expired %d (done later %d, elsewhere %d)\n", r.WorkerBusy, r.WorkerUnwanted, r.WorkerExpired,
			r.UnwantedDone, r.UnwantedElsewhere)
	}
	if r.Poisoned > 0 || r.SuspectLeases > 0 || r.CrashLimit > 0 {
		fmt.Fprintf(&b, "worker_poisoned %d (deaths %d) suspects_alone %d crash_limit %d (failed %d)\n", r.Poisoned, r.PoisonDeaths,
			r.SuspectLeases, r.CrashLimit, r.CrashLimitFailed)
	}
	if r.WorkerRestarts > 0 || r.WorkerStops > 0 {
		fmt.Fprintf(&b, "worker_restarts %d (leases buried at once %d) stops %d (released %d)\n", r.WorkerRestarts, r.RestartBuried,
			r.WorkerStops, r.WorkerReleased)
	}
	fmt.Fprintf(&b, "latency p50 %.1f ms p99 %.1f ms", r.LatencyP50MS, r.LatencyP99MS)
	if r.MakespanOverLB > 0 {
		fmt.Fprintf(&b, " makespan/LB %.2f", r.MakespanOverLB)
	}
	if r.ScheduleHours > 0 {
		fmt.Fprintf(&b, "\nschedule_hours %.2f firings %d overlap_skips %d ticks_checked %d updates %d", r.ScheduleHours, r.Firings, r.OverlapSkips, r.TicksChecked, r.Updates)
	}
	fmt.Fprintf(&b, "\nmessages %d (%.1f per task) syncs %d crashes %d restarts %d drains %d (timed out %d) pauses %d wakeups %d\n", r.Messages, r.MessagesPerTask, r.Syncs, r.Crashes, r.Restarts, r.Drains, r.DrainsTimedOut, r.Pauses, r.Wakeups)
	fmt.Fprintf(&b, "messages per peer per second %.2f: membership %.2f, raft %.2f, task %.2f\n", r.Traffic.PerPeerSecond,
		r.Traffic.MembershipPerPeerSecond, r.Traffic.RaftPerPeerSecond, r.Traffic.PerPeerSecond-r.Traffic.MembershipPerPeerSecond-r.Traffic.RaftPerPeerSecond)
	if a := r.Traffic.AfterWarmup; a != nil {
		fmt.Fprintf(&b, "after the warmup %.2f: membership %.2f, raft %.2f, task %.2f\n", a.All, a.Membership, a.Raft, a.All-a.Membership-a.Raft)
	}
	fmt.Fprintf(&b, "membership: deaths %d unlinked %d gossip_lost %d unreachable %d", r.Deaths, r.Unlinked, r.GossipLost, r.Unreachable)
	if r.DeadKnownAfter != 0 {
		fmt.Fprintf(&b, " dead_known_after %.2fs", r.DeadKnownAfter)
	}
	fmt.Fprintf(&b, "\npartitions owned max/mean: ring %.2f, led at the end %.2f (min/mean %.2f)\n", r.RingMaxOverMean, r.LeadMaxOverMean, r.LeadMinOverMean)
	fmt.Fprintf(&b, "partitions held at the end: max %d (max/mean %.2f), %d replicas no configuration names\n", r.HeldMax, r.HeldMaxOverMean, r.HeldExtra)
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "fault %s\n", f)
	}
	fmt.Fprintf(&b, "entries %d (%.2f per task) cpu %.1f us per task\n", r.Entries, r.EntriesPerTask, r.CPUPerTaskUS)
	fmt.Fprintf(&b, "sim %.2fs wall %.3fs (%.0fx) hash %s\n", r.SimSeconds, r.WallSeconds, r.SimSeconds/max(r.WallSeconds, 1e-9), r.Hash)
	if r.WallAfterWarmup > 0 {
		fmt.Fprintf(&b, "after the warmup: sim %.2fs wall %.3fs (%.1fx)\n", r.SimAfterWarmup, r.WallAfterWarmup, r.SimAfterWarmup/r.WallAfterWarmup)
	}
	return b.String()
}

// Totals sums the reports of many seeds.
type Totals struct {
	Seeds               int      `json:"seeds"`
	FailingSeeds        []uint64 `json:"failing_seeds"`
	Violations          int      `json:"violations"`
	Lost                int      `json:"lost"`
	LostUnsafe          int      `json:"lost_unsafe,omitempty"`
	LostUnsafeSchedules int      `json:"lost_unsafe_schedules,omitempty"`
	LostTotal           int      `json:"lost_total,omitempty"`
	LostTotalPartitions int      `json:"lost_total_partitions,omitempty"`
	LostTotalSchedules  int      `json:"lost_total_schedules,omitempty"`
	KillsLearner        int      `json:"kills_learner,omitempty"` // seeds whose --kill-select voters kill found a learner
	DoubleAccepted      int      `json:"double_accepted"`
	DuplicateExecutions int      `json:"duplicate_executions"`
	Steals              int      `json:"steals"`
	Messages            uint64   `json:"messages"`
	Tasks               int      `json:"tasks"`
	LatencyP50MS        float64  `json:"latency_p50_ms"` // the worst seed's
	LatencyP99MS        float64  `json:"latency_p99_ms"` // the worst seed's
	SimSeconds          float64  `json:"sim_seconds"`
	ScheduleHours       float64  `json:"schedule_hours"`
	WallSeconds         float64  `json:"wall_seconds"` // sum of the runs' wall times
}

// Add folds one report in.
func (t *Totals) Add(r *Report) {
	t.Seeds++
	if r.Failed() {
		t.FailingSeeds = append(t.FailingSeeds, r.Seed)
	}
	t.Violations += len(r.Violations)
	t.Lost += r.Lost
	t.LostUnsafe += r.LostUnsafe
	t.LostUnsafeSchedules += r.LostUnsafeSchedules
	t.LostTotal += r.LostTotal
	t.LostTotalPartitions += r.LostTotalPartitions
	t.LostTotalSchedules += r.LostTotalSchedules
	if len(r.Killed) > 0 {
		t.KillsLearner++
	}
	t.DoubleAccepted += r.DoubleAccepted
	t.DuplicateExecutions += r.DuplicateExecutions
	t.Steals += r.Steals
	t.Messages += r.Messages
	t.Tasks += r.Tasks
	t.LatencyP50MS = max(t.LatencyP50MS, r.LatencyP50MS)
	t.LatencyP99MS = max(t.LatencyP99MS, r.LatencyP99MS)
	t.SimSeconds += r.SimSeconds
	t.ScheduleHours += r.ScheduleHours
	t.WallSeconds += r.WallSeconds
}
