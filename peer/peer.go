package peer

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/handler"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
	"github.com/needle-mesh/needle/wal"
	"github.com/needle-mesh/needle/wal/badgerwal"
)

// leaseAhead is the most leases a peer holds beyond its slots, per slot.
const leaseAhead = 128

// Peer is a running needle peer: one goroutine (the loop) owns the Node and
// the WAL; the HTTP API, the workers and the timers talk to it through its
// inbox.
type Peer struct {
	logs     *logStore // task logs of the runs of this peer
	cfg      Config
	log      *slog.Logger
	wal      wal.Log
	tr       Transport // the mesh: the libp2p host unless Config.Runtime gives one
	node     *node.Node
	driver   *node.Driver // drives node's Readies (loop.go, loopIO)
	held     wal.Batch    // unsynced batches written with the next synced one (loopIO.Persist)
	handlers *handler.Registry
	hub      *hub // external workers (workers.go)
	// disk and heap are the marks past which it takes no new work
	// (admit.go); disk is nil in memory or on the caller's WAL.
	disk, heap *mark
	metrics    *metrics
	notifier   *notifier

	inbox chan command
	jobs  chan job
	// overflow holds the runs the Node handed out beyond the job queue's
	// room, in order; loop-owned (start, feedJobs).
	overflow []job
	results  chan shard.Outcome

	dialing sync.Map // peer id -> true while a dial is in flight

	mu       sync.Mutex             // guards cancels and outcomes
	cancels  map[runKey]*runContext // by task and round: a task may have two runs here
	outcomes map[runKey]trace.Span  // the outcome span of a run whose outcome the loop has not taken yet

	tracer   trace.Tracer
	tracing  bool    // a TracerProvider is set: spans are recorded
	failures failLog // rate-limits the warn lines of handler failures
	refusals failLog // and those of messages refused
	behind   failLog // and the error lines of a log behind what it acknowledged

	certs *certFiles // the API's TLS certificate (--tls-cert), nil without TLS

	forgotLogged time.Time // when the loop last logged that this peer was forgotten (noteForgotten)

	creators creators // forwarded requests that created their group (creators.go)

	// Loop-owned state.
	calls   map[uint64]pendingCall
	waiters waiters
	taken   uint64 // commands the loop has taken (a test counts the trips a request makes)

	runCtx context.Context // canceled when Run ends: parent of handler contexts

	ln  net.Listener
	srv *http.Server
	// healthLn and healthSrv serve /healthz and /metrics apart from the
	// API (Config.HealthAddr); nil without.
	healthLn  net.Listener
	healthSrv *http.Server
	ready     chan struct{}
	wg        sync.WaitGroup

	drainAsked chan struct{} // closed by POST /v1/drain
	drainOnce  sync.Once
	drained    chan struct{} // closed by the loop once the node is drained
	closed     chan struct{}
}

// New opens the data dir, replays the WAL into a Node and prepares the
// peer. Run starts it.
func New(cfg Config) (*Peer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, configError{err}
	}
	handlers, sender, err := cfg.adapters()
	if err != nil {
		return nil, err
	}
	p := &Peer{
		cfg: cfg, log: cfg.Logger, handlers: handlers, logs: newLogStore(logDir(cfg), cfg.MaxLog),
		inbox: make(chan command, 4096), jobs: make(chan job, max(cfg.Slots, 1)*(1+leaseAhead)),
		results: make(chan shard.Outcome, max(cfg.Slots, 1)*(1+leaseAhead)+16), cancels: make(map[runKey]*runContext),
		outcomes: make(map[runKey]trace.Span), tracer: newTracer(cfg.TracerProvider), tracing: cfg.TracerProvider != nil,
		calls: make(map[uint64]pendingCall), waiters: newWaiters(),
		ready: make(chan struct{}), closed: make(chan struct{}),
		drainAsked: make(chan struct{}), drained: make(chan struct{}),
	}
	p.hub = newHub(p, cfg.WorkerTTL, cfg.WorkerCrashLimit)
	if cfg.TLSCert != "" {
		if p.certs, err = newCertFiles(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, configError{err}
		}
	}
	if err := p.open(); err != nil {
		return nil, err
	}
	p.metrics = newMetrics(p)
	p.notifier = newNotifier(sender, cfg.Notify.Concurrency, p.metrics.reg)
	return p, nil
}

