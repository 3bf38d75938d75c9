package peer

import (
	"errors"
	"math"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/shard"
)

// metrics are the peer's Prometheus metrics; every name starts with
// needle_. Counters are updated by the loop; gauges are refreshed from the
// Node's stats once a second.
type metrics struct {
	reg        *prometheus.Registry
	tasks      *prometheus.GaugeVec
	readyQ     prometheus.Gauge
	running    prometheus.Gauge
	slots      prometheus.Gauge
	finished   *prometheus.CounterVec
	applied    prometheus.Counter
	outcomes   *prometheus.CounterVec
	runTimes   *prometheus.HistogramVec
	walSync    prometheus.Histogram
	partitions prometheus.Gauge
	dropped    prometheus.Counter
	refused    prometheus.Counter
	served     *prometheus.CounterVec
	peers      *prometheus.GaugeVec
	ringEpoch  prometheus.Gauge
	outbox     prometheus.Gauge
	replLag    prometheus.Gauge
	queueWait  prometheus.Histogram
	schedLag   prometheus.Histogram
	protocol   *prometheus.CounterVec // from NodeStats, by event
	// refusedWork counts submissions refused by the owner's guards, by
	// reason: disk, memory (peer.admit).
	refusedWork *prometheus.CounterVec
	// droppedAppends counts the Raft appends and snapshots dropped as a
	// replica short of disk space (peer.dropAppends).
	droppedAppends prometheus.Counter
	// unowned and underReplicated gauge partition health, so an alert can
	// fire on it: partitions with no reachable owner (as /healthz counts
	// them, node.Unsettled) and partitions this peer leads short of
	// replicas (node.UnderReplicated). leaderChanges counts the partition
	// leaderships this peer gained or lost (NodeStats.LeaderChanges).
	unowned, underReplicated prometheus.Gauge
	leaderChanges            prometheus.Counter
	// connsRefused counts the API connections closed as soon as accepted:
	// their client held --max-conns-per-client (clientConns).
	connsRefused prometheus.Counter
	// finishedBy and outcomeBy are finished's and outcomes' counters, each
	// looked up at its first use (WithLabelValues hashes its labels at
	// every call: 2% of a W1 peer's loop).
	finishedBy map[shard.State]prometheus.Counter
	outcomeBy  map[string]prometheus.Counter
	last       node.NodeStats // NodeStats at the last observe, for deltas
	user       *userMetrics
	// agesAt is when the READY ages (needle_ready_oldest_seconds) are
	// next computed; clock reads the wall clock (tests replace it).
	agesAt time.Time
	clock  func() time.Time
}

// agesCostFactor spaces the computations of the READY ages: the next
// comes at least this many times the last one's duration later. It walks
// every queued READY task (node.OldestReady): under a backlog of millions
// it took a second, and done at every sweep it kept the loop busy with
// nothing else (one peer, W1 of 3,000,000 tasks: 97% of its CPU). The
// gauge then lags by up to ten times the walk, and costs a tenth of the
// loop at most.
const agesCostFactor = 10

// agesEvery is the least time between two computations of the READY
// ages: a gauge scraped every few seconds needs no fresher value, and
// under W1 (one peer, a backlog of 100,000 READY tasks) a walk at every
// sweep of the loop, each of 1-2 ms, was 3-6% of the loop's CPU.
const agesEvery = time.Second

