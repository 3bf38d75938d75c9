package node

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A mesh whose peers start together (NodeConfig.Initial) is founded by
// all of them at once, not by one peer that then hands every partition
// to its replicas: each peer knows every other from the start and
// bootstraps the partitions the ring over that list gives it, with the
// ring's replicas as voters. Every peer computes the same ring from the
// same list, so every replica of a partition starts from the same
// snapshot (index 1, term 1, the same voters), the state a Raft group
// bootstrapped from an initial configuration starts in; the preferred
// owner then campaigns (tickPartition). Nothing moves while such a mesh
// forms: no replica change, no snapshot sent, no membership list merged
// (every heartbeat's digest names the same members).

// startTogether makes the initial membership this node's (it names this
// node) and builds the ring from it at once (no debounce: the list is the
// founders' decision, not a view that may still be moving). A ring it
// cannot build is an error: a partition bootstrapped from another ring
// than its other replicas' would split.
func (m *mesh) startTogether(initial []PeerAddrs, now time.Time) error {
	// Sized once: a thousand-peer list grew each map ten times over.
	members, byRaft := make(map[string]*member, len(initial)), make(map[uint64]string, len(initial))
	maps.Copy(members, m.members)
	maps.Copy(byRaft, m.byRaft)
	m.members, m.byRaft = members, byRaft
	// The list in peer id order: the sorted member ids (memberIDs) come
	// from it as the members are added, rather than by sorting a map's
	// keys, a sort of 1,000 strings for each of 1,000 simulated peers.
	list := initial
	if !slices.IsSortedFunc(list, byPeerID) {
		list = slices.SortedFunc(slices.Values(initial), byPeerID)
	}
	// The addresses are copied into one array (a member's addresses are
	// never written in place, only replaced): a copy per member was a
	// million allocations in a simulated mesh of 1,000.
	total := 0
	for _, p := range list {
		total += len(p.Addrs)
	}
	all := make([]string, 0, total)
	ids, mbs := make([]string, 0, len(list)), make([]*member, 0, len(list))
	// The records too are one array, written in order: a million records
	// allocated one by one in a simulated mesh of 1,000 took 0.8 s to
	// start. A record replaced later (add) leaves its slot unused.
	recs, k := make([]member, len(list)-1), 0 // the list names this node once (validateInitial)
	for _, p := range list {
		mb := m.self
		if p.ID != m.n.cfg.ID {
			from := len(all)
			all = append(all, p.Addrs...)
			if k < len(recs) {
				mb, k = &recs[k], k+1
			} else {
				mb = new(member)
			}
			*mb = member{id: p.ID, addrs: all[from:len(all):len(all)], heard: m.instant(now), state: PeerAlive, listed: true, initial: true}
			m.add(mb)
		}
		ids, mbs = append(ids, p.ID), append(mbs, mb)
	}
	m.ids, m.mbs, m.idsAdd = ids, mbs, m.idsAdd[:0]
	m.changedAt = now
	m.detectAt = earliest(m.detectAt, now.Add(m.n.cfg.DeadAfter/2))
	epoch := m.epoch
	m.rebuildRing()
	if m.epoch == epoch {
		return fmt.Errorf("peer: config Initial: no ring over its %d peers (see the log)", len(initial))
	}
	return nil
}

func byPeerID(a, b PeerAddrs) int { return strings.Compare(a.ID, b.ID) }

// initialVoters returns the voters partition p bootstraps with under the
// initial membership: its ring replicas, as Raft ids, sorted; nil when
// this node is not one of them.
func (m *mesh) initialVoters(p int) []uint64 {
	if m.ring == nil || !m.placedHere(p) {
		return nil
	}
	replicas := m.ring.Replicas(p)
	voters := make([]uint64, len(replicas))
	for i, id := range replicas {
		voters[i] = RaftID(string(id))
	}
	slices.Sort(voters)
	return voters
}

// greetReplicas sends this peer's heartbeat to every peer it shares a
// partition with, asking for theirs (SyncPull): what a replica can apply
// (Heartbeat.Features) decides how a leader serves and what it accepts
// (lacking, sendLease), and a mesh started together has heard nobody's
// heartbeat yet (its first gossip goes out before pubsub has a mesh to
// relay it, and the probe protocol beats again only on changes). A peer
// started before the others sends to peers not up yet; each of them
// greets it when it starts.
//
// One heartbeat goes to all of them, without the address book a
// heartbeat asking for an answer carries (beatFor): every greeted peer
// has the same initial membership, whose addresses are all this peer
// knows yet (a book of 1,000 peers built for each of 1,000 simulated
// peers was 39 MB).
func (m *mesh) greetReplicas() {
	greeted := map[string]bool{m.n.cfg.ID: true}
	var hb *Heartbeat
	for _, i := range m.n.held {
		for _, v := range m.n.parts[i].conf.Voters {
			if id, ok := m.peerOf(v); ok && !greeted[id] {
				if hb == nil {
					hb = m.heartbeat().Heartbeat
					hb.Sync = SyncPull
				}
				greeted[id] = true
				m.members[id].askedAt = m.instant(m.n.now)
				m.sendHeartbeat(id, hb)
			}
		}
	}
}