func (p *Peer) open() error {
	start := time.Now()
	log, err := p.openWAL()
	if err != nil {
		return err
	}
	p.wal = log
	if !p.cfg.InMemory && p.cfg.Runtime.WAL == nil {
		p.disk = newDiskMark(p.cfg.DataDir, p.cfg.MinFreeDisk, statfsFree, p.diskWarn)
	}
	p.heap = newHeapMark(p.cfg.MaxHeap, memoryAvailable(), liveHeap, p.heapWarn)
	// The WAL's first record is written before the identity key is
	// created, so that a key without a WAL means the WAL was lost.
	if err := p.checkWALKept(); err != nil {
		log.Close()
		return err
	}
	parts, placement, err := p.meshSettings()
	if err != nil {
		log.Close()
		return err
	}
	initial, err := parseInitial(p.cfg.Initial)
	if err != nil {
		log.Close()
		return err
	}
	if err := p.openHost(initial); err != nil {
		log.Close()
		return err
	}
	fail := func(err error) error {
		p.tr.Close()
		log.Close()
		return err
	}
	states, err := wal.LoadAll(log)
	if err != nil {
		return fail(err)
	}
	id := p.tr.ID()
	ncfg := node.DefaultNodeConfig(id, randomHex(8))
	ncfg.Replicas, ncfg.Placement = p.cfg.Replicas, placement
	ncfg.ForgetAfter = p.cfg.ForgetAfter
	ncfg.Steal = !p.cfg.NoSteal
	ncfg.Addrs = p.tr.Addrs()
	ncfg.ValidID = p.validID
	ncfg.Labels = p.cfg.Labels
	ncfg.Version = p.cfg.Version
	ncfg.Partitions = parts
	ncfg.Slots = p.cfg.Slots
	ncfg.LeaseAhead = leaseAhead
	ncfg.Logger = p.log
	ncfg.Rand = mrand.New(mrand.NewPCG(seed(), seed()))
	ncfg.Shard.Retention = p.cfg.Retention
	ncfg.Shard.DefaultTimeout = p.cfg.DefaultTimeout
	ncfg.Shard.Next = cron.Next
	// A handler this peer has not registered runs in external workers.
	ncfg.Shard.External = func(h string) bool { return !p.handlers.Has(h) }
	ncfg.NotifyInflight = p.cfg.Notify.Concurrency
	if err = ncfg.LoadMeta(log); err != nil {
		return fail(err)
	}
	// Partitions held, or held once (left): the first start is past.
	p.initialMembership(&ncfg, initial, len(states) > 0 || len(ncfg.Left) > 0)
	p.node, err = node.NewNode(ncfg, states, time.Now())
	if err != nil {
		return fail(err)
	}
	p.driver = &node.Driver{Node: p.node, IO: loopIO{p}}
	outbox, err := log.Outbox()
	if err == nil {
		err = p.node.RestoreOutbox(outbox)
	}
	if err != nil {
		return fail(fmt.Errorf("peer: outbox: %w", err))
	}
	p.log = p.log.With(keyNode, id)
	p.log.Info("wal replayed", "partitions", len(states), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// openWAL opens Badger in the data dir, or takes the caller's log.
func (p *Peer) openWAL() (wal.Log, error) {
	if l := p.cfg.Runtime.WAL; l != nil {
		return l, nil
	}
	if !p.cfg.InMemory {
		warnDataDirMode(p.cfg.DataDir, p.log)
		if err := os.MkdirAll(p.cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("peer: data dir: %w", err)
		}
	}
	log, err := badgerwal.Open(p.cfg.DataDir, badgerwal.Options{Logger: p.log, InMemory: p.cfg.InMemory, MemTableSize: 128 << 20})
	if err != nil {
		return nil, fmt.Errorf("peer: open wal in %s: %w", p.cfg.DataDir, err)
	}
	if max := log.MaxRecord(); max < node.MaxEntryBytes+64<<10 {
		log.Close()
		return nil, fmt.Errorf("peer: the wal writes records of at most %d bytes, under the largest entry (%d)", max, node.MaxEntryBytes+64<<10)
	}
	return log, nil
}

// warnDataDirMode warns when dir exists and others may read or enter it:
// the WAL and the task logs under it hold payloads and results. The peer
// creates its data dir 0700, but one made by hand or by a script may be
// wider, and changing a user's own dir is not the peer's call.
func warnDataDirMode(dir string, log *slog.Logger) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return
	}
	if mode := st.Mode().Perm(); mode&0o077 != 0 {
		log.Warn("data dir is readable by others: it holds task payloads and results; chmod 700 it",
			"data", dir, "mode", fmt.Sprintf("%#o", mode))
	}
}

