package nodetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/shard/cron"
	"github.com/needle-mesh/needle/wal"
)

// Epoch is the virtual clock's start.
var Epoch = time.Unix(1_700_000_000, 0).UTC()

// Mesh drives several Nodes on one virtual clock, each through node.Driver
// over an in-memory WAL that survives crashes. Its network delivers every
// message at the next step, after a round trip through the codec (as the
// transport does), unless its link is cut (the message is lost) or held
// (it waits for Release). Everything happens in peer order, so a run is
// deterministic.
type Mesh struct {
	tb         testing.TB
	Now        time.Time
	Partitions int
	Peers      []*Peer
	// Configure, when set, adjusts each NodeConfig before a peer starts.
	Configure func(p *Peer, cfg *node.NodeConfig)
	// Hooks, when set: every message a peer hands the network, every run
	// handed out, every change, every duty of every Ready; Check runs
	// after every step.
	OnSend   func(s Sent)
	OnRun    func(p *Peer, r node.Run)
	OnChange func(p *Peer, c shard.Change)
	OnDuty   func(p *Peer, d node.Duty, rd *node.Ready)
	Check    func()
	// GossipFrom, when set, loses the gossip sent before it, as pubsub
	// loses what a peer publishes before its mesh is grafted.
	GossipFrom time.Time

	cuts  map[Link]bool
	holds map[Link]node.MsgType // held links, by message type (0: every type)
	held  []heldMsg
}

// Link is the one-way link From -> To.
type Link struct{ From, To string }

type heldMsg struct {
	link Link
	env  node.Envelope
}

// Peer is one member of a Mesh.
type Peer struct {
	ID      string
	Node    *node.Node // the current incarnation (also while Down)
	Log     *wal.Memory
	Down    bool
	Boot    int
	Founder bool
	Labels  map[string]string
	// HoldRuns keeps this peer's runs until the test reports them
	// (Report); otherwise each finishes successfully at the next step.
	HoldRuns bool
	// CrashAfterEarly crashes the peer (losing unsynced writes) at the
	// first Ready that sends early messages, between those sends and its
	// persist: the window the early-send rule opens.
	CrashAfterEarly bool
	Runs            []node.Run // runs handed out and not yet reported
	Notify          []node.NotifyJob
	Replies         map[uint64]node.Reply
	Stepped         []string // refusals of Step, as "from type: err"
	// Mute, when set, loses the messages of this peer's for which it
	// returns true (a clone's Raft traffic, say: Clone).
	Mute func(m *node.Message) bool

	m         *Mesh
	clone     bool // started by Clone: messages to its id go to the original
	drv       *node.Driver
	inbox     []node.Envelope
	early     bool // the driver is sending rd.Early
	sentEarly bool // the current Ready sent early messages
}

// NewMesh starts size peers n1..n<size> (n1 founds the mesh) holding the
// given number of partitions. Nothing has run yet: call Run.
func NewMesh(tb testing.TB, size, partitions int) *Mesh {
	return NewMeshWith(tb, size, partitions, nil)
}

// NewMeshWith is NewMesh with Configure set before the first peer starts.
func NewMeshWith(tb testing.TB, size, partitions int, configure func(p *Peer, cfg *node.NodeConfig)) *Mesh {
	m := &Mesh{tb: tb, Now: Epoch, Partitions: partitions, cuts: map[Link]bool{}, holds: map[Link]node.MsgType{},
		Configure: configure}
	for i := range size {
		m.AddPeer(fmt.Sprintf("n%d", i+1))
	}
	return m
}

// AddPeer starts a new peer with an empty disk (the first one founds the
// mesh, the others join it).
func (m *Mesh) AddPeer(id string) *Peer {
	p := &Peer{ID: id, Log: wal.NewMemory(), Founder: len(m.Peers) == 0, m: m}
	m.Peers = append(m.Peers, p)
	m.start(p)
	return p
}

