package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/node/nodetest"
)

// recLog records the records a node logs whose message holds one of its
// substrings (these tests' log).
type recLog struct {
	mu   *sync.Mutex
	recs *[]slog.Record
	subs []string
}

func newRecLog(subs ...string) recLog {
	return recLog{mu: &sync.Mutex{}, recs: new([]slog.Record), subs: subs}
}

// newTwinLog records the identity-conflict records.
func newTwinLog() recLog { return newRecLog("identity conflict") }

func (h recLog) Enabled(context.Context, slog.Level) bool { return true }
func (h recLog) Handle(_ context.Context, r slog.Record) error {
	for _, sub := range h.subs {
		if strings.Contains(r.Message, sub) {
			h.mu.Lock()
			*h.recs = append(*h.recs, r.Clone())
			h.mu.Unlock()
			return nil
		}
	}
	return nil
}
func (h recLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recLog) WithGroup(string) slog.Handler      { return h }

// count returns how many records of level lv whose message holds sub it has.
func (h recLog) count(lv slog.Level, sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range *h.recs {
		if r.Level == lv && strings.Contains(r.Message, sub) {
			n++
		}
	}
	return n
}

func (h recLog) attr(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.recs {
		if r.Level != slog.LevelError {
			continue
		}
		v := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v = a.Value.String()
				return false
			}
			return true
		})
		return v
	}
	return ""
}

func conflictOf(n *node.Node, id string) bool {
	for _, m := range n.Members() {
		if m.ID == id {
			return m.Conflict
		}
	}
	return false
}

// membershipOnly mutes a clone's traffic but its heartbeats and probes:
// what the detector reads. Its Raft, as a second voter under one Raft
// id, is the hazard itself, not what is tested here.
func membershipOnly(m *node.Message) bool {
	return m.Type != node.MsgHeartbeat && m.Type != node.MsgProbe
}

