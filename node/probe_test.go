package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// states returns what every up node of c thinks of peer id.
func states(c *cluster, id string) map[string]PeerState {
	out := map[string]PeerState{}
	for _, cn := range c.nodes {
		if cn.down || cn.id == id {
			continue
		}
		if mb := cn.n.mesh.members[id]; mb != nil {
			out[cn.id] = mb.state
		}
	}
	return out
}

// An idle mesh under the probe protocol sends a bounded number of
// membership messages per peer (not one heartbeat to every other each
// second), declares no one dead while every peer runs, and a peer that
// stops is dead to every other within a few seconds.
func TestProbeIdleCostAndDetection(t *testing.T) {
	const size = 12
	c := newCluster(t, size, 8)
	membership := 0
	c.trace = func(id string, d Duty, rd *Ready) {
		if d != DutySend {
			return
		}
		for _, e := range rd.Messages {
			if e.Msg.Type == MsgProbe || e.Msg.Type == MsgHeartbeat {
				membership++
			}
		}
		membership += len(rd.Gossip) * (size - 1)
	}
	c.run(15 * time.Second) // the mesh forms, replicas move
	c.check = func() {
		for _, cn := range c.nodes {
			for _, m := range cn.n.Members() {
				if m.State == PeerDead {
					t.Fatalf("%s declared %s dead in a mesh without faults", cn.id, m.ID)
				}
			}
		}
	}
	membership = 0
	const idle = 30 * time.Second
	c.run(idle)
	perPeerSecond := float64(membership) / size / idle.Seconds()
	// Two probes (ping, ack) per period of 500 ms, and a few exchanges of
	// membership lists: all-to-all heartbeats would be 11 a second.
	if perPeerSecond > 5 {
		t.Errorf("membership messages per peer per second = %.2f; want at most 5 (one ping and one ack per period)", perPeerSecond)
	}
	c.check = nil
	victim := c.node("n7")
	victim.down = true
	c.run(5 * time.Second)
	for id, st := range states(c, victim.id) {
		if st != PeerDead {
			t.Errorf("%s thinks %s is %v 5 s after it stopped; want dead", id, victim.id, st)
		}
	}
}

// A suspicion of a live peer is refuted: the peer raises its incarnation,
// and no peer declares it dead.
func TestProbeSuspicionRefuted(t *testing.T) {
	c := newCluster(t, 4, 8)
	c.run(15 * time.Second)
	n1 := c.node("n1")
	inc := n1.n.mesh.sw.inc
	claim := Message{Type: MsgProbe, From: "n2", Probe: &Probe{Kind: ProbeNews, Boot: "1", Inc: c.node("n2").n.mesh.sw.inc,
		Updates: []Update{{ID: "n1", Boot: "1", Inc: inc, State: PeerSuspect}}}}
	if err := c.node("n3").n.Step("n2", claim); err != nil {
		t.Fatal(err)
	}
	if st := c.node("n3").n.mesh.members["n1"].state; st != PeerSuspect {
		t.Fatalf("n3 thinks n1 is %v after the claim; want suspect", st)
	}
	c.run(5 * time.Second)
	if got := n1.n.mesh.sw.inc; got <= inc {
		t.Errorf("n1's incarnation = %d after it was suspected at %d; want it raised (refuted)", got, inc)
	}
	for id, st := range states(c, "n1") {
		if st != PeerAlive {
			t.Errorf("%s thinks n1 is %v; want alive after the refutation", id, st)
		}
	}
}

// A probe from a host that never heartbeated is refused and adds no one,
// like Raft from a non-member; updates name only valid ids.
func TestProbeFromStrangerRefused(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n1 := c.node("n1").n
	n1.cfg.ValidID = func(id string) bool { return len(id) == 2 && id[0] == 'n' }
	m := Message{Type: MsgProbe, From: "intruder", Probe: &Probe{Kind: ProbePing, Seq: 1,
		Updates: []Update{{ID: "n9", State: PeerAlive}}}}
	if err := n1.Step("intruder", m); !errors.Is(err, ErrNotMember) {
		t.Fatalf("Step(probe from a non-member) = %v; want ErrNotMember", err)
	}
	bad := Message{Type: MsgProbe, From: "n2", Probe: &Probe{Kind: ProbeNews, Updates: []Update{{ID: "junk-id", State: PeerAlive}, {ID: "n3", State: peerForgotten}}}}
	if err := n1.Step("n2", bad); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(memberIDs(n1)); got != "[n1 n2 n3]" {
		t.Fatalf("members = %s; want [n1 n2 n3] (no stranger, no junk id, no forget of a live peer)", got)
	}
}