func newMetrics(p *Peer) *metrics {
	m := &metrics{
		clock:      time.Now,
		finishedBy: map[shard.State]prometheus.Counter{},
		outcomeBy:  map[string]prometheus.Counter{},
		reg:        prometheus.NewRegistry(),
		tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "needle_tasks",
			Help: "Tasks by state in the partitions this peer owns."}, []string{"state"}),
		readyQ: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_ready_queue_depth",
			Help: "READY tasks in the partitions this peer owns."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_running",
			Help: "Tasks this peer is running."}),
		slots: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_slots",
			Help: "Tasks this peer runs at once."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_tasks_finished_total",
			Help: "Tasks that reached a terminal state, by state."}, []string{"state"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_events_applied_total",
			Help: "Committed events applied to the state."}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_outcomes_total",
			Help: "Handler outcomes reported by this peer's workers, by result (succeeded, failed, timed_out, stale)."},
			[]string{"result"}),
		runTimes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "needle_task_run_seconds",
			Help: "Handler run time, by handler (at most 256 handlers, then other).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)}, []string{"handler"}),
		walSync: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "needle_wal_sync_seconds",
			Help: "WAL sync latency.", Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12)}),
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_partitions_owned",
			Help: "Partitions this peer leads."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_messages_dropped_total",
			Help: "Messages to other peers dropped because their send queue was full."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_messages_refused_total",
			Help: "Messages from other hosts refused: malformed, from a non-member, or failing their checks (a peer logs at most 10 a window)."}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_forwarded_calls_total",
			Help: "Requests other peers forwarded to this one (it owns the group, or they ask all peers), by op: submit, task, group, cancel, ..."},
			[]string{"op"}),
		peers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "needle_peers",
			Help: "Members of the mesh by state, as this peer sees them."}, []string{"state"}),
		ringEpoch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_ring_epoch",
			Help: "Version of the ring this peer routes with (bumps on every membership change)."}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "needle_task_queue_wait_seconds",
			Help: "Time tasks waited READY before their lease, in partitions this peer owns.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12)}),
		schedLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "needle_schedule_lag_seconds",
			Help: "How late schedule ticks fired after their due time, on this owner.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 12)}),
		replLag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_replication_lag_entries",
			Help: "Largest number of log entries a voter is behind, over the partitions this peer leads."}),
		outbox: prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_outbox_outcomes",
			Help: "Outcomes waiting for their owner's acknowledgement."}),
		protocol: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_protocol_events_total",
			Help: "Work-stealing, lease and leadership events: steals_asked, steals_granted (tasks received), steals_refused, steals_sampled (of steals_asked, blind asks: no known peer advertised work), tasks_granted (to thieves), lease_expiries, stale_outcomes (refused by fencing), abdications (partition leaderships given up: no majority answered)."},
			[]string{"event"}),
		refusedWork: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "needle_submissions_refused_total",
			Help: "Submissions this peer refused as their group's owner (507 insufficient_storage): short of disk space under its data dir (reason disk, --min-free-disk) or over --max-heap (reason memory)."},
			[]string{"reason"}),
	}
	m.droppedAppends = prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_replica_appends_dropped_total",
		Help: "Raft appends and snapshots this peer dropped as a replica with under half its --min-free-disk free: the partition commits on its other replicas and this one catches up once space is freed."})
	m.unowned = prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_partitions_unowned",
		Help: "Partitions with no owner this peer can route to (none serves them here, no live leader known): what /healthz counts; above 0 their requests fail with 503."})
	m.underReplicated = prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_partitions_under_replicated",
		Help: "Partitions this peer leads whose voters are fewer than min(--replicas, members) or include a peer this peer holds dead (or forgot): they survive one failure fewer than configured."})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_leader_changes_total",
		Help: "Partition leaderships this peer gained or lost (its start counts the ones it gains)."})
	m.connsRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "needle_http_connections_refused_total",
		Help: "API connections closed as soon as accepted, without a --max-conns slot: their client address already held --max-conns-per-client open connections."})
	m.reg.MustRegister(m.refusedWork, m.droppedAppends, m.unowned, m.underReplicated, m.leaderChanges, m.connsRefused)
	m.reg.MustRegister(membersMetrics(p)...)
	m.zeroSeries()
	if d := p.disk; d != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "needle_disk_free_bytes",
			Help: "Space free under the data dir for an unprivileged writer, read at the scrape; under --min-free-disk the peer refuses new work."},
			func() float64 {
				avail, err := d.read()
				if err != nil {
					return math.NaN()
				}
				return float64(avail)
			}))
	}
	m.reg.MustRegister(m.tasks, m.readyQ, m.running, m.slots, m.finished, m.applied, m.outcomes,
		m.runTimes, m.walSync, m.partitions, m.dropped, m.refused, m.served, m.peers, m.ringEpoch, m.outbox, m.protocol, m.replLag, m.queueWait, m.schedLag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.slots.Set(float64(p.cfg.Slots))
	m.reg.MustRegister(buildInfo(p.cfg.Version, p.cfg.Commit))
	m.user = newUserMetrics(m.reg, p.handlers.Names())
	return m
}