// listen returns the API's listener: the caller's, or one on HTTPAddr.
func (p *Peer) listen() (net.Listener, error) {
	if ln := p.cfg.Runtime.Listener; ln != nil {
		return ln, nil
	}
	ln, err := net.Listen("tcp", p.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("peer: listen on %s: %w", p.cfg.HTTPAddr, err)
	}
	return ln, nil
}

// ErrWALLost is returned by New for a data dir that holds an identity key
// but no WAL (the log was deleted or lost, the key kept).
var ErrWALLost = errors.New("peer: the WAL of this identity is lost")

// checkWALKept refuses a data dir that holds an identity key but no WAL
// record, before anything is written: every start refuses alike.
func (p *Peer) checkWALKept() error {
	if p.cfg.ephemeral() || p.cfg.Runtime.Transport != nil {
		return nil
	}
	_, walKept, err := p.wal.Meta("partitions")
	if err != nil {
		return fmt.Errorf("peer: read partition count: %w", err)
	}
	id, keyKept, err := p2p.StoredID(p.cfg.DataDir)
	if err != nil || !keyKept || walKept {
		return err
	}
	return p.walLost(id)
}

// walLost is the error of an identity whose WAL is gone: the mesh still
// counts this peer as a member holding replicas (and votes) it no longer
// has, and its Raft peers would hand it commit indexes past its empty log.
// It must come back as a new peer, after the old one is forgotten.
func (p *Peer) walLost(id string) error {
	key := filepath.Join(p.cfg.DataDir, p2p.IdentityFile)
	return fmt.Errorf("%w: %s holds the identity key of peer %s but no WAL. To bring this host back: "+
		"(1) on a live peer run `needle forget %s` (or wait --forget-after for the mesh to drop it); "+
		"(2) delete %s; (3) start this peer again with --join: it joins as a new peer and its replicas are rebuilt from the others",
		ErrWALLost, p.cfg.DataDir, id, id, key)
}

// openHost starts the libp2p host: the peer's identity (a key in the data
// dir) and its transport to the other peers. It dials the Join addresses
// and those of the initial peers (but this one's).
func (p *Peer) openHost(initial []node.PeerAddrs) error {
	if t := p.cfg.Runtime.Transport; t != nil {
		p.tr = t
		return nil
	}
	dir := p.cfg.DataDir
	if p.cfg.InMemory {
		dir = ""
	}
	join := p.cfg.Join
	if len(initial) > 0 {
		// A data dir without a key has no id yet: no list can name it.
		self := ""
		if dir != "" {
			var err error
			if self, _, err = p2p.StoredID(dir); err != nil {
				return fmt.Errorf("peer: identity: %w", err)
			}
		}
		join = append(slices.Clip(join), initialJoins(initial, self)...)
	}
	h, err := p2p.New(context.Background(), p2p.Config{
		DataDir: dir, Listen: p.cfg.Listen, Join: join, SwarmKeyFile: p.cfg.SwarmKeyFile,
		MembersFile: p.cfg.MembersFile, MDNS: p.cfg.MDNS, Logger: p.log,
	})
	if errors.Is(err, p2p.ErrConfig) || errors.Is(err, p2p.ErrSwarmKey) {
		return configError{fmt.Errorf("peer: libp2p host: %w", err)}
	}
	if err != nil {
		return fmt.Errorf("peer: libp2p host: %w", err)
	}
	p.tr = h
	return nil
}

