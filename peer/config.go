package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/peer/handler"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/peer/webhook"
	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/shard"
)

// Config configures a running peer (the runtime around the pure Node).
type Config struct {
	// DataDir holds the WAL (Badger), identity and outbox. Default
	// "./needle-data".
	DataDir string
	// HTTPAddr is the API's listen address. Default "127.0.0.1:7070".
	HTTPAddr string
	// Slots is the number of tasks run at once. Default NumCPU+1.
	Slots int
	// Partitions is the ring's partition count, fixed when the data dir is
	// first created. Default 256.
	Partitions int
	// Retention keeps finished groups this long. Default 7 days.
	Retention time.Duration
	// DefaultTimeout applies to tasks without a timeout. Default 10 min.
	DefaultTimeout time.Duration
	// Limits bound API requests (body, tasks per group, payload).
	Limits api.Limits
	// Token, when set, is required as a bearer token on the API.
	Token string
	// Tokens, when non-nil, is the set of bearer tokens the API accepts
	// instead of Token: any one of them, each for the routes its scopes
	// allow (Token is admin). Its holder may replace them while
	// the peer runs (needled does on SIGHUP), so that a token is rotated
	// without an outage. Token alone is a set of one (Validate moves it
	// into Tokens); setting both is an error, as is a set with no token.
	Tokens *api.Tokens
	// Version and Commit name the build in the needle_build_info metric
	// (needled sets them from its stamped build info). Default "unknown".
	Version, Commit string
	// OpenAPI allows an HTTPAddr that is not a loopback address without a
	// Token: anyone who reaches the address may use the API. Without it,
	// such a configuration is refused (New returns an error).
	OpenAPI bool
	// Builtins configures the exec and http handlers' allow-lists.
	Builtins handler.BuiltinConfig
	// MaxResult bounds a handler's result, in bytes (as stored: JSON). A
	// larger result fails the attempt permanently ("result of N bytes is
	// over the limit of M"); it is never truncated. Default 1 MiB.
	MaxResult int
	// MaxLog bounds the log kept of one attempt, in bytes: past it the
	// head is cut and the cut counted (the tail is kept). Default 64 KiB.
	MaxLog int
	// MinFreeDisk is the space, in bytes, the peer keeps free under its
	// data dir: below it, it refuses submissions of groups it owns (507
	// insufficient_storage) and runs on the work already taken. 0 =
	// DefaultMinFreeDisk; negative = no check. Capped at a quarter of the
	// filesystem.
	MinFreeDisk int64
	// MaxHeap is the live heap, in bytes, over which the peer refuses
	// submissions of groups it owns (507 insufficient_storage) and runs
	// on the work already taken: it holds its groups in memory until
	// retention removes them. 0 = half the memory the process may use
	// (the machine's, a cgroup's or GOMEMLIMIT, the least); negative = no
	// check.
	MaxHeap int64
	// Handlers holds the task handlers; nil = handler.NewBuiltins(Builtins).
	// Embedding programs register their own.
	Handlers *handler.Registry
	// Logger receives logs. Default: slog.Default().
	Logger *slog.Logger
	// Runtime replaces parts of the runtime (transport, WAL, API
	// listener) with the caller's; the zero value builds them all.
	Runtime Runtime
	// InMemory runs on an in-memory Badger with an ephemeral identity
	// (tests, examples). DataDir is then ignored.
	InMemory bool

	// Listen are the libp2p listen multiaddrs. Default TCP and QUIC on
	// port 4001, all interfaces.
	Listen []string
	// Join are peers to join through: full multiaddrs ending in /p2p/<id>,
	// or TCP addresses without the id (/dns4/needle-0/tcp/4001,
	// needle-0:4001), whose id the host learns by a handshake.
	// A peer with an empty data dir, no Join and no Initial founds a new
	// mesh.
	Join []string
	// Initial starts a new mesh on exactly these peers, all started
	// together with the same list (--initial-peers): full multiaddrs each
	// ending in /p2p/<peer id>, every peer of the mesh named (this one
	// too), a peer's addresses in one entry or several. A peer named here
	// whose data dir holds and held no partition starts the mesh with the others
	// (node.NodeConfig.Initial): each holds from the start the partitions
	// the ring over the list gives it, so nothing moves while the mesh
	// forms. A peer not named joins through the listed peers, as through
	// Join; a peer whose data dir holds partitions only dials them. The
	// listed peers are dialed at start and kept connected, as Join's are.
	// A peer given Initial never founds a mesh alone, even without Join.
	Initial []string
	// SwarmKeyFile makes the mesh private (pnet PSK). Without it or
	// MembersFile the mesh is open: a peer listens on loopback only
	// (Listen's default), and a Listen, Join or Initial address beyond
	// this host is an error, unless OpenMesh: a host that reaches an open
	// mesh joins it as a member, reads every payload and result, and runs
	// and reports tasks.
	SwarmKeyFile string
	// MembersFile lists the peer ids allowed in the mesh (p2p.LoadMembers;
	// --members): the libp2p host refuses connections, either way, to any
	// other id and drops gossip any other authored. Peer.ReloadMembers
	// reads it again. With SwarmKeyFile it narrows the mesh the key opens
	// to the hosts holding it; alone it closes the mesh as the key does
	// (checkMeshOpen), a stranger refused right after the handshake
	// instead of before it.
	MembersFile string
	// OpenMesh allows an open mesh (no SwarmKeyFile) beyond this host
	// (--insecure-open-mesh): a trusted network on purpose.
	OpenMesh bool
	// MDNS discovers peers on the LAN.
	MDNS bool
	// Replicas is R, the Raft replicas of each partition. Default 3.
	Replicas int
	// Placement picks each partition's replicas after the primary
	// (ring.Config.Placement): --placement circle or spread. Like
	// Partitions, every peer of a mesh must use the same one, and it is
	// recorded in the data dir when that is created: a later start uses
	// the recorded one. Without PlacementSet, a new data dir takes spread
	// (leadership evened at hundreds of peers), and one created by a
	// release that did not record it keeps circle, which that release used.
	Placement ring.Placement
	// PlacementSet says Placement was chosen (--placement).
	PlacementSet bool
	// ForgetAfter removes a peer dead this long from the membership.
	// Default 10 min.
	ForgetAfter time.Duration
	// NoSteal turns work stealing off (for comparison).
	NoSteal bool
	// DrainTimeout bounds the drain on SIGTERM (or POST /v1/drain): hand
	// leadership over, finish running tasks, then exit. Default 30 s; a
	// negative value stops at once.
	DrainTimeout time.Duration
	// TLSCert and TLSKey serve the API over HTTPS when both are set.
	TLSCert, TLSKey string
	// HealthAddr, when set, is the address of a second HTTP listener
	// that serves only GET /healthz (the API's answer) and GET /metrics,
	// without the token and over plain HTTP, with a small connection
	// budget of its own: a load balancer's or a kubelet's health check
	// still gets an answer when the API's MaxConns connections are all
	// taken. Any other request there is a 404. Default "": none.
	HealthAddr string
	// MaxConns bounds the API's open connections; more wait in the
	// listen backlog until one closes. Default 1024.
	MaxConns int
	// MaxConnsPerClient bounds the API's open connections from one client
	// address (an IP): one more is closed as soon as it is accepted,
	// without taking a MaxConns slot, so one client cannot hold them all.
	// Half of it bounds the client's long polls (api.HandlerOptions).
	// Default 256, so that a proxy in front still gets plenty; negative is
	// an error. Loopback clients are not bounded: a proxy on the host (a
	// TLS terminator, a service mesh's sidecar) connects from there for
	// every client it serves.
	MaxConnsPerClient int
	// capLoopback bounds loopback clients too (tests, whose clients all
	// connect from loopback).
	capLoopback bool
	// RatePerClient bounds API requests per second from one client address
	// (429 beyond, with a burst of twice the rate). 0 = no limit.
	RatePerClient float64
	// Notify configures webhook deliveries (allow-list, signing secret,
	// deliveries in flight).
	Notify webhook.Config
	// Webhooks makes the webhook calls; nil = webhook.New(Notify).
	Webhooks *webhook.Sender
	// Labels are this peer's placement labels ("zone" -> "a"), gossiped
	// to the mesh: tasks that require labels run only on peers carrying
	// them. Default none.
	Labels map[string]string
	// WorkerTTL is how long an external worker may go without a poll, a
	// heartbeat or a report before it is dead: its leases are handed back
	// and its tasks run again. Default 10 s.
	WorkerTTL time.Duration
	// WorkerCrashLimit is how many external workers in a row may die
	// running a task alone before the task fails for good (the tasks of a
	// dead worker run again, isolated: workers_quarantine.go). Default
	// (0) DefaultWorkerCrashLimit; negative: no limit, no isolation.
	WorkerCrashLimit int
	// StrictHandlers refuses submissions for handlers this peer has not
	// registered (400 unknown handler). Default false: a handler that is
	// not registered is external, served by workers that poll for it.
	StrictHandlers bool
	// TracerProvider records the spans of submissions and runs
	// (tracing.go); needled builds one from the OTEL_* environment. nil:
	// no spans, though a client's traceparent still reaches the handlers.
	TracerProvider trace.TracerProvider
}