// membersMetrics are the counters of --members' refusals, read from the
// libp2p host's Stats at each scrape (0 without --members, or on a
// transport that keeps none).
func membersMetrics(p *Peer) []prometheus.Collector {
	stat := func(f func(p2p.Stats) uint64) func() float64 {
		return func() float64 {
			if s, ok := p.tr.(statser); ok {
				return float64(f(s.Stats()))
			}
			return 0
		}
	}
	const connsHelp = "Connections refused to hosts not in --members, by direction: inbound (closed after the handshake proved the host's id) or outbound (dials not made, by this peer's writers and join loop among others)."
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "needle_peer_connections_refused_total", Help: connsHelp,
			ConstLabels: prometheus.Labels{"direction": "inbound"}}, stat(func(s p2p.Stats) uint64 { return s.RefusedInbound })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "needle_peer_connections_refused_total", Help: connsHelp,
			ConstLabels: prometheus.Labels{"direction": "outbound"}}, stat(func(s p2p.Stats) uint64 { return s.RefusedOutbound })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "needle_forwarded_calls_busy_total",
			Help: "Requests other peers forwarded to this one answered busy at once, every one of its 4,096 call handlers running (long polls, say): the forwarding peer retries, then answers 503."},
			stat(func(s p2p.Stats) uint64 { return s.CallsBusy })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "needle_gossip_refused_total",
			Help: "Gossip messages dropped because their author (the signed origin, whoever relayed them) is not in --members."},
			stat(func(s p2p.Stats) uint64 { return s.GossipRefused })),
	}
}

// zeroSeries creates every documented label value of the labelled
// counters at 0: a series absent until its first event reads, to an alert
// or a ratio, as "no data" rather than 0 (docs/operations.md, Metrics).
func (m *metrics) zeroSeries() {
	for _, s := range shard.States() {
		if s.Terminal() {
			m.finishedBy[s] = m.finished.WithLabelValues(s.String())
		}
	}
	for _, r := range outcomeResults {
		m.outcomeBy[r] = m.outcomes.WithLabelValues(r)
	}
	for _, r := range []string{"disk", "memory"} { // admit.go's reasons
		m.refusedWork.WithLabelValues(r).Add(0)
	}
	for _, e := range protocolEvents(node.NodeStats{}, node.NodeStats{}) {
		m.protocol.WithLabelValues(e.name).Add(0)
	}
}

// outcomeResults are needle_outcomes_total's results (outcome).
var outcomeResults = []string{"succeeded", "failed", "timed_out", "stale"}

// protocolEvent is one needle_protocol_events_total event: its counter
// now and at the last observe.
type protocolEvent struct {
	name     string
	now, was int
}

// protocolEvents lists needle_protocol_events_total's events, each from
// its NodeStats counter in cur and last.
func protocolEvents(cur, last node.NodeStats) []protocolEvent {
	return []protocolEvent{
		{"steals_asked", cur.StealsAsked, last.StealsAsked},
		{"steals_granted", cur.StealsGranted, last.StealsGranted},
		{"steals_refused", cur.StealsRefused, last.StealsRefused},
		{"steals_sampled", cur.StealsSampled, last.StealsSampled},
		{"tasks_granted", cur.TasksGranted, last.TasksGranted},
		{"lease_expiries", cur.LeaseExpiries, last.LeaseExpiries},
		{"stale_outcomes", cur.StaleOutcomes, last.StaleOutcomes},
		{"abdications", cur.Abdications, last.Abdications},
		{"rejected_entries", cur.RejectedEntries, last.RejectedEntries},
		{"dropped_raft_messages", cur.DroppedRaft, last.DroppedRaft},
		{"entries_proposed", cur.Entries, last.Entries},
		{"partitions_left", cur.Left, last.Left},
		{"replica_asks", cur.ReplicaAsks, last.ReplicaAsks},
		{"stale_raft_messages", cur.StaleRaft, last.StaleRaft},
		{"peer_deaths", cur.Deaths, last.Deaths},
		{"identity_conflicts", cur.IdentityConflicts, last.IdentityConflicts},
		{"unsafe_recoveries", cur.UnsafeRecoveries, last.UnsafeRecoveries},
		{"unsafe_recovery_rebuilds", cur.RecoveredElsewhere, last.RecoveredElsewhere},
	}
}

