package simulate

import "github.com/needle-mesh/needle/node"

// Traffic splits the network's messages by what they are for: membership
// and load (heartbeats and probes: the background of an idle mesh), Raft
// (replication, and its heartbeats), and the rest (client requests and
// replies, outcomes, acks, steals, grants). PerPeerSecond is each over the
// peers and the simulated seconds.
type Traffic struct {
	Membership uint64 `json:"membership"`
	Raft       uint64 `json:"raft"`
	Task       uint64 `json:"task"`
	// MembershipPerPeerSecond is the membership messages each peer sends
	// per simulated second, on average; RaftPerPeerSecond the same for
	// Raft, PerPeerSecond for every message.
	MembershipPerPeerSecond float64 `json:"membership_per_peer_second"`
	RaftPerPeerSecond       float64 `json:"raft_per_peer_second"`
	PerPeerSecond           float64 `json:"per_peer_second"`
	// AfterWarmup is the same rates counted from the end of --warmup on
	// (nil without one): the background of a mesh already formed, where
	// the whole run's rates include every peer learning every other.
	AfterWarmup *Rates `json:"after_warmup,omitempty"`
}

// Rates are messages per peer per simulated second, by what they are for.
type Rates struct {
	Membership float64 `json:"membership"`
	Raft       float64 `json:"raft"`
	All        float64 `json:"all"`
}

// rates returns the messages of counts k per peer per second over secs
// simulated seconds and n peers.
func rates(k [3]uint64, secs float64, n int) Rates {
	d := secs * float64(n)
	if d <= 0 {
		return Rates{}
	}
	return Rates{Membership: float64(k[trafficMembership]) / d, Raft: float64(k[trafficRaft]) / d,
		All: float64(k[trafficMembership]+k[trafficRaft]+k[trafficTask]) / d}
}

// traffic kinds, indexes of network.kinds.
const (
	trafficMembership = iota
	trafficRaft
	trafficTask
)

// trafficKind classifies a message for Traffic.
func trafficKind(m *message) int {
	if m.env == nil {
		return trafficTask
	}
	switch m.env.Msg.Type {
	case node.MsgHeartbeat, node.MsgProbe:
		return trafficMembership
	case node.MsgRaft:
		return trafficRaft
	}
	return trafficTask
}

// traffic fills the report's Traffic.
func (s *sim) traffic() Traffic {
	k := s.net.kinds
	t := Traffic{Membership: k[trafficMembership], Raft: k[trafficRaft], Task: k[trafficTask]}
	r := rates(k, s.now.Seconds(), len(s.nodes))
	t.MembershipPerPeerSecond, t.RaftPerPeerSecond, t.PerPeerSecond = r.Membership, r.Raft, r.All
	if w := s.cfg.Warmup; w > 0 && s.now > w {
		var d [3]uint64
		for i := range d {
			d[i] = k[i] - s.warmKinds[i]
		}
		r := rates(d, (s.now - w).Seconds(), len(s.nodes))
		t.AfterWarmup = &r
	}
	return t
}