// meshSettings reads (or records) the partition count and the replica
// placement, fixed when the data dir is first created. The placement is
// the recorded one; else the flag's (Config.PlacementSet); else spread for
// a data dir created now and circle for one an earlier release created,
// which placed with the circle and recorded nothing. Both are recorded in
// one write, so a start cut short cannot leave a new data dir looking
// like an old one.
func (p *Peer) meshSettings() (parts int, pl ring.Placement, err error) {
	b, partsKept, err := p.wal.Meta("partitions")
	if err != nil {
		return 0, 0, fmt.Errorf("peer: read partition count: %w", err)
	}
	parts = p.cfg.Partitions
	if partsKept {
		if len(b) != 4 {
			return 0, 0, fmt.Errorf("peer: data dir has a bad partition count record (%d bytes)", len(b))
		}
		if stored := int(binary.BigEndian.Uint32(b)); stored != parts {
			if parts != 256 {
				p.log.Warn("partition count is fixed when the data dir is created; ignoring the flag",
					"stored", stored, "flag", parts)
			}
			parts = stored
		}
	}
	b, plKept, err := p.wal.Meta("placement")
	if err != nil {
		return 0, 0, fmt.Errorf("peer: read placement: %w", err)
	}
	switch {
	case plKept:
		if pl, err = ring.ParsePlacement(string(b)); err != nil {
			return 0, 0, fmt.Errorf("peer: data dir has a bad placement record %q: %w", b, err)
		}
		if !p.cfg.PlacementSet || pl == p.cfg.Placement {
			return parts, pl, nil
		}
		held, err := p.wal.Partitions()
		if err != nil {
			return 0, 0, fmt.Errorf("peer: read partitions: %w", err)
		}
		if len(held) > 0 {
			return 0, 0, fmt.Errorf("peer: --placement %v, but this data dir's mesh places with %v (fixed when the data dir was created): "+
				"start without --placement, or with --placement %v", p.cfg.Placement, pl, pl)
		}
		// A data dir that holds no partition joined no mesh yet: its
		// record is from a start that failed (the mesh's placement
		// differed, and its error said to pass --placement). The mesh
		// checks the flag again when this peer joins.
		p.log.Info("placement record replaced: this data dir holds no partition yet", "was", pl, "now", p.cfg.Placement)
		pl = p.cfg.Placement
	case p.cfg.PlacementSet:
		pl = p.cfg.Placement
	case partsKept:
		pl = ring.PlacementCircle
	default:
		pl = ring.PlacementSpread
	}
	batch := &wal.Batch{MetaPut: []wal.Record{{Key: "placement", Value: []byte(pl.String())}}}
	if !partsKept {
		batch.MetaPut = append(batch.MetaPut, wal.Record{Key: "partitions", Value: binary.BigEndian.AppendUint32(nil, uint32(parts))})
	}
	if err := p.wal.Append(batch); err != nil {
		return 0, 0, fmt.Errorf("peer: write mesh settings: %w", err)
	}
	return parts, pl, p.wal.Sync()
}