// A member whose heartbeat lacks FeatureProbe (the previous release) puts
// the mesh back on heartbeats to everyone every HeartbeatEvery, with death
// by silence, and nobody is declared dead by the switch.
func TestProbeOldPeerSwitchesToHeartbeats(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n1 := c.node("n1").n
	if !n1.mesh.swimOn() {
		t.Fatal("probe protocol off in a mesh of this release")
	}
	// A peer of the previous release joins (not a member that speaks
	// probes: its next probe would switch the mesh back).
	old := c.node("n2").n.mesh.heartbeat()
	old.From, old.Heartbeat.Boot = "n9", "1"
	old.Heartbeat.Features, old.Heartbeat.Inc = FeatureRetry, 0
	if err := n1.Step("n9", old); err != nil {
		t.Fatal(err)
	}
	if n1.mesh.swimOn() {
		t.Fatal("probe protocol still on after a heartbeat without FeatureProbe")
	}
	beats := 0
	c.trace = func(id string, d Duty, rd *Ready) {
		if id == "n1" && d == DutySend {
			beats += len(rd.Gossip)
		}
	}
	c.run(5 * time.Second)
	if beats < 4 {
		t.Errorf("n1 gossiped %d heartbeats in 5 s after an old peer appeared; want about 5", beats)
	}
	for _, id := range []string{"n2", "n3"} {
		if st := n1.mesh.members[id].state; st != PeerAlive {
			t.Errorf("n1 thinks %s is %v after switching; want alive", id, st)
		}
	}
}