// A copy of n2's data dir started beside it (a clone: same peer id,
// another boot) is reported by the others: an ERROR naming the peer and
// both boots (at most once a minute), the identity_conflicts counter, and
// the member's Conflict in Members; it clears once the clone stopped.
func TestIdentityConflictDetected(t *testing.T) {
	logs := map[string]recLog{}
	m := nodetest.NewMeshWith(t, 4, 8, func(p *nodetest.Peer, cfg *node.NodeConfig) {
		l, ok := logs[p.ID]
		if !ok || p.Boot > 1000 { // a clone logs apart
			l = newTwinLog()
			if p.Boot <= 1000 {
				logs[p.ID] = l
			}
		}
		cfg.Logger = slog.New(l)
	})
	m.Run(10 * time.Second) // formed
	n2 := m.MustPeer("n2")
	clone := m.Clone("n2", membershipOnly)
	if n2.Node.ID() != clone.Node.ID() || n2.Boot == clone.Boot {
		t.Fatalf("clone: id %s boot %d; n2: id %s boot %d", clone.Node.ID(), clone.Boot, n2.Node.ID(), n2.Boot)
	}
	others := []string{"n1", "n3", "n4"}
	detected := func() bool {
		for _, id := range others {
			if m.MustPeer(id).Node.Counters().IdentityConflicts > 0 {
				return true
			}
		}
		return false
	}
	if !m.RunUntil(3*time.Minute, detected) {
		t.Fatal("no peer detected two processes under n2's identity in 3 minutes")
	}
	m.Run(5 * time.Minute) // every peer that hears both
	for _, id := range others {
		p := m.MustPeer(id)
		l := logs[id]
		got := p.Node.Counters().IdentityConflicts
		if got == 0 {
			continue // it may hear one of the two only
		}
		if got != 1 {
			t.Errorf("%s counted %d identity conflicts; want 1 (one conflict, standing)", id, got)
		}
		if !conflictOf(p.Node, "n2") {
			t.Errorf("%s: n2 shows no conflict in Members", id)
		}
		if _, ok := p.Node.IdentityConflict("n2"); !ok {
			t.Errorf("%s: IdentityConflict(n2) false", id)
		}
		// Declared within 8 minutes, logged at most once a minute (at a
		// flip of boot, which may come less often).
		if n := l.count(slog.LevelError, "identity conflict"); n < 1 || n > 9 {
			t.Errorf("%s logged %d identity-conflict ERRORs over at most 8 minutes; want at most one a minute", id, n)
		}
		if peer := l.attr("peer"); peer != "n2" {
			t.Errorf("%s's ERROR names peer %q; want n2", id, peer)
		}
		b1, b2 := l.attr("boot"), l.attr("other_boot")
		nb, cb := fmt.Sprint(n2.Boot), fmt.Sprint(clone.Boot)
		if !(b1 == nb && b2 == cb || b1 == cb && b2 == nb) {
			t.Errorf("%s's ERROR names boots %q and %q; want n2's and its clone's", id, b1, b2)
		}
		for _, c := range p.Node.Members() {
			if c.ID != "n2" && c.Conflict {
				t.Errorf("%s: %s shows a conflict", id, c.ID)
			}
		}
	}
	for _, id := range others {
		for _, c := range m.MustPeer(id).Node.Members() {
			if c.ID != "n2" && c.Conflict {
				t.Errorf("%s: %s shows a conflict", id, c.ID)
			}
		}
	}

	saw := 0
	for _, id := range others {
		if m.MustPeer(id).Node.Counters().IdentityConflicts > 0 {
			saw++
		}
	}
	if saw < 2 {
		t.Errorf("%d of n1, n3, n4 detected n2's clone; want 2 at least", saw)
	}
	for _, id := range others {
		t.Logf("%s: conflicts %d, ERRORs %d", id, m.MustPeer(id).Node.Counters().IdentityConflicts, logs[id].count(slog.LevelError, "identity conflict"))
	}
	m.StopClone(clone)
	m.Run(7 * time.Minute)
	for _, id := range others {
		p := m.MustPeer(id)
		if conflictOf(p.Node, "n2") {
			t.Errorf("%s: n2 still shows a conflict 7 minutes after its clone stopped", id)
		}
		if st, _ := p.Node.PeerState("n2"); st != node.PeerAlive {
			t.Errorf("%s: n2 is %v after its clone stopped; want alive", id, st)
		}
		if p.Node.Counters().IdentityConflicts > 0 && logs[id].count(slog.LevelWarn, "identity conflict cleared") == 0 {
			t.Errorf("%s logged no clearing of n2's conflict", id)
		}
	}
}

// Restarts never look like two processes: a peer crashed and restarted
// (a new boot each time), several times in a row and quickly, with and
// without losing unsynced writes, and a graceful stop and start, leaves
// no peer reporting an identity conflict.
func TestRestartsAreNoIdentityConflict(t *testing.T) {
	m := nodetest.NewMesh(t, 4, 8)
	m.Run(10 * time.Second)
	for i := range 12 {
		id := []string{"n2", "n3"}[i%2]
		m.Crash(id, i%3 == 0)
		m.Run(time.Duration(10*(i%4)) * time.Millisecond) // down for 0 to 30 ms
		m.Restart(id)
		m.Run(time.Duration(200+700*(i%3)) * time.Millisecond)
	}
	// Quick restarts of one peer with its old run's messages still in
	// flight: held on one link and delivered after the new run's.
	for range 5 {
		m.Hold("n4", "n1", node.MsgProbe) // its new run's heartbeat comes first
		m.Run(300 * time.Millisecond)
		m.Crash("n4", false)
		m.Restart("n4")
		m.Run(200 * time.Millisecond)
		m.Release("n4", "n1")
		m.Run(time.Second)
	}
	m.Run(6 * time.Minute)
	for _, p := range m.Peers {
		if c := p.Node.Counters().IdentityConflicts; c != 0 {
			t.Errorf("%s counted %d identity conflicts; restarts are none", p.ID, c)
		}
		for _, mi := range p.Node.Members() {
			if mi.Conflict {
				t.Errorf("%s: %s shows a conflict", p.ID, mi.ID)
			}
		}
	}
}

// levels returns the level of each record whose message holds sub, in
// order.
func (h recLog) levels(sub string) []slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Level
	for _, r := range *h.recs {
		if strings.Contains(r.Message, sub) {
			out = append(out, r.Level)
		}
	}
	return out
}