// ErrConfig is wrapped by New's errors of the configuration as given (an
// invalid field, Validate's; a TLS certificate or key file that cannot be
// loaded), as against a failure to open the data dir or the mesh: needled
// exits 2 on the first, 1 on the second.
var ErrConfig = errors.New("invalid configuration")

// configError is an error of the configuration: it says what err says
// and is ErrConfig.
type configError struct{ err error }

func (e configError) Error() string        { return e.err.Error() }
func (e configError) Unwrap() error        { return e.err }
func (e configError) Is(target error) bool { return target == ErrConfig }

// Validate fills defaults and reports the first invalid field.
func (c *Config) Validate() error {
	c.fillDefaults()
	switch {
	case c.Token != "" && c.Tokens != nil:
		return errors.New("peer: Token and Tokens are both set: set one")
	case c.Token != "":
		// Moved, not copied: a second Validate of the same Config (a
		// caller's, then New's) must not find both set.
		c.Tokens, c.Token = api.NewTokens(c.Token), ""
	case c.Tokens != nil && c.Tokens.Len() == 0:
		return errors.New("peer: Tokens holds no token")
	}
	switch {
	case c.Slots < 0:
		return errors.New("peer: --slots must be >= 0")
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return fmt.Errorf("peer: --partitions %d out of range 1..65536", c.Partitions)
	case c.Retention < 0:
		return errors.New("peer: --retention must be >= 0")
	case c.DefaultTimeout < 0:
		return errors.New("peer: --default-timeout must be > 0")
	case c.Replicas < 1 || c.Replicas > 15:
		return fmt.Errorf("peer: --replicas %d out of range 1..15", c.Replicas)
	case c.ForgetAfter < 10*time.Second:
		return fmt.Errorf("peer: --forget-after %v is under 10s", c.ForgetAfter)
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("peer: --tls-cert and --tls-key go together")
	case c.MaxConnsPerClient < 0:
		return fmt.Errorf("peer: --max-conns-per-client %d: want a positive value (the default is %d)", c.MaxConnsPerClient, DefaultMaxConnsPerClient)
	case c.RatePerClient < 0:
		return errors.New("peer: --rate must be >= 0")
	case c.MaxResult < 0:
		return errors.New("peer: --max-result must be > 0")
	case c.MaxResult > shard.MaxResultBytes:
		return fmt.Errorf("peer: --max-result %d is over the largest result the mesh stores (%d bytes)", c.MaxResult, shard.MaxResultBytes)
	}
	if _, err := parseInitial(c.Initial); err != nil {
		return err
	}
	if err := CheckListenAddr("--http", c.HTTPAddr); err != nil {
		return err
	}
	if c.HealthAddr != "" {
		if err := CheckListenAddr("--health-listen", c.HealthAddr); err != nil {
			return err
		}
	}
	// Each address is read before checkMeshOpen asks where it points: one
	// that is no address (--join nothing) was refused as "another host".
	// A test's own transport (Runtime.Transport) has addresses of its own.
	for _, a := range c.Listen {
		if _, err := ma.NewMultiaddr(a); err != nil && c.Runtime.Transport == nil {
			return fmt.Errorf("peer: --listen %q is not a multiaddr (want /ip4/IP/tcp/PORT or /ip4/IP/udp/PORT/quic-v1): %v", a, err)
		}
	}
	for _, a := range c.Join {
		if err := p2p.CheckJoin(a); err != nil && c.Runtime.Transport == nil {
			return fmt.Errorf("peer: --join %q is not an address: %w", a, err)
		}
	}
	if c.Tokens == nil && !isLoopback(c.HTTPAddr) {
		if !c.OpenAPI {
			return fmt.Errorf("peer: --http %s is not a loopback address and no API token is set: "+
				"set NEEDLE_API_TOKEN to require a bearer token, listen on 127.0.0.1, "+
				"or pass --insecure-open-api to serve the API to anyone who can reach it", c.HTTPAddr)
		}
		c.Logger.Warn("the API is open: no token, and --http is not a loopback address", "http", c.HTTPAddr)
	}
	if (c.Tokens != nil || c.Token != "") && !isLoopback(c.HTTPAddr) && c.TLSCert == "" {
		// Not an error: a TLS proxy or a private network may be in front.
		c.Logger.Warn("the API token travels in clear: --http is not a loopback address and serves plain HTTP; "+
			"serve it with --tls-cert, or keep it behind a TLS proxy or on a private network", "http", c.HTTPAddr)
	}
	if err := c.checkMeshOpen(); err != nil {
		return err
	}
	if c.Notify.Concurrency == 0 {
		c.Notify.Concurrency = node.DefaultNotifyInflight
	}
	if err := c.Notify.Validate(); err != nil {
		return fmt.Errorf("peer: %w", err)
	}
	if c.Limits.MaxBody == 0 {
		c.Limits.MaxBody = 32 << 20
	}
	if c.Limits.MaxPayload == 0 {
		c.Limits.MaxPayload = 1 << 20
	}
	return nil
}