// A ping from a peer of the previous release says its heartbeat (with a
// request for the target's) follows as a message of its own, so the target
// answers the ping alone and does not ask for the prober's heartbeat, which
// would cross it and be answered too. A ping without the flag (an older
// peer's, a relayed one) is asked back as before.
func TestProbePingBeatFollows(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n3 := c.node("n3").n
	inc := c.node("n1").n.mesh.sw.inc
	for _, follows := range []bool{true, false} {
		mb := n3.mesh.members["n1"]
		mb.beat, mb.askedAt = false, 0 // n1 known second-hand
		before := len(n3.rd.Messages)
		ping := Message{Type: MsgProbe, From: "n1", Probe: &Probe{Kind: ProbePing, Seq: 7, Boot: "1", Inc: inc, Features: Features, BeatFollows: follows}}
		if err := n3.Step("n1", ping); err != nil {
			t.Fatal(err)
		}
		acks, asks := 0, 0
		for _, e := range n3.rd.Messages[before:] {
			switch {
			case e.To == "n1" && e.Msg.Type == MsgProbe && e.Msg.Probe.Kind == ProbeAck && e.Msg.Probe.Seq == 7:
				acks++
			case e.To == "n1" && e.Msg.Type == MsgHeartbeat && e.Msg.Heartbeat.Sync == SyncPull:
				asks++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[follows]; acks != 1 || asks != want {
			t.Errorf("ping with BeatFollows %v: %d acks, %d heartbeat requests; want 1 and %d", follows, acks, asks, want)
		}
	}
}

// A first contact costs two messages: the prober's heartbeat and its
// request for the target's ride on the ping (Probe.Beat, SyncPull), and
// the target's heartbeat rides back on the ack. No heartbeat travels
// alone, and each side then has the other's.
func TestProbeFirstContactTwoMessages(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n1, n3 := c.node("n1").n, c.node("n3").n
	for _, pair := range [][2]*Node{{n1, n3}, {n3, n1}} {
		pair[0].mesh.members[pair[1].cfg.ID].beat = false // known second-hand
		pair[0].mesh.members[pair[1].cfg.ID].askedAt = 0
	}
	sent := func(n *Node, before int) []Envelope { return n.rd.Messages[before:] }

	before := len(n1.rd.Messages)
	n1.mesh.ping(n1.mesh.members["n3"], n1.now)
	out := sent(n1, before)
	if len(out) != 1 || out[0].Msg.Type != MsgProbe || out[0].Msg.Probe.Beat == nil || out[0].Msg.Probe.Beat.Sync != SyncPull {
		t.Fatalf("the first ping to n3 sent %+v; want one ping carrying n1's heartbeat with SyncPull", out)
	}
	// Through the wire: the heartbeat rides in the encoding too.
	b, err := AppendMessage(nil, &out[0].Msg)
	if err != nil {
		t.Fatal(err)
	}
	ping, err := DecodeMessage(b)
	if err != nil || ping.Probe.Beat == nil || ping.Probe.Beat.Boot != n1.cfg.Boot {
		t.Fatalf("the ping decoded as %+v, %v", ping.Probe, err)
	}

	before = len(n3.rd.Messages)
	if err := n3.Step("n1", ping); err != nil {
		t.Fatal(err)
	}
	out = sent(n3, before)
	if len(out) != 1 || out[0].To != "n1" || out[0].Msg.Type != MsgProbe || out[0].Msg.Probe.Kind != ProbeAck ||
		out[0].Msg.Probe.Beat == nil || out[0].Msg.Probe.Beat.Sync != 0 {
		t.Fatalf("n3 answered the ping with %+v; want one ack carrying its heartbeat (no Sync)", out)
	}
	if !n3.mesh.members["n1"].beat {
		t.Error("n3 has no heartbeat of n1 after its ping")
	}

	before = len(n1.rd.Messages)
	if err := n1.Step("n3", out[0].Msg); err != nil {
		t.Fatal(err)
	}
	if extra := sent(n1, before); len(extra) != 0 {
		t.Errorf("n1 answered the ack with %+v; want nothing", extra)
	}
	if !n1.mesh.members["n3"].beat {
		t.Error("n1 has no heartbeat of n3 after its ack")
	}
	if pr := n1.mesh.sw.probe; pr.target != "n3" || !pr.acked {
		t.Errorf("n1's probe %+v; want n3's, acked", pr)
	}
}

// A peer whose connections closed (a process killed: its kernel closes
// them) is pinged at once and, silent, is dead after a third of SuspectFor:
// in about ProbeEvery + SuspectFor/3, where one that merely stops answering
// takes a period of silence, a probe and all of SuspectFor. A live peer
// whose connection closed answers the ping and stays alive.
func TestProbeDisconnectedDetectsFast(t *testing.T) {
	deadAfter := func(disconnect bool) time.Duration {
		c := newCluster(t, 4, 8)
		c.run(15 * time.Second)
		victim := c.node("n4")
		victim.down = true
		if disconnect {
			for _, cn := range c.nodes[:3] {
				cn.n.Tick(c.now)
				cn.n.Disconnected(victim.id)
			}
		}
		const step = 50 * time.Millisecond
		for waited := time.Duration(0); waited < 10*time.Second; waited += step {
			all := true
			for _, st := range states(c, victim.id) {
				all = all && st == PeerDead
			}
			if all {
				return waited
			}
			c.run(step)
		}
		t.Fatalf("%s not dead to all 10 s after it stopped (disconnect %v): %v", victim.id, disconnect, states(c, victim.id))
		return 0
	}
	cfg := DefaultNodeConfig("x", "1")
	fast, slow := deadAfter(true), deadAfter(false)
	if limit := cfg.ProbeEvery + cfg.SuspectFor/3 + 100*time.Millisecond; fast > limit {
		t.Errorf("a disconnected peer was dead to all after %v; want at most %v", fast, limit)
	}
	if slow < cfg.SuspectFor {
		t.Errorf("a silent peer (no disconnect) was dead to all after %v; want at least SuspectFor %v", slow, cfg.SuspectFor)
	}
	t.Logf("dead to all after %v with the disconnect, %v without", fast, slow)

	c := newCluster(t, 4, 8)
	c.run(15 * time.Second)
	c.check = func() {
		for id, st := range states(c, "n2") {
			if st != PeerAlive {
				t.Fatalf("%s holds n2 %v after its connection closed; n2 runs", id, st)
			}
		}
	}
	for _, id := range []string{"n1", "n3", "n4"} {
		cn := c.node(id)
		cn.n.Tick(c.now)
		cn.n.Disconnected("n2")
	}
	c.run(10 * time.Second)
}

// The queue of membership news stays ordered by times sent through any
// mix of updates queued, replaced and piggybacked: piggyback sends the
// least-sent, and drops each update once it went out retransmits times.
func TestNewsQueueOrder(t *testing.T) {
	m := &mesh{members: map[string]*member{}}
	for i := range 20 {
		m.members[fmt.Sprint("m", i)] = &member{}
	}
	limit := m.retransmits()
	sw := &m.sw
	rng := rand.New(rand.NewPCG(1, 2))
	sentTimes := map[string]int{} // by update id, since it was last queued
	for op := range 20000 {
		if rng.IntN(3) == 0 {
			id := fmt.Sprint("u", rng.IntN(700)) // past maxNews at times
			m.enqueue(Update{ID: id, Inc: uint64(op)})
			sentTimes[id] = 0
		} else {
			least := limit
			for _, nw := range sw.news {
				least = min(least, nw.sent)
			}
			out := m.piggyback()
			if len(out) > 0 && sentTimes[out[0].ID] != least {
				t.Fatalf("op %d: piggyback sent %s (sent %d times) before an update sent %d times", op, out[0].ID, sentTimes[out[0].ID], least)
			}
			for _, u := range out {
				sentTimes[u.ID]++
			}
		}
		if !slices.IsSortedFunc(sw.news, func(a, b *news) int { return a.sent - b.sent }) {
			t.Fatalf("op %d: queue not ordered by times sent", op)
		}
		if len(sw.news) > maxNews || len(sw.news) != len(sw.newsBy) {
			t.Fatalf("op %d: %d queued, %d indexed; want equal, at most %d", op, len(sw.news), len(sw.newsBy), maxNews)
		}
		for _, nw := range sw.news {
			if sw.newsBy[nw.u.ID] != nw || nw.sent >= limit || nw.sent != sentTimes[nw.u.ID] {
				t.Fatalf("op %d: update %s sent %d (counted %d), indexed %v; limit %d", op, nw.u.ID, nw.sent, sentTimes[nw.u.ID], sw.newsBy[nw.u.ID] == nw, limit)
			}
		}
	}
}

// Learning the incarnation of a peer this one knows from a membership
// list, alive, is no news: it is not queued to be spread (a mesh of N
// peers started together learned N^2 such incarnations, and every
// peer's queue stayed full for minutes). A peer new here, and a newer
// incarnation of one whose incarnation was known (a refutation), are news.
func TestProbeListedIncarnationNoNews(t *testing.T) {
	c := newCluster(t, 3, 4)
	c.run(10 * time.Second)
	n1, n2 := c.node("n1").n, c.node("n2").n
	beat := n2.mesh.heartbeat()
	beat.Heartbeat.Members = append(slices.Clone(beat.Heartbeat.Members), "x1")
	if err := n1.Step("n2", beat); err != nil {
		t.Fatal(err)
	}
	if mb := n1.mesh.members["x1"]; mb == nil || mb.state != PeerAlive {
		t.Fatalf("x1 from n2's list: member %+v; want alive", mb)
	}
	queued := func(id string) bool { return n1.mesh.sw.newsBy[id] != nil }
	news := func(us ...Update) {
		t.Helper()
		p := &Probe{Kind: ProbeNews, Boot: "1", Inc: n2.mesh.sw.inc, Features: Features, Updates: us}
		if err := n1.Step("n2", Message{Type: MsgProbe, From: "n2", Probe: p}); err != nil {
			t.Fatal(err)
		}
	}
	news(Update{ID: "x1", Boot: "b", Inc: 5, State: PeerAlive}, Update{ID: "x2", Boot: "b", Inc: 5, State: PeerAlive})
	if mb := n1.mesh.members["x1"]; mb.inc != 5 || queued("x1") {
		t.Errorf("x1 listed, then its incarnation 5: inc %d, queued %v; want 5, not queued", mb.inc, queued("x1"))
	}
	if !queued("x2") {
		t.Errorf("x2, unknown here: not queued; want queued (a join)")
	}
	news(Update{ID: "x1", Boot: "b", Inc: 6, State: PeerAlive})
	if mb := n1.mesh.members["x1"]; mb.inc != 6 || !queued("x1") {
		t.Errorf("x1 at incarnation 6 after 5: inc %d, queued %v; want 6, queued", mb.inc, queued("x1"))
	}
}