// buildInfo is needle_build_info: always 1, the build in its labels.
func buildInfo(version, commit string) prometheus.Gauge {
	if version == "" {
		version = "unknown"
	}
	if commit == "" {
		commit = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "needle_build_info",
		Help:        "Always 1; the labels name the build this peer runs (version, commit, Go version).",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": runtime.Version()}})
	g.Set(1)
	return g
}

func (m *metrics) observe(n *node.Node) {
	st := n.Stats()
	for _, s := range shard.States() {
		m.tasks.WithLabelValues(s.String()).Set(float64(st.Counts[s]))
	}
	m.readyQ.Set(float64(st.Ready))
	m.running.Set(float64(st.Running))
	m.partitions.Set(float64(st.Leading))
	byState := map[node.PeerState]int{}
	for _, mb := range n.Members() {
		byState[mb.State]++
	}
	for _, s := range []node.PeerState{node.PeerAlive, node.PeerSuspect, node.PeerDead} {
		m.peers.WithLabelValues(s.String()).Set(float64(byState[s]))
	}
	m.ringEpoch.Set(float64(n.Epoch()))
	m.outbox.Set(float64(n.OutboxLen()))
	m.replLag.Set(float64(n.ReplicationLag()))
	m.unowned.Set(float64(n.Unsettled()))
	m.underReplicated.Set(float64(n.UnderReplicated()))
	cur := n.Counters()
	for _, c := range protocolEvents(cur, m.last) {
		if c.now > c.was {
			m.protocol.WithLabelValues(c.name).Add(float64(c.now - c.was))
		}
	}
	if cur.LeaderChanges > m.last.LeaderChanges {
		m.leaderChanges.Add(float64(cur.LeaderChanges - m.last.LeaderChanges))
	}
	m.last = cur
	m.readyAges(n)
}

// readyAges refreshes needle_ready_oldest_seconds when it is due
// (agesEvery, agesCostFactor).
func (m *metrics) readyAges(n *node.Node) {
	start := m.clock()
	if start.Before(m.agesAt) {
		return
	}
	oldest := n.OldestReady()
	m.user.readyAges(oldest, n.Now())
	m.agesAt = start.Add(max(agesEvery, agesCostFactor*m.clock().Sub(start)))
}

func (m *metrics) ready(rd *node.Ready) {
	m.applied.Add(float64(rd.Applied))
	for _, w := range rd.QueueWaits {
		m.queueWait.Observe(w.Seconds())
	}
	for _, l := range rd.ScheduleLags {
		m.schedLag.Observe(l.Seconds())
	}
	for _, c := range rd.Changes {
		if c.Retried {
			continue
		}
		fin, ok := m.finishedBy[c.State]
		if !ok {
			fin = m.finished.WithLabelValues(c.State.String())
			m.finishedBy[c.State] = fin
		}
		fin.Inc()
	}
}

func (m *metrics) outcome(o shard.Outcome, err error) {
	r := "failed"
	switch {
	case errors.Is(err, shard.ErrStaleRound):
		r = "stale"
	case o.OK:
		r = "succeeded"
	case o.TimedOut:
		r = "timed_out"
	}
	c, ok := m.outcomeBy[r]
	if !ok {
		c = m.outcomes.WithLabelValues(r)
		m.outcomeBy[r] = c
	}
	c.Inc()
}

func (m *metrics) runTime(handler string, d time.Duration) {
	m.runTimes.WithLabelValues(m.user.handlers.label(handler)).Observe(d.Seconds())
}

func (m *metrics) sync(d time.Duration) { m.walSync.Observe(d.Seconds()) }
