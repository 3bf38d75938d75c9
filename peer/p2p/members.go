package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// A members file (Config.MembersFile, needled --members) lists the peer
// ids allowed in the mesh, one a line:
//
//	# web tier
//	12D3KooWAbc...  web-3
//	12D3KooWDef...
//
// A line holds an id, optionally followed by white space and a name (for
// the logs: the rest of the line). Blank lines and lines starting with #
// are skipped. With a swarm key, the key decides who can speak to the
// mesh at all and the list which of the key's holders may; without one,
// the list alone closes the mesh (peer.Config.MembersFile). A host is
// shut out by removing its line and sending SIGHUP to every peer, without
// rotating a key everywhere.
//
// Enforcement is a libp2p connection gater (memberGate): a dial to an id
// not listed is refused before any packet is sent, and a connection from
// one is closed right after the security handshake (which proves the id),
// before any protocol runs. Gossip is checked too, by the origin its
// author signed: a listed peer cannot relay an unlisted one's messages.

// ErrMembers is wrapped by every error LoadMembers returns for a file
// that can be read but not used.
var ErrMembers = errors.New("p2p: bad members file")

// maxMembersFile bounds the members file read: a list of a million peers
// is still well under it; a wrong path (a log, an image) is not.
const maxMembersFile = 64 << 20

// refusedLogEvery is how often at most the gate logs the refusal of one
// peer: a refused host keeps dialing (its join loop backs off to 5 s),
// and a line per dial would fill the log.
const refusedLogEvery = time.Minute

// refusedLogKeep bounds the peers whose last log line the gate remembers;
// past it the entries older than refusedLogEvery are dropped, so that
// hosts with ever new ids cannot grow it without limit.
const refusedLogKeep = 1024

// LoadMembers reads and parses a members file: the allowed peer ids, each
// with its name ("" when the line gives none). Its error names the file
// and the line; an empty list is an error, since it would shut this peer
// out of its own mesh.
func LoadMembers(path string) (map[peer.ID]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("p2p: read members: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxMembersFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("p2p: read members %s: %w", path, err)
	case len(raw) > maxMembersFile:
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrMembers, path, maxMembersFile)
	}
	return ParseMembers(path, string(raw))
}

// ParseMembers parses the text of members file file (named in errors).
func ParseMembers(file, text string) (map[peer.ID]string, error) {
	out := map[peer.ID]string{}
	lines := map[peer.ID]int{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		idText, name := line, ""
		if j := strings.IndexFunc(line, unicode.IsSpace); j >= 0 {
			idText, name = line[:j], strings.TrimSpace(line[j:])
		}
		id, err := peer.Decode(idText)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: line %d: %q is not a peer id (want 12D3KooW... [name]; needled --init prints a peer's id): %v",
				ErrMembers, file, i+1, idText, err)
		}
		if prev, dup := lines[id]; dup {
			return nil, fmt.Errorf("%w: %s: line %d: peer %s is on line %d too", ErrMembers, file, i+1, id, prev)
		}
		lines[id] = i + 1
		out[id] = name
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: lists no peer id (it would shut this peer out of its own mesh)", ErrMembers, file)
	}
	return out, nil
}

// memberGate is the connection gater and gossip validator of a host run
// with Config.MembersFile. It is made before the libp2p host (a gater is a
// construction option), so it knows this host's id from the key.
type memberGate struct {
	self    peer.ID
	file    string
	log     *slog.Logger
	allowed atomic.Pointer[map[peer.ID]string] // swapped whole by reload

	// refusedIn and refusedOut count the connections refused, accepted
	// and dialed; gossipRefused the gossip messages of unlisted origins.
	refusedIn, refusedOut, gossipRefused atomic.Uint64

	logged peerLogs         // the last refusal logged, by peer
	now    func() time.Time // time.Now; tests step it
}

var _ connmgr.ConnectionGater = (*memberGate)(nil)

// newMemberGate loads file for the host of identity self.
func newMemberGate(file string, self peer.ID, log *slog.Logger) (*memberGate, error) {
	ids, err := LoadMembers(file)
	if err != nil {
		return nil, err
	}
	g := &memberGate{self: self, file: file, log: log, now: time.Now}
	g.allowed.Store(&ids)
	g.warnSelf(ids)
	log.Info("members: only the peers listed may connect", keyFile, file, "peers", len(ids))
	return g, nil
}

// warnSelf logs when this host's own id is not listed: it may still
// connect to itself, but the other peers, reading the same file, refuse
// it.
func (g *memberGate) warnSelf(ids map[peer.ID]string) {
	if _, ok := ids[g.self]; !ok {
		g.log.Warn("members: this peer's own id is not in --members "+g.file+": the other peers refuse it",
			keyPeer, g.self.String(), keyFile, g.file)
	}
}

// allows reports whether peer p may connect: this host always, others
// when listed.
func (g *memberGate) allows(p peer.ID) bool {
	if p == g.self {
		return true
	}
	_, ok := (*g.allowed.Load())[p]
	return ok
}

