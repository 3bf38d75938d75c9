package peer

import (
	"context"
	"net"

	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/wal"
)

// Transport carries this peer's messages to the others: the node's
// messages (Send, Inbound), its gossip (Publish, Gossip) and the API's
// forwarded requests (Call, HandleCall). The daemon's is the libp2p host
// (p2p.Host); tests run several peers in one process on an in-memory one,
// under testing/synctest's virtual clock. Its methods are safe for
// concurrent use.
type Transport interface {
	// ID is this peer's id; Addrs the addresses it gossips for others to
	// dial.
	ID() string
	Addrs() []string
	// Send queues a message to a peer; an error means it was dropped.
	Send(to string, data []byte) error
	// Call sends a request to a peer and returns its answer.
	Call(ctx context.Context, to string, req []byte) ([]byte, error)
	// HandleCall sets the function answering the others' calls.
	HandleCall(f func(ctx context.Context, from string, req []byte) ([]byte, error))
	// Publish gossips a message to every peer.
	Publish(data []byte) error
	// Inbound and Gossip receive the others' messages and gossip.
	Inbound() <-chan p2p.Frame
	Gossip() <-chan p2p.Frame
	// Close stops it; the peer closes it when Run ends.
	Close() error
}

// dialer is a transport that keeps connections to peers, which the loop
// asks to dial the members it has none to (the libp2p host).
type dialer interface {
	Connected() []string
	Connect(ctx context.Context, addr string) error
}

// disconnecter is a transport that reports the peers whose last
// connection closed (the libp2p host): the loop tells the node, whose
// failure detector pings them at once.
type disconnecter interface {
	Disconnected() <-chan string
}

// idChecker is a transport whose ids have a form (libp2p's): the node
// refuses gossip naming a member by an id of another form.
type idChecker interface {
	ValidID(id string) bool
}

// reuser is a transport that lends the buffers messages are encoded into
// and takes them back once written (the libp2p host: p2p.Host.Buffer).
type reuser interface {
	Buffer() []byte
	SendReusing(to string, data []byte) error
}

// gated is a transport that admits only the peers of a members file
// (the libp2p host with --members): the loop dials no member it would
// only be refused, and a SIGHUP reloads the file.
type gated interface {
	Allowed(id string) bool
	ReloadMembers() (listed, disconnected int, err error)
}

// statser is a transport that counts what it did (the libp2p host), for
// the metrics.
type statser interface {
	Stats() p2p.Stats
}

var (
	_ gated        = (*p2p.Host)(nil)
	_ statser      = (*p2p.Host)(nil)
	_ Transport    = (*p2p.Host)(nil)
	_ reuser       = (*p2p.Host)(nil)
	_ dialer       = (*p2p.Host)(nil)
	_ disconnecter = (*p2p.Host)(nil)
)

// Runtime parts a program (or a test) may give a peer instead of the ones
// it builds from Config.
type Runtime struct {
	// Transport replaces the libp2p host (Listen, Join, SwarmKeyFile and
	// MDNS are then unused).
	Transport Transport
	// WAL replaces Badger in DataDir; with it the peer writes nothing to
	// DataDir (task logs stay in memory).
	WAL wal.Log
	// Listener serves the API instead of a listener on HTTPAddr.
	Listener net.Listener
	// HealthListener serves the health listener instead of one on
	// HealthAddr (needled takes both ports before the data dir is made).
	HealthListener net.Listener
}

// validID is the id check the node applies to members.
func (p *Peer) validID(id string) bool {
	if c, ok := p.tr.(idChecker); ok {
		return c.ValidID(id)
	}
	return p2p.ValidID(id)
}

// ephemeral reports whether the peer keeps nothing in DataDir.
func (c *Config) ephemeral() bool { return c.InMemory || c.Runtime.WAL != nil }