func (m *Mesh) start(p *Peer) {
	m.tb.Helper()
	p.Boot++
	cfg := node.DefaultNodeConfig(p.ID, fmt.Sprint(p.Boot))
	cfg.Partitions, cfg.Slots, cfg.Founder, cfg.Labels = m.Partitions, 2, p.Founder, p.Labels
	cfg.Rand = rand.New(rand.NewPCG(node.RaftID(p.ID), uint64(p.Boot)))
	cfg.Shard.Next = cron.Next
	if m.Configure != nil {
		m.Configure(p, &cfg)
	}
	states, err := wal.LoadAll(p.Log)
	if err != nil {
		m.tb.Fatalf("nodetest: %s: load: %v", p.ID, err)
	}
	if err = cfg.LoadMeta(p.Log); err != nil {
		m.tb.Fatalf("nodetest: %s: load: %v", p.ID, err)
	}
	n, err := node.NewNode(cfg, states, m.Now)
	if err != nil {
		m.tb.Fatalf("nodetest: %s: start: %v", p.ID, err)
	}
	outbox, err := p.Log.Outbox()
	if err == nil {
		err = n.RestoreOutbox(outbox)
	}
	if err != nil {
		m.tb.Fatalf("nodetest: %s: outbox: %v", p.ID, err)
	}
	p.Node, p.Down, p.inbox, p.Runs, p.Replies = n, false, nil, nil, map[uint64]node.Reply{}
	p.drv = &node.Driver{Node: n, IO: meshIO{p}, MaxRounds: 1000}
	p.drv.Trace = func(d node.Duty, rd *node.Ready) {
		p.early = d == node.DutySendEarly
		if d == node.DutyAdvance {
			p.sentEarly = false
		}
		if m.OnDuty != nil {
			m.OnDuty(p, d, rd)
		}
	}
}

