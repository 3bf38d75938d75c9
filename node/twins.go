package node

import (
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Two live processes under one identity: a data dir copied to a second
// host (a cloned VM image, a restored disk snapshot started beside the
// original) gives both the same peer id and Raft id. Every other peer
// then hears two boot nonces from that id, alternately.
//
// A restart cannot produce that: a boot nonce is drawn at random at each
// start, and the old process is gone before the new one starts, so a
// member's boot moves A -> B and never back to A, except for the old
// run's last messages still in flight when the new run's first ones came
// (another connection, gossip relayed by a neighbour, a receiver's
// backlog): a few flip-backs within a few seconds of the restart, never
// more. Gossip retrieves a message for 5 s at most (its message cache),
// a connection's queue holds less. So a conflict is declared on
// twinFlips flip-backs (a direct message of the boot heard just before
// the current one), each less than twinWindow after the one before, the
// first at least twinSpread before the last: the two runs keep
// alternating long after any message of a dead run can arrive (one late
// message makes two flip-backs at most, to the old boot and back, at
// once), and twinSpread leaves a margin of tens of seconds for a
// receiver whose gossip queue lags its connections. A new boot (a
// restart) starts the count again. Only the sender's own messages count
// (its heartbeats and probes, Node.step): gossip Updates about it may
// name an older run legitimately and are not evidence.
//
// The conflict clears once the member's boot did not change for
// twinClear: one of the two processes stopped. In a quiet mesh a peer
// hears another directly every 30 s or so (probes are paced), and which
// of the two processes it hears is chance: a shorter twinClear (or
// twinWindow) would let a standing conflict come and go.
const (
	twinFlips    = 3
	twinWindow   = 5 * time.Minute
	twinSpread   = 30 * time.Second
	twinClear    = 5 * time.Minute
	twinLogEvery = time.Minute
)

// twin is the boot history of one member whose boot changed: the
// identity-conflict detector's record.
type twin struct {
	cur, prev string    // the boots of its last two runs, from its own messages
	flips     int       // flip-backs (cur <- prev) in a row, each within twinWindow of the one before
	first     time.Time // the first of them
	since     time.Time // when the conflict was declared; zero: none stands
	last      time.Time // the last change of boot (flip-back or new boot)
	logged    time.Time // the last ERROR about it
}

// standing reports whether a conflict stands at now.
func (tw *twin) standing(now time.Time) bool {
	return !tw.since.IsZero() && now.Sub(tw.last) < twinClear
}

// twinHeard records boot, of a message member mb sent itself (mb.boot is
// the boot known so far; both non-empty), for the conflict detector. It
// reports whether a conflict stands for mb: then a change of boot is not
// taken for a restart (heard: no lease expired, no new run) until it
// clears, when the leases of every run but the one still heard are
// expired. Expiring them at every flip would re-run the tasks of both
// processes over and over and fix nothing (docs/decisions.md).
func (m *mesh) twinHeard(mb *member, boot string, now time.Time) bool {
	tw := m.twins[mb.id]
	if tw == nil {
		if boot == mb.boot {
			return false
		}
		if m.twins == nil {
			m.twins = map[string]*twin{}
		}
		tw = &twin{cur: mb.boot}
		m.twins[mb.id] = tw
	}
	if !tw.since.IsZero() && !tw.standing(now) {
		// Only tw.cur was heard for twinClear: one process is left.
		m.n.log.Warn("identity conflict cleared: one process alone is heard under this peer id again", keyPeer, mb.id,
			"boot", tw.cur)
		tw.since, tw.flips = time.Time{}, 0
		survivor := mb.id + "#" + tw.cur
		m.expireHolders(func(h string) bool { return shard.HolderPeer(h) == mb.id && h != survivor })
	}
	if boot == tw.cur {
		if tw.since.IsZero() && now.Sub(tw.last) >= twinClear {
			delete(m.twins, mb.id) // a restart long done
			if len(m.twins) == 0 {
				m.twins = nil // heard skips the detector again
			}
		}
		return !tw.since.IsZero()
	}
	back := boot == tw.prev
	lastChange := tw.last
	tw.prev, tw.cur, tw.last = tw.cur, boot, now
	switch {
	case !back: // a new run: a restart
		tw.flips = 0
		return !tw.since.IsZero()
	case tw.flips == 0 || now.Sub(lastChange) >= twinWindow:
		tw.flips, tw.first = 1, now
	default:
		tw.flips++
	}
	if tw.since.IsZero() && tw.flips >= twinFlips && now.Sub(tw.first) >= twinSpread {
		tw.since = now
		m.twinConflicts++
	}
	if !tw.since.IsZero() && (tw.logged.IsZero() || now.Sub(tw.logged) >= twinLogEvery) {
		tw.logged = now
		m.n.log.Error("identity conflict: two live processes run as this peer id (its data dir was copied to another host); "+
			"stop one of the two, delete that copy's data dir (identity.key included) and start it with --join to join as a new peer",
			keyPeer, mb.id, "boot", tw.cur, "other_boot", tw.prev, "since", tw.since)
	}
	return !tw.since.IsZero()
}

// twinStands reports whether an identity conflict stands for member id.
func (m *mesh) twinStands(id string, now time.Time) bool {
	tw := m.twins[id]
	return tw != nil && tw.standing(now)
}

// IdentityConflict reports whether this node hears two live processes
// under peer id's identity (a copied data dir), with their boots.
func (n *Node) IdentityConflict(id string) (boots [2]string, ok bool) {
	tw := n.mesh.twins[id]
	if tw == nil || !tw.standing(n.now) {
		return boots, false
	}
	return [2]string{tw.cur, tw.prev}, true
}

// IdentityConflicts counts the identity conflicts this node declared
// since it started (NodeStats.IdentityConflicts).
func (n *Node) IdentityConflicts() int { return n.mesh.twinConflicts }