// LoopbackListen is Listen's default without a swarm key: TCP and QUIC on
// port 4001 of 127.0.0.1.
var LoopbackListen = []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/4001/quic-v1"}

// checkMeshOpen keeps an open mesh on this host: a host that reaches
// one joins it, with no credential, and reads, runs and reports its tasks,
// the API token notwithstanding. A mesh is closed by a swarm key (hosts
// without it are refused before any handshake) or by a members file
// (every host proves its peer id in the Noise handshake, and an id the
// file does not list is refused before any protocol runs): either lifts
// the check (docs/decisions.md "The members file closes a mesh without
// a swarm key"). Otherwise Listen defaults to loopback, and an address
// beyond this host is an error unless OpenMesh. A test's own transport
// (Runtime.Transport) listens on nothing.
func (c *Config) checkMeshOpen() error {
	if c.meshClosed() || c.OpenMesh || c.Runtime.Transport != nil {
		return nil
	}
	if len(c.Listen) == 0 {
		c.Listen = slices.Clone(LoopbackListen)
	}
	const fix = "set --swarm-key (needle keygen swarm.key, copied to every host) or --members FILE (the peer ids " +
		"allowed, needled --init prints each), listen on 127.0.0.1, " +
		"or pass --insecure-open-mesh to let any host that reaches it join the mesh"
	for _, a := range c.Listen {
		if !p2p.Loopback(a) {
			return fmt.Errorf("peer: --listen %s is not a loopback address and neither a swarm key nor a members file is set: "+
				"any host that reaches it could join the mesh and read and run its tasks; %s", a, fix)
		}
	}
	for _, set := range []struct {
		flag  string
		addrs []string
	}{{"--join", c.Join}, {"--initial-peers", c.Initial}} {
		for _, a := range set.addrs {
			if !p2p.Loopback(a) {
				return fmt.Errorf("peer: %s %s is another host and neither a swarm key nor a members file is set: "+
					"an open mesh beyond this host lets any host join it; %s", set.flag, a, fix)
			}
		}
	}
	return nil
}