// Peer returns the peer named id (nil if none).
func (m *Mesh) Peer(id string) *Peer {
	for _, p := range m.Peers {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// MustPeer returns the peer named id, or fails the test.
func (m *Mesh) MustPeer(id string) *Peer {
	m.tb.Helper()
	p := m.Peer(id)
	if p == nil {
		m.tb.Fatalf("nodetest: no peer %q", id)
	}
	return p
}

// Step advances the clock by d; then each live peer, in order, ticks,
// reports its finished runs, steps the messages delivered to it and
// drives its Readies.
func (m *Mesh) Step(d time.Duration) {
	m.Now = m.Now.Add(d)
	for _, p := range m.Peers {
		if p.Down {
			continue
		}
		p.Node.Tick(m.Now)
		if !p.HoldRuns {
			for _, r := range p.Runs {
				// Took: the tasks stand for real work, worth stealing.
				_ = p.Node.Report(shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload, Took: 100 * time.Millisecond})
			}
			p.Runs = nil
		}
		inbox := p.inbox
		p.inbox = nil
		for _, e := range inbox {
			p.step(e)
		}
		p.Drive()
	}
	if m.Check != nil {
		m.Check()
	}
}

// step hands one delivered message to the node, through the codec.
func (p *Peer) step(e node.Envelope) {
	b, err := node.AppendMessage(nil, &e.Msg)
	if err != nil {
		p.m.tb.Fatalf("nodetest: encode %v: %v", e.Msg.Type, err)
	}
	msg, err := node.DecodeMessage(b)
	if err != nil {
		p.m.tb.Fatalf("nodetest: decode %v: %v", e.Msg.Type, err)
	}
	if err := p.Node.Step(e.Msg.From, msg); err != nil {
		p.Stepped = append(p.Stepped, fmt.Sprintf("%s %v: %v", e.Msg.From, msg.Type, err))
	}
}

// Drive hands the peer's Readies to the shared driver.
func (p *Peer) Drive() {
	err := p.drv.Drive()
	switch {
	case errors.Is(err, errCrashed):
		p.CrashAfterEarly = false
		p.m.Crash(p.ID, true)
	case err != nil:
		p.m.tb.Fatalf("nodetest: %s: %v", p.ID, err)
	}
}

// errCrashed stops a Drive at a crash (CrashAfterEarly).
var errCrashed = errors.New("nodetest: crashed")

// Run steps the mesh in 10 ms steps for d.
func (m *Mesh) Run(d time.Duration) {
	for t := time.Duration(0); t < d; t += 10 * time.Millisecond {
		m.Step(10 * time.Millisecond)
	}
}

// RunUntil steps the mesh in 10 ms steps until cond holds, for at most
// d; it reports whether cond held.
func (m *Mesh) RunUntil(d time.Duration, cond func() bool) bool {
	for t := time.Duration(0); t < d; t += 10 * time.Millisecond {
		if cond() {
			return true
		}
		m.Step(10 * time.Millisecond)
	}
	return cond()
}

// Stabilize delivers messages without moving the clock until none is in
// flight (held ones stay held); it reports whether the mesh got there.
func (m *Mesh) Stabilize() bool {
	for range 1000 {
		if !m.InFlight() {
			return true
		}
		m.Step(0)
	}
	return false
}

// InFlight reports whether a message waits for delivery to a live peer.
func (m *Mesh) InFlight() bool {
	return slices.ContainsFunc(m.Peers, func(p *Peer) bool { return !p.Down && len(p.inbox) > 0 })
}

// Cut loses (on) or delivers again (off) every message from -> to.
func (m *Mesh) Cut(from, to string, on bool) {
	if on {
		m.cuts[Link{from, to}] = true
	} else {
		delete(m.cuts, Link{from, to})
	}
}

// Heal removes every cut.
func (m *Mesh) Heal() { clear(m.cuts) }

// Hold parks the messages of type t (0: every type) from -> to until
// Release or DropHeld.
func (m *Mesh) Hold(from, to string, t node.MsgType) { m.holds[Link{from, to}] = t }

// Release stops holding from -> to and delivers what it held, in order
// (lost if the receiver is down); DropHeld loses it instead.
func (m *Mesh) Release(from, to string) int { return m.unhold(Link{from, to}, true) }

// DropHeld stops holding from -> to and loses what it held.
func (m *Mesh) DropHeld(from, to string) int { return m.unhold(Link{from, to}, false) }

func (m *Mesh) unhold(l Link, deliver bool) int {
	delete(m.holds, l)
	n := 0
	keep := m.held[:0]
	for _, h := range m.held {
		if h.link != l {
			keep = append(keep, h)
			continue
		}
		n++
		if to := m.Peer(l.To); deliver && to != nil && !to.Down {
			to.inbox = append(to.inbox, h.env)
		}
	}
	m.held = keep
	return n
}

// Sent is a message a peer handed the network.
type Sent struct {
	From, To string
	Msg      *node.Message
	Early    bool   // sent from rd.Early, before the Ready's persist
	Fate     string // "" (delivered at the next step), "held", "cut" or "down" (lost)
}

// Send puts a message of the test's making on the link from -> e.To, as
// if peer from had sent it: delivered at the next step, held, cut or lost
// like any other.
func (m *Mesh) Send(from string, e node.Envelope) { m.send(from, e, false) }

// send puts a message on the link from -> to.
func (m *Mesh) send(from string, e node.Envelope, early bool) {
	to := m.Peer(e.To)
	l := Link{from, e.To}
	s := Sent{From: from, To: e.To, Msg: &e.Msg, Early: early}
	switch t, held := m.holds[l]; {
	case to == nil || to.Down:
		s.Fate = "down"
	case m.cuts[l]:
		s.Fate = "cut"
	case held && (t == 0 || t == e.Msg.Type):
		s.Fate = "held"
		m.held = append(m.held, heldMsg{link: l, env: e})
	default:
		to.inbox = append(to.inbox, e)
	}
	if m.OnSend != nil {
		m.OnSend(s)
	}
}

// Crash stops a peer at once: its runs and undelivered messages die;
// lose also drops what its disk holds unsynced (kill -9 and a power
// loss), else the disk is synced (a clean stop).
func (m *Mesh) Crash(id string, lose bool) {
	p := m.MustPeer(id)
	if lose {
		p.Log.Crash()
	} else if err := p.Log.Sync(); err != nil {
		m.tb.Fatal(err)
	}
	p.Down, p.inbox, p.Runs, p.Notify = true, nil, nil, nil
}

// Restart starts a crashed peer again from its disk, as a new
// incarnation (Boot).
func (m *Mesh) Restart(id string) {
	p := m.MustPeer(id)
	if !p.Down {
		m.tb.Fatalf("nodetest: restart of %s, which is up", id)
	}
	m.start(p)
}

// Forget makes every live peer forget id (needle forget).
func (m *Mesh) Forget(id string) {
	for _, p := range m.Peers {
		if !p.Down {
			p.Node.Forget(id)
		}
	}
}

// Clone starts a second process under peer id's identity from a copy of
// its disk, as a data dir copied to another host (a cloned VM image)
// would: same peer id and Raft id, another boot nonce. The clone is
// added to Peers; messages it sends reach the others as id's, while
// messages to id still go to the original (the first peer of that id),
// as a transport with one connection to id would deliver them. mute is
// the clone's Mute. StopClone stops it.
func (m *Mesh) Clone(id string, mute func(m *node.Message) bool) *Peer {
	m.tb.Helper()
	orig := m.MustPeer(id)
	c := &Peer{ID: id, Log: orig.Log.Clone(), Boot: orig.Boot + 1000, Founder: orig.Founder, Labels: orig.Labels, Mute: mute, m: m, clone: true}
	m.Peers = append(m.Peers, c)
	m.start(c)
	return c
}

// StopClone stops a clone (Clone) and removes it from Peers.
func (m *Mesh) StopClone(c *Peer) {
	c.Down, c.inbox, c.Runs, c.Notify = true, nil, nil, nil
	m.Peers = slices.DeleteFunc(m.Peers, func(p *Peer) bool { return p == c })
}