// check is allows, counting and logging (rate-limited) a refusal.
func (g *memberGate) check(p peer.ID, dir network.Direction) bool {
	if g.allows(p) {
		return true
	}
	if dir == network.DirInbound {
		g.refusedIn.Add(1)
	} else {
		g.refusedOut.Add(1)
	}
	g.logRefused(p, dir.String())
	return false
}

// peerLogs rate-limits a log line per peer: at most one per
// refusedLogEvery, remembering at most about refusedLogKeep peers (past it
// the entries older than refusedLogEvery are dropped, so that hosts with
// ever new ids cannot grow it without limit). The zero value is ready.
type peerLogs struct {
	mu     sync.Mutex
	logged map[peer.ID]time.Time // the last line logged, by peer
}

// due reports whether a line about p may be logged at now, and if so
// records it.
func (l *peerLogs) due(p peer.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, seen := l.logged[p]; seen && now.Sub(last) < refusedLogEvery {
		return false
	}
	if l.logged == nil {
		l.logged = map[peer.ID]time.Time{}
	}
	if len(l.logged) >= refusedLogKeep {
		for q, t := range l.logged {
			if now.Sub(t) >= refusedLogEvery {
				delete(l.logged, q)
			}
		}
	}
	l.logged[p] = now
	return true
}

// logRefused logs the refusal of p, at most once per refusedLogEvery.
func (g *memberGate) logRefused(p peer.ID, what string) {
	if g.logged.due(p, g.now()) {
		g.log.Warn("refused peer "+p.String()+": not in --members "+g.file,
			keyPeer, p.String(), "what", what, "next_log_after", refusedLogEvery.String())
	}
}

// InterceptPeerDial refuses to dial an unlisted peer: the dial fails at
// once, with no packet sent.
func (g *memberGate) InterceptPeerDial(p peer.ID) bool { return g.check(p, network.DirOutbound) }

// InterceptAddrDial allows every address of a peer InterceptPeerDial let
// through.
func (g *memberGate) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

// InterceptAccept allows every inbound connection until its handshake has
// proved the remote's id.
func (g *memberGate) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured refuses a connection, either way, to a peer that is not
// listed, once the security handshake proved its id.
func (g *memberGate) InterceptSecured(dir network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return g.check(p, dir)
}

// InterceptUpgraded checks again, without counting or logging: a reload
// between the handshake and here must not let a removed peer in.
func (g *memberGate) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	return g.allows(c.RemotePeer()), 0
}

// validate is the gossip topic's validator: a message whose author (its
// signed origin, not the neighbour relaying it) is not listed is dropped,
// neither delivered nor forwarded. It is ignored rather than rejected:
// while an edit of the file reaches the peers one by one, a listed relay
// may still hold the removed peer listed, and is not at fault.
func (g *memberGate) validate(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	from := m.GetFrom()
	if g.allows(from) {
		return pubsub.ValidationAccept
	}
	g.gossipRefused.Add(1)
	g.logRefused(from, "gossip")
	return pubsub.ValidationIgnore
}

// reload reads the file again and makes it the list, returning the new
// list; on an error the list stays as it was.
func (g *memberGate) reload() (map[peer.ID]string, error) {
	ids, err := LoadMembers(g.file)
	if err != nil {
		return nil, err
	}
	g.allowed.Store(&ids)
	g.warnSelf(ids)
	return ids, nil
}

// ErrNoMembers is returned by ReloadMembers for a host without
// Config.MembersFile: there is no list to reload.
var ErrNoMembers = errors.New("p2p: no members file")

// ReloadMembers reads Config.MembersFile again (SIGHUP) and makes it the
// list of peers allowed; the peers connected that it no longer lists are
// disconnected at once, and refused from then on. On an error (the file
// unreadable, a bad line, no id) the list stays as it was: a half-written
// file must neither open the mesh nor shut it. It returns the number of
// peers listed and of peers disconnected.
func (h *Host) ReloadMembers() (listed, disconnected int, err error) {
	if h.gate == nil {
		return 0, 0, ErrNoMembers
	}
	if h.isClosed() {
		return 0, 0, ErrClosed
	}
	ids, err := h.gate.reload()
	if err != nil {
		return 0, 0, err
	}
	for _, p := range h.host.Network().Peers() {
		if h.gate.allows(p) {
			continue
		}
		disconnected++
		h.log.Warn("refused peer "+p.String()+": removed from --members "+h.gate.file+"; disconnecting it", keyPeer, p.String())
		if err := h.host.Network().ClosePeer(p); err != nil {
			h.log.Debug("members: close peer", keyPeer, p.String(), keyErr, err)
		}
	}
	return len(ids), disconnected, nil
}

// Allowed reports whether peer id may connect to this host: true without
// Config.MembersFile, else whether the list holds it (this host's own id
// always). The peer's loop skips the members it would only be refused.
func (h *Host) Allowed(id string) bool {
	if h.gate == nil {
		return true
	}
	p, err := peer.Decode(id)
	return err == nil && h.gate.allows(p)
}