// CheckListenAddr returns nil when addr is host:port as a TCP listener
// takes it, else an error naming flag and what it wants. One that is not
// (`--http nothing`, a port missing or over 65535) was found only when
// the peer listened: a failure to start (exit 1, which a supervisor
// retries) rather than an error of the configuration (exit 2).
func CheckListenAddr(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("peer: %s %q is not host:port (127.0.0.1:7070; :7070 for every interface): %v", flag, addr, err)
	}
	return nil
}

// meshClosed reports whether only some hosts may join the mesh: those
// holding the swarm key, or the peer ids the members file lists.
func (c *Config) meshClosed() bool { return c.SwarmKeyFile != "" || c.MembersFile != "" }

// fillDefaults sets the zero fields that have a default.
func (c *Config) fillDefaults() {
	if c.DataDir == "" {
		c.DataDir = "./needle-data"
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
	if c.MaxConnsPerClient == 0 {
		c.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:7070"
	}
	if c.Slots == 0 {
		c.Slots = runtime.NumCPU() + 1
	}
	if c.Partitions == 0 {
		c.Partitions = 256
	}
	if c.Retention == 0 {
		c.Retention = 7 * 24 * time.Hour
	}
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = 10 * time.Minute
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.MaxResult == 0 {
		c.MaxResult = DefaultMaxResult
	}
	if c.MaxLog <= 0 {
		c.MaxLog = DefaultMaxLog
	}
	if c.MinFreeDisk == 0 {
		c.MinFreeDisk = DefaultMinFreeDisk
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.ForgetAfter == 0 {
		c.ForgetAfter = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DefaultMaxConnsPerClient is Config.MaxConnsPerClient when it is zero.
const DefaultMaxConnsPerClient = 256

// DefaultMaxResult is Config.MaxResult when it is zero: 1 MiB.
const DefaultMaxResult = 1 << 20
