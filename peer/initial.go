package peer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/p2p"
)

// parseInitial parses Config.Initial, full multiaddrs each ending in
// /p2p/<peer id>, into the node's initial membership: one entry per peer,
// in the order each is first named, its addresses merged (sorted, each
// once). An address keeps its /p2p/<id>: members' addresses are full
// multiaddrs, as the host's Addrs are and as dialMembers dials them.
func parseInitial(list []string) ([]node.PeerAddrs, error) {
	var out []node.PeerAddrs
	at := map[string]int{}
	for _, s := range list {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			if head, id, ok := strings.Cut(s, "/p2p/"); ok {
				if _, herr := ma.NewMultiaddr(head); herr == nil {
					id, _, _ = strings.Cut(id, "/")
					return nil, fmt.Errorf("peer: --initial-peers %q: %q is not a peer id", s, id)
				}
			}
			return nil, fmt.Errorf("peer: --initial-peers %q is not a multiaddr: %v", s, err)
		}
		ai, err := lpeer.AddrInfoFromP2pAddr(m)
		if err != nil {
			if _, perr := m.ValueForProtocol(ma.P_P2P); perr != nil {
				return nil, fmt.Errorf("peer: --initial-peers %q has no /p2p/<peer id>: "+
					"every initial peer is named by its id (needled --init prints it)", s)
			}
			return nil, fmt.Errorf("peer: --initial-peers %q: want /p2p/<peer id> at its end", s)
		}
		if len(ai.Addrs) == 0 {
			return nil, fmt.Errorf("peer: --initial-peers %q has no address before /p2p/<peer id>", s)
		}
		id := ai.ID.String()
		if !p2p.ValidID(id) {
			return nil, fmt.Errorf("peer: --initial-peers %q: %q is not a peer id", s, id)
		}
		full, err := lpeer.AddrInfoToP2pAddrs(ai)
		if err != nil {
			return nil, fmt.Errorf("peer: --initial-peers %q: %v", s, err)
		}
		i, ok := at[id]
		if !ok {
			i = len(out)
			at[id] = i
			out = append(out, node.PeerAddrs{ID: id})
		}
		for _, a := range full {
			out[i].Addrs = append(out[i].Addrs, a.String())
		}
	}
	for i := range out {
		slices.Sort(out[i].Addrs)
		out[i].Addrs = slices.Compact(out[i].Addrs)
	}
	return out, nil
}

// initialJoins returns the addresses of the initial peers but self, for
// the host to dial at start and keep connected as it does Config.Join.
func initialJoins(initial []node.PeerAddrs, self string) []string {
	var out []string
	for _, pa := range initial {
		if pa.ID != self {
			out = append(out, pa.Addrs...)
		}
	}
	return out
}

// initialMembership sets ncfg's Founder and Initial from Config: a peer
// named in Initial starts the mesh with the others named there (its own
// entry carrying the addresses its host listens on); one not named joins
// through them; without Initial, a peer without Join founds a mesh.
// stored says the data dir holds partitions or has left some: the node
// then ignores Initial, and the peers listed are only dialed.
func (p *Peer) initialMembership(ncfg *node.NodeConfig, initial []node.PeerAddrs, stored bool) {
	ncfg.Founder = len(p.cfg.Join) == 0 && len(initial) == 0
	if len(initial) == 0 {
		return
	}
	i := slices.IndexFunc(initial, func(pa node.PeerAddrs) bool { return pa.ID == ncfg.ID })
	switch {
	case stored:
		p.log.Info("the data dir holds (or held) partitions: --initial-peers are only dialed", "initial_peers", len(initial))
	case i < 0:
		p.log.Info("this peer is not in --initial-peers: it joins the mesh through them", "initial_peers", len(initial))
	default:
		p.log.Info("this peer is one of --initial-peers: it starts the mesh with them", "initial_peers", len(initial))
	}
	if i < 0 {
		return
	}
	initial = slices.Clone(initial)
	initial[i] = node.PeerAddrs{ID: ncfg.ID, Addrs: slices.Clone(ncfg.Addrs)}
	ncfg.Initial = initial
}

// Init creates cfg's data dir as a first start would, without starting
// the peer (needled --init): the WAL with the mesh settings (partition
// count, placement), then the identity key, so that a later start finds
// both. It returns the peer id and the addresses the peer would listen
// on (p2p.ListenAddrs). On a data dir that exists it returns the stored
// id, refusing what a start refuses (a key without its WAL, another
// --placement) and writing nothing new (but the placement record of a
// data dir an earlier release created, as a start writes it).
func Init(cfg Config) (id string, addrs []string, err error) {
	// No API is served: its address and token are not checked (an image
	// whose environment serves it on every interface may init without
	// the token).
	cfg.HTTPAddr = "127.0.0.1:0"
	// Nor is the mesh served: its addresses print as given, key or none.
	// Without a key, a members file, --listen or --insecure-open-mesh a
	// start listens on loopback (checkMeshOpen), so those are the
	// addresses it would listen on; p2p's default (every interface)
	// printed 0.0.0.0 instead.
	if !cfg.meshClosed() && !cfg.OpenMesh && len(cfg.Listen) == 0 {
		cfg.Listen = slices.Clone(LoopbackListen)
	}
	cfg.OpenMesh = true
	if err := cfg.Validate(); err != nil {
		return "", nil, configError{err}
	}
	if cfg.InMemory || cfg.Runtime.WAL != nil || cfg.Runtime.Transport != nil {
		return "", nil, errors.New("peer: init needs a data dir (not InMemory, no Runtime WAL or transport)")
	}
	p := &Peer{cfg: cfg, log: cfg.Logger}
	if p.wal, err = p.openWAL(); err != nil {
		return "", nil, err
	}
	defer func() {
		if cerr := p.wal.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("peer: close wal: %w", cerr)
		}
	}()
	if err := p.checkWALKept(); err != nil {
		return "", nil, err
	}
	parts, pl, err := p.meshSettings()
	if err != nil {
		return "", nil, err
	}
	// The key comes after the WAL's first record (checkWALKept).
	id, created, err := p2p.InitIdentity(cfg.DataDir, cfg.Logger)
	if err != nil {
		return "", nil, fmt.Errorf("peer: identity: %w", err)
	}
	cfg.Logger.Info("data dir ready", "data", cfg.DataDir, "peer", id, "created", created,
		"partitions", parts, "placement", pl.String())
	return id, p2p.ListenAddrs(p2p.Config{Listen: cfg.Listen, SwarmKeyFile: cfg.SwarmKeyFile}, id), nil
}
