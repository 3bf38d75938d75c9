package node

import (
	"fmt"
	"time"

	"github.com/needle-mesh/needle/ring"
)

// checkBeat refuses a heartbeat from a peer that cannot be in this mesh:
// another partition count, replica count or placement, or no spread
// placement in a mesh that places with it.
func (n *Node) checkBeat(from string, hb *Heartbeat) error {
	if hb.Partitions != n.cfg.Partitions {
		return n.partitionsMismatch(from, hb.Partitions)
	}
	if hb.Replicas != 0 && (hb.Replicas != n.cfg.Replicas || hb.Placement != n.cfg.Placement) {
		return n.placementMismatch(from, hb)
	}
	if n.cfg.Placement == ring.PlacementSpread && hb.Features&FeaturePlacementSpread == 0 {
		return fmt.Errorf("%w: %s cannot place replicas with the spread placement of this mesh (an older release)", ErrPlacement, from)
	}
	return nil
}

// refuse is what follows a refused heartbeat. A peer joins by its
// heartbeat, but under the probe protocol most peers hear of a joiner
// second-hand (a member list, a probe's update), and a member's probes
// keep it alive: the refusal must hold for those too. So the sender's run
// is recorded (mesh.refused) until a heartbeat of it is taken: no list or
// update adds it or brings it back (learn, apply), its other messages are
// refused (Step), and a member that sends such a heartbeat (restarted
// with other flags) is dead here. It stays in the member list (as a
// crashed peer does, until forgotten): a peer that restarted with other
// flags learns from that list, in this peer's heartbeat, that it is the
// odd one out (placementMismatch). A heartbeat that asks for one in return
// (Sync: a joiner, a restarted peer) gets this peer's, without Sync, at
// most once per ProbeEvery: no member heartbeats to everyone any more,
// and the odd peer must hear one to stop (Fatal) instead of waiting for a
// mesh that never answers it.
func (m *mesh) refuse(from string, hb *Heartbeat, now time.Time) {
	if m.n.cfg.ValidID != nil && !m.n.cfg.ValidID(from) {
		return
	}
	if _, ok := m.refused[from]; !ok && len(m.refused) >= maxRefused {
		return // bounded: keyed peers only, but many of them
	}
	m.refused[from] = hb.Boot
	if mb := m.members[from]; mb != nil && mb.state != PeerDead {
		m.markDead(mb, now)
	}
	if hb.Sync != 0 && m.swimOn() && (m.sw.introducedAt.IsZero() || now.Sub(m.sw.introducedAt) >= m.n.cfg.ProbeEvery) {
		m.sw.introducedAt = now
		m.sendBeat(from, 0)
	}
}

// maxRefused bounds mesh.refused.
const maxRefused = 1024

// isRefused reports whether a list or update naming id (of run boot, ""
// when unknown) must not add it: its heartbeat was refused here, and no
// heartbeat of it was taken since.
func (m *mesh) isRefused(id, boot string) bool {
	b, ok := m.refused[id]
	return ok && (boot == "" || b == "" || boot == b)
}
