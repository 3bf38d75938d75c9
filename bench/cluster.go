package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stopGrace is how long a peer gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// pollInterval is the period of readiness and progress polls.
const pollInterval = 50 * time.Millisecond

// Cluster is N peers on loopback, each with its own data directory and
// process group. Close stops them all; it also runs when the context given
// to StartCluster is canceled.
type Cluster struct {
	cfg    Config
	dir    string // parent of the peers' data directories
	hc     *http.Client
	mu     sync.Mutex // guards peers, peers[i].proc, peers[i].dead, closed
	peers  []*clusterPeer
	closed bool // Close has begun; no new process may start

	stopWatch func() bool // unregisters the ctx watcher; guarded by mu
	closeOnce sync.Once
	closeErr  error
}

// clusterPeer is one peer of a Cluster.
type clusterPeer struct {
	spec   PeerSpec
	proc   Process
	client *Client
	id     string // libp2p peer id from /v1/peers "self"
	dead   bool   // killed by Kill9
}

// StartCluster starts cfg.Peers peers and returns once every one answers
// /healthz and, with more than one peer, peer 0 sees all of them. On error
// every started peer is stopped.
func StartCluster(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Start == nil {
		cfg.Start = ExecStart
	}
	dir, err := os.MkdirTemp(cfg.DataDir, "needle-bench-*")
	if err != nil {
		return nil, fmt.Errorf("bench: data dir: %w", err)
	}
	c := &Cluster{cfg: cfg, dir: dir, hc: newHTTPClient()}
	c.mu.Lock()
	c.stopWatch = context.AfterFunc(ctx, func() { c.Close() })
	c.mu.Unlock()
	if err := c.start(ctx); err != nil {
		if ctx.Err() != nil { // Close ran under start: its error is noise
			err = fmt.Errorf("bench: start cluster: %w", ctx.Err())
		}
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// start allocates ports, starts peer 0, then the others joined to it.
func (c *Cluster) start(ctx context.Context) error {
	specs, err := c.specs()
	if err != nil {
		return err
	}
	peers := make([]*clusterPeer, len(specs))
	for i := range specs {
		peers[i] = &clusterPeer{spec: specs[i], client: NewClient(specs[i].HTTPAddr, c.hc)}
	}
	c.mu.Lock()
	c.peers = peers
	c.mu.Unlock()
	if err := c.launch(ctx, 0, nil); err != nil {
		return err
	}
	if len(specs) == 1 {
		return nil
	}
	join, err := c.joinAddr(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i := 1; i < len(specs); i++ {
		wg.Go(func() { errs[i] = c.launch(ctx, i, []string{join}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.waitMesh(ctx); err != nil {
		return err
	}
	return c.waitSettled(ctx)
}

// waitSettled waits until the partitions have stopped moving: every peer
// holds only voters, knows every leader, and the peers' (leading, held)
// counts are the same in two polls a second apart. A fresh mesh spends its
// first seconds adding replicas and handing leadership to the preferred
// owners; a workload run then would measure that transient, not needle. A
// mesh that has not settled within ReadyTimeout is measured anyway (with a
// warning): the numbers say so.
func (c *Cluster) waitSettled(ctx context.Context) error {
	deadline := time.Now().Add(c.cfg.ReadyTimeout)
	var prev []NodeStats
	for time.Now().Before(deadline) {
		cur, ok := c.nodeStats(ctx)
		if ok && (cur == nil || slices.Equal(cur, prev)) {
			return nil
		}
		if !ok {
			cur = nil
		}
		prev = cur
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	c.cfg.Logger.Warn("the mesh did not settle; measuring anyway", "after", c.cfg.ReadyTimeout)
	return nil
}

// nodeStats returns every peer's partition counts when each is settled on
// its own (voters only, every leader known); peers that do not report them
// (test fakes) count as settled, and when none does the result is nil.
func (c *Cluster) nodeStats(ctx context.Context) ([]NodeStats, bool) {
	var out []NodeStats
	reported := false
	for _, cl := range c.live() { // a killed peer (W4) is not waited for
		info, err := cl.Peers(ctx)
		if err != nil {
			return nil, false
		}
		if info.Node == nil {
			continue
		}
		if s := *info.Node; s.Voter != s.Held || s.LeaderKnown != s.Held {
			return nil, false
		}
		out, reported = append(out, *info.Node), true
	}
	if !reported {
		return nil, true
	}
	return out, true
}

// specs allocates free loopback ports and data directories.
func (c *Cluster) specs() ([]PeerSpec, error) {
	n := c.cfg.Peers
	kinds := []string{"tcp", "tcp", "udp"} // HTTP, libp2p TCP, libp2p QUIC
	ports, err := freePorts(n, kinds)
	if err != nil {
		return nil, err
	}
	specs := make([]PeerSpec, n)
	for i := range specs {
		p := ports[i]
		s := PeerSpec{Index: i, Binary: c.cfg.Needled, Slots: c.cfg.Slots, Steal: c.cfg.Steal, Procs: c.cfg.PeerProcs,
			DataDir:  filepath.Join(c.dir, "peer"+strconv.Itoa(i)),
			HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0]))}
		// Always loopback: the daemon's default listens on port 4001 on
		// every interface, which one-peer runs must not take either.
		s.Listen = []string{
			fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", p[1]),
			fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", p[2]),
		}
		if err := os.Mkdir(s.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("bench: data dir: %w", err)
		}
		specs[i] = s
	}
	return specs, nil
}

// freePorts returns n rows of free loopback ports, one per kind ("tcp" or
// "udp"). All listeners stay open until every port is chosen, so no port is
// handed out twice.
func freePorts(n int, kinds []string) ([][]int, error) {
	var closers []func() error
	defer func() {
		for _, cl := range closers {
			cl()
		}
	}()
	ports := make([][]int, n)
	for i := range ports {
		for _, k := range kinds {
			var port int
			if k == "udp" {
				pc, err := net.ListenPacket("udp", "127.0.0.1:0")
				if err != nil {
					return nil, fmt.Errorf("bench: free udp port: %w", err)
				}
				closers = append(closers, pc.Close)
				port = pc.LocalAddr().(*net.UDPAddr).Port
			} else {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return nil, fmt.Errorf("bench: free tcp port: %w", err)
				}
				closers = append(closers, l.Close)
				port = l.Addr().(*net.TCPAddr).Port
			}
			ports[i] = append(ports[i], port)
		}
	}
	return ports, nil
}

// args returns the needled command line of a peer.
func (s PeerSpec) args(extra []string) []string {
	a := []string{"--data", s.DataDir, "--http", s.HTTPAddr, "--slots", strconv.Itoa(s.Slots)}
	for _, l := range s.Listen {
		a = append(a, "--listen", l)
	}
	for _, j := range s.Join {
		a = append(a, "--join", j)
	}
	if !s.Steal {
		a = append(a, "--steal=false")
	}
	return append(a, extra...)
}

// launch starts peer i and waits until it serves /healthz and names itself
// in /v1/peers.
func (c *Cluster) launch(ctx context.Context, i int, join []string) error {
	p := c.peers[i]
	p.spec.Join = join
	p.spec.Args = p.spec.args(c.cfg.ExtraArgs)
	c.cfg.Logger.Debug("starting peer", "peer", i, "args", strings.Join(p.spec.Args, " "))
	proc, err := c.cfg.Start(ctx, p.spec)
	if err != nil {
		return err
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		p.proc = proc
	}
	c.mu.Unlock()
	if closed {
		return errors.Join(errors.New("bench: cluster closed while starting"), proc.Stop(stopGrace))
	}
	if err := c.waitReady(ctx, p); err != nil {
		return err
	}
	info, err := p.client.Peers(ctx)
	if err != nil {
		return c.peerError(p, fmt.Errorf("GET /v1/peers: %w", err))
	}
	if info.Self == "" {
		return c.peerError(p, errors.New(`GET /v1/peers: empty "self"`))
	}
	p.id = info.Self
	return nil
}

// waitReady polls /healthz until it answers 200, the process exits, or
// ReadyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context, p *clusterPeer) error {
	deadline := time.NewTimer(c.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		ok := p.client.Healthy(hctx)
		cancel()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.proc.Done():
			return c.peerError(p, errors.New("exited before it was ready"))
		case <-deadline.C:
			return c.peerError(p, fmt.Errorf("not ready after %v (GET /healthz)", c.cfg.ReadyTimeout))
		case <-tick.C:
		}
	}
}

// peerError wraps err with the peer's index, address and output tail.
func (c *Cluster) peerError(p *clusterPeer, err error) error {
	out := strings.TrimSpace(p.proc.Output())
	if out == "" {
		out = "(no output)"
	}
	return fmt.Errorf("bench: peer %d (%s %s): %w; its output ends with:\n%s",
		p.spec.Index, p.spec.Binary, strings.Join(p.spec.Args, " "), err, out)
}

// joinAddr returns a multiaddr of peer 0 with its /p2p/ id: a loopback TCP
// address it reports, else the TCP address it was told to listen on.
func (c *Cluster) joinAddr(ctx context.Context) (string, error) {
	p := c.peers[0]
	info, err := p.client.Peers(ctx)
	if err != nil {
		return "", c.peerError(p, fmt.Errorf("GET /v1/peers: %w", err))
	}
	addr := p.spec.Listen[0]
	for _, pi := range info.Peers {
		if pi.ID != info.Self {
			continue
		}
		for _, a := range pi.Addrs {
			if strings.HasPrefix(a, "/ip4/127.0.0.1/tcp/") {
				addr = a
				break
			}
		}
	}
	if !strings.Contains(addr, "/p2p/") {
		addr += "/p2p/" + info.Self
	}
	return addr, nil
}

// waitMesh polls peer 0's /v1/peers until it sees every peer alive.
func (c *Cluster) waitMesh(ctx context.Context) error {
	want := make(map[string]bool, len(c.peers))
	for _, p := range c.peers {
		want[p.id] = true
	}
	deadline := time.NewTimer(c.cfg.ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var seen int
	for {
		info, err := c.peers[0].client.Peers(ctx)
		if err == nil {
			seen = countAlive(info, want)
			if seen == len(want) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return c.peerError(c.peers[0], fmt.Errorf("sees %d of %d peers alive after %v",
				seen, len(want), c.cfg.ReadyTimeout))
		case <-tick.C:
		}
	}
}

// countAlive counts the peers of want that info lists as alive; self counts.
func countAlive(info Peers, want map[string]bool) int {
	alive := map[string]bool{info.Self: want[info.Self]}
	for _, p := range info.Peers {
		if want[p.ID] && (p.State == "alive" || p.State == "") {
			alive[p.ID] = true
		}
	}
	n := 0
	for _, ok := range alive {
		if ok {
			n++
		}
	}
	return n
}

// Len returns the number of peers.
func (c *Cluster) Len() int { return len(c.peers) }

// Client returns the API client of peer i.
func (c *Cluster) Client(i int) *Client { return c.peers[i].client }

// PeerID returns the libp2p id peer i reported as "self".
func (c *Cluster) PeerID(i int) string { return c.peers[i].id }

// Kill9 kills peer i at once (SIGKILL to its process group) and waits for
// it to exit. Its data directory stays until Close.
func (c *Cluster) Kill9(i int) error {
	c.mu.Lock()
	p := c.peers[i]
	p.dead = true
	proc := p.proc
	c.mu.Unlock()
	if proc == nil {
		return fmt.Errorf("bench: kill peer %d: not started", i)
	}
	return proc.Kill()
}

// Close stops every peer (SIGTERM, SIGKILL after 5 s) and removes the data
// directories. It is safe to call more than once and concurrently.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		peers, stopWatch := c.peers, c.stopWatch
		c.mu.Unlock()
		if stopWatch != nil {
			stopWatch()
		}
		errs := make([]error, len(peers))
		var wg sync.WaitGroup
		for i, p := range peers {
			c.mu.Lock()
			proc := p.proc
			c.mu.Unlock()
			if proc != nil {
				wg.Go(func() { errs[i] = proc.Stop(stopGrace) })
			}
		}
		wg.Wait()
		errs = append(errs, os.RemoveAll(c.dir))
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// forgetSettled waits until peer 0 holds peer i (killed) dead, has every
// other live peer forget it (POST /v1/peers/{id}/forget, as an operator
// replacing the host would), and waits for the mesh to settle again: its
// replicas moved to the live peers.
func (c *Cluster) forgetSettled(ctx context.Context, i int) error {
	id := c.PeerID(i)
	for {
		ps, err := c.Client(0).Peers(ctx)
		if err == nil && peerState(ps, id) == "dead" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: peer %d not held dead: %w", i, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for j, p := range c.live() {
		// 404: this peer already forgot it, from another's gossip.
		if err := p.Forget(ctx, id); err != nil && !isStatus(err, http.StatusNotFound) {
			return fmt.Errorf("bench: forget peer %d on a live peer (%d): %w", i, j, err)
		}
	}
	return c.waitSettled(ctx)
}

// live returns the clients of the peers not killed.
func (c *Cluster) live() []*Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Client
	for _, p := range c.peers {
		if !p.dead {
			out = append(out, p.client)
		}
	}
	return out
}
