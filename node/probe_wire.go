package node

import (
	"encoding/binary"

	"github.com/needle-mesh/needle/shard"
)

// ProbeKind says what a MsgProbe is (SWIM's ping, ack and ping-req, and
// news: updates alone). Values are part of the wire format: append only.
type ProbeKind uint8

const (
	ProbePing ProbeKind = iota + 1 // are you alive? answer with ProbeAck and the same Seq
	ProbeAck                       // alive (Target: the peer that answered a relayed ping)
	ProbeReq                       // ping Target for me (indirect probe) and relay its ack
	ProbeNews                      // membership updates only (a suspicion, a refutation): gossiped
	numProbeKinds
)

// peerForgotten is an Update's state for a peer removed from the mesh for
// good (needle forget): applied only where that peer is not alive.
const peerForgotten PeerState = PeerDead + 1

// Probe is a MsgProbe: the failure detector's ping, ack or indirect ping,
// from which every member also learns the sender's incarnation, features
// and load, and a few recent membership updates ride along (piggyback).
type Probe struct {
	Kind     ProbeKind
	Seq      uint64
	Target   string // ProbeReq: the peer to ping; a relayed ProbeAck: the peer that answered
	Boot     string // the sender's boot nonce
	Inc      uint64 // the sender's incarnation
	Features uint64 // the sender's Features
	Load     Load   // the sender's load: idle peers sample it
	Updates  []Update
	// BeatFollows, on a ProbePing: the sender's heartbeat with a SyncPull
	// follows the ping (the sender has none of the target's yet), so the
	// target need not ask for the sender's (appended after the updates'
	// addresses; older peers skip it and ask).
	BeatFollows bool
	// Beat, on a ProbePing: the sender's heartbeat, when the target has
	// none of the sender's yet; with Sync SyncPull, the ProbeAck carries
	// the target's in return. A first contact is two messages, not four
	// (a ping, a heartbeat, an ack and a heartbeat). Appended after the
	// flags byte: an older peer skips it, sees no BeatFollows, and asks
	// for the heartbeat as it did.
	Beat *Heartbeat
	// Plain: the sender's heartbeat would tell the receiver nothing this
	// probe and the receiver's membership do not (no labels, no external
	// workers, not draining, and the receiver has its addresses from the
	// same initial membership), so a receiver that knows its addresses
	// need not ask for it. At 1,000 peers started together, most probes
	// of the first minutes are first contacts, and each carried two
	// heartbeats, address books of 1,000 peers, that told nothing.
	// Appended as a bit of the flags byte (older peers ignore it and ask).
	Plain bool
	// Version, on a plain probe, is the sender's build version, which the
	// heartbeat it stands for would carry (Heartbeat.Version): a mesh
	// started together exchanges no heartbeat between most pairs of
	// peers. "" otherwise, and from an older peer. Appended: a bit of the
	// flags byte says the string follows the heartbeat (older peers skip
	// both).
	Version string
}

// Update is one membership change carried by probes: a peer's state at an
// incarnation. A higher incarnation wins; at one incarnation dead beats
// suspect beats alive; only the peer itself raises its incarnation (to
// refute a suspicion).
type Update struct {
	ID    string
	Boot  string
	Inc   uint64
	State PeerState
	// Addrs are the peer's transport addresses, on a PeerAlive update
	// (appended after the updates, one list per update): a peer that
	// learns a member from an update can reach it (probe_addr.go).
	Addrs []string
}

// probeBeatFollows is BeatFollows' bit in the flags byte that ends a probe;
// probeBeat says a heartbeat (Probe.Beat) follows that byte; probePlain is
// Plain's bit.
const (
	probeBeatFollows = 1
	probeBeat        = 2
	probePlain       = 4
	probeVersion     = 8
)

// maxProbeUpdates bounds the updates one probe carries on the wire.
const maxProbeUpdates = 64

func appendProbe(dst []byte, p *Probe) []byte {
	if p == nil {
		p = &Probe{}
	}
	dst = append(dst, byte(p.Kind))
	dst = binary.AppendUvarint(dst, p.Seq)
	dst = shard.AppendString(dst, p.Target)
	dst = shard.AppendString(dst, p.Boot)
	dst = binary.AppendUvarint(dst, p.Inc)
	dst = binary.AppendUvarint(dst, p.Features)
	dst = appendLoad(dst, p.Load)
	dst = binary.AppendUvarint(dst, uint64(len(p.Updates)))
	for _, u := range p.Updates {
		dst = shard.AppendString(dst, u.ID)
		dst = shard.AppendString(dst, u.Boot)
		dst = binary.AppendUvarint(dst, u.Inc)
		dst = append(dst, byte(u.State))
	}
	for _, u := range p.Updates {
		dst = appendStrings(dst, u.Addrs)
	}
	var flags byte
	if p.BeatFollows {
		flags |= probeBeatFollows
	}
	if p.Beat != nil {
		flags |= probeBeat
	}
	if p.Plain {
		flags |= probePlain
	}
	if p.Version != "" {
		flags |= probeVersion
	}
	dst = append(dst, flags)
	if p.Beat != nil {
		dst = shard.AppendBytes(dst, appendHeartbeat(nil, p.Beat))
	}
	if p.Version != "" {
		dst = shard.AppendString(dst, p.Version)
	}
	return dst
}

func decodeProbe(d *shard.Decoder) *Probe {
	p := &Probe{Kind: ProbeKind(d.Byte())}
	if d.Err() == nil && (p.Kind == 0 || p.Kind >= numProbeKinds) {
		d.Fail("probe kind %d", p.Kind)
		return p
	}
	p.Seq = d.Uvarint()
	p.Target = d.String()
	p.Boot = d.String()
	p.Inc = d.Uvarint()
	p.Features = d.Uvarint()
	p.Load = decodeLoad(d)
	n := d.Count(4)
	if n > maxProbeUpdates {
		d.Fail("probe with %d updates, over %d", n, maxProbeUpdates)
		return p
	}
	for range n {
		u := Update{ID: d.String(), Boot: d.String(), Inc: d.Uvarint(), State: PeerState(d.Byte())}
		if d.Err() != nil {
			return p
		}
		if u.ID == "" || u.State < PeerAlive || u.State > peerForgotten {
			d.Fail("probe update %q state %d", u.ID, u.State)
			return p
		}
		p.Updates = append(p.Updates, u)
	}
	for i := range p.Updates {
		if d.Err() != nil || d.Len() == 0 {
			break // from before the updates' addresses
		}
		p.Updates[i].Addrs = decodeAddrs(d)
	}
	if d.Err() != nil || d.Len() == 0 {
		return p
	}
	flags := d.Byte() // other bits: a newer peer's
	p.BeatFollows = flags&probeBeatFollows != 0
	p.Plain = flags&probePlain != 0
	if flags&probeBeat != 0 {
		b := d.Bytes()
		if d.Err() != nil {
			return p
		}
		bd := shard.NewDecoder(b)
		p.Beat = decodeHeartbeat(&bd)
		if err := bd.Err(); err != nil {
			d.Fail("probe heartbeat: %v", err)
		}
	}
	if flags&probeVersion != 0 && d.Err() == nil {
		if p.Version = d.String(); d.Err() == nil && p.Version == "" {
			d.Fail("probe version flagged but empty")
		}
	}
	return p
}