// exemptClient is the clients the per-client bounds leave alone: loopback
// ones (a proxy on the host serves every client from there), nil when a
// test bounds them too.
func (p *Peer) exemptClient() func(string) bool {
	if p.cfg.capLoopback {
		return nil
	}
	return loopbackIP
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func seed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// ID returns the peer id.
func (p *Peer) ID() string { return p.node.ID() }

// Handlers returns the registry, to register handlers before or while
// the peer runs.
func (p *Peer) Handlers() *handler.Registry { return p.handlers }

// Addr returns the API's address once Run has started listening.
func (p *Peer) Addr() string {
	<-p.ready
	return p.ln.Addr().String()
}

// Ready is closed once the API serves.
func (p *Peer) Ready() <-chan struct{} { return p.ready }

// Run serves until ctx is canceled, then stops the API, the workers and the
// loop, and closes the WAL.
func (p *Peer) Run(ctx context.Context) error {
	defer close(p.closed)
	// exec's attempts go in a directory of this peer's own under the
	// exec dir, which other peers may share: its id, fixed by the data
	// dir, which one process alone opens.
	if err := p.handlers.SetPeer(p.ID()); err != nil {
		p.tr.Close()
		p.wal.Close()
		return err
	}
	ln, err := p.listen()
	if err == nil {
		if p.healthLn, err = p.listenHealth(); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		p.tr.Close()
		p.wal.Close()
		return err
	}
	p.ln = ln
	// The loop and the workers outlive ctx by the drain: they stop when
	// stop is called.
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	p.runCtx = runCtx
	// Inside the --max-conns bound: a connection of a client over its own
	// bound is closed without taking a slot.
	ln = newClientConns(ln, p.cfg.MaxConnsPerClient, p.exemptClient(), p.metrics.connsRefused)
	ln = netutil.LimitListener(ln, p.cfg.MaxConns)
	p.ln = ln
	// No ReadTimeout or WriteTimeout: they would cut long polls (?wait=
	// up to 5 min); apiDeadlines sets them per request instead.
	p.srv = &http.Server{Handler: apiDeadlines(p.httpHandler()), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: apiIdleTimeout, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: apiMaxStreams}}
	if p.certs != nil {
		p.srv.TLSConfig = p.certs.tlsConfig()
	}
	for range max(p.cfg.Slots, 1) {
		p.wg.Add(1)
		go p.worker(runCtx)
	}
	p.wg.Add(1)
	go p.hub.run(runCtx)
	loopErr := make(chan error, 1)
	go func() { loopErr <- p.loop(runCtx) }()
	srvErr := make(chan error, 1)
	go func() {
		if p.certs != nil {
			srvErr <- p.srv.ServeTLS(ln, "", "")
			return
		}
		srvErr <- p.srv.Serve(ln)
	}()
	if p.healthLn != nil {
		p.healthSrv = p.healthServer()
		go func() { _ = p.healthSrv.Serve(p.healthLn) }()
		p.log.Info("serving health checks", "http", p.healthLn.Addr().String())
	}
	close(p.ready)
	p.tr.HandleCall(p.serveCall)
	p.log.Info("serving", "http", ln.Addr().String(), "slots", p.cfg.Slots, "data", p.cfg.DataDir,
		"peer", p.tr.ID(), "addrs", strings.Join(p.tr.Addrs(), ","))
	var runErr error
	loopDone := false
	select {
	case <-ctx.Done():
		runErr, loopDone = p.drain(loopErr, srvErr)
	case <-p.drainAsked:
		runErr, loopDone = p.drain(loopErr, srvErr)
	case runErr = <-loopErr:
		loopDone = true
	case runErr = <-srvErr:
	}
	stop()
	shutCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	_ = p.srv.Shutdown(shutCtx)
	if p.healthSrv != nil {
		_ = p.healthSrv.Shutdown(shutCtx)
	}
	p.wg.Wait()
	if !loopDone {
		if err := <-loopErr; runErr == nil {
			runErr = err
		}
	}
	if err := p.tr.Close(); err != nil && runErr == nil {
		runErr = err
	}
	// The loop is done: what it held unsynced is written, and Close
	// flushes it (a clean stop keeps the last commit indexes).
	if err := p.flushHeld(); err != nil && runErr == nil {
		runErr = err
	}
	if err := p.wal.Close(); err != nil && runErr == nil {
		runErr = err
	}
	p.logs.sweeps.Wait() // nothing of the peer's outlives Run
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	return runErr
}

// isLoopback reports whether addr listens on a loopback address only (or
// "localhost"). An address that does not parse counts as loopback: the
// listener reports its error.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err != nil || host == "localhost" || loopbackIP(host)
}

// drain hands this peer's work over before it stops: the node stops taking
// leases and transfers its partitions' leadership, running tasks finish and
// report, and the outbox empties; it returns when that is done, when the
// drain timeout passes, or when the loop or the API server fail.
func (p *Peer) drain(loopErr, srvErr chan error) (error, bool) {
	if p.cfg.DrainTimeout < 0 {
		return nil, false
	}
	p.log.Info("draining", "timeout", p.cfg.DrainTimeout)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DrainTimeout)
	defer cancel()
	if err := p.send(ctx, command{query: (*node.Node).Drain}); err != nil {
		return nil, false
	}
	select {
	case <-p.drained:
		p.log.Info("drained", "took", time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		var what string
		_ = p.read(context.Background(), func(n *node.Node) error { _, what = n.Drained(); return nil })
		p.log.Warn("drain timed out; stopping anyway", "waiting_for", what)
	case err := <-loopErr:
		return err, true
	case err := <-srvErr:
		return err, false
	}
	return nil, false
}

// RequestDrain starts a drain as SIGTERM does; Run returns when it is done.
func (p *Peer) RequestDrain() { p.drainOnce.Do(func() { close(p.drainAsked) }) }

// logDir is where finished task logs go; "" keeps them in memory.
func logDir(cfg Config) string {
	if cfg.ephemeral() {
		return ""
	}
	return filepath.Join(cfg.DataDir, "logs")
}
