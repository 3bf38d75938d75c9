package node

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A direct message needs a connection, and a connection an address known
// to one side; a peer's gossip reaches only the seed it dialed (pubsub
// relays nothing here, the worst case of a young gossipsub mesh). The
// joiners n2 and n3 never hear each other's heartbeats: each learns the
// other from n1 and must learn its address with it, or they never talk
// (the real mesh that never accepted a submission: a request forwarded
// between them failed for good).
func TestProbeAddressesSecondHand(t *testing.T) {
	c := newCluster(t, 3, 8)
	conn := map[[2]string]bool{}
	knows := func(a, b *cnode) bool {
		addrs, _ := a.n.MemberAddrs(b.id)
		return len(addrs) > 0
	}
	c.link = func(from, to *cnode, gossip bool) bool {
		if from.id == "n1" || to.id == "n1" {
			return true // the seed: every peer dialed it
		}
		if gossip {
			return false
		}
		if !conn[[2]string{from.id, to.id}] && (knows(from, to) || knows(to, from)) {
			conn[[2]string{from.id, to.id}], conn[[2]string{to.id, from.id}] = true, true
		}
		return conn[[2]string{from.id, to.id}]
	}
	c.run(15 * time.Second)
	n2, n3 := c.node("n2"), c.node("n3")
	for _, p := range [][2]*cnode{{n2, n3}, {n3, n2}} {
		addrs, member := p[0].n.MemberAddrs(p[1].id)
		if !member || !slices.Equal(addrs, []string{"/c/" + p[1].id}) {
			t.Errorf("%s knows %s at %v (member %v); want its address", p[0].id, p[1].id, addrs, member)
		}
	}
	if !conn[[2]string{"n2", "n3"}] {
		t.Fatal("n2 and n3 never connected")
	}
	// They talk directly now: n3 silent to n2 is a direct message lost.
	heard := n2.n.mesh.at(n2.n.mesh.members["n3"].heard)
	c.run(5 * time.Second)
	if got := n2.n.mesh.at(n2.n.mesh.members["n3"].heard); !got.After(heard) {
		t.Errorf("n2 heard nothing from n3 in 5 s (last %v)", heard)
	}
}

// A heartbeat answering a Sync carries the sender's address book: a
// joiner that learns the members from it can reach each of them.
func TestProbeBookOnSync(t *testing.T) {
	c := newCluster(t, 4, 8)
	c.run(10 * time.Second)
	n1 := c.node("n1")
	hb := n1.n.mesh.heartbeat()
	hb.Heartbeat.Book = n1.n.mesh.book()
	var ids []string
	for _, e := range hb.Heartbeat.Book {
		ids = append(ids, e.ID)
		if !slices.Equal(e.Addrs, []string{"/c/" + e.ID}) {
			t.Errorf("book names %s at %v", e.ID, e.Addrs)
		}
	}
	if !slices.Equal(ids, []string{"n2", "n3", "n4"}) {
		t.Errorf("n1's book = %v; want n2, n3, n4 (not itself)", ids)
	}
	// The book is shared until an address or the membership changes.
	m := &n1.n.mesh
	if again := m.book(); &again[0] != &hb.Heartbeat.Book[0] {
		t.Error("the book was built again with nothing changed")
	}
	m.setAddrs(m.members["n3"], []string{"/c/n3-moved"})
	if b := m.book(); b[1].ID != "n3" || !slices.Equal(b[1].Addrs, []string{"/c/n3-moved"}) {
		t.Errorf("after n3 moved, the book names %v", b)
	}
	m.add(&member{id: "n9", addrs: []string{"/c/n9"}, state: PeerAlive})
	if b := m.book(); len(b) != 4 || b[3].ID != "n9" {
		t.Errorf("after n9 joined, the book names %v", b)
	}
}

// The book patched with the members changed since it was built is the
// book built from every member, whatever the order of additions,
// replacements, address changes and forgets; a book handed out is never
// changed afterwards (heartbeats hold it).
func TestBookPatchedMatchesFull(t *testing.T) {
	_, n, now := loneNode(t)
	m := &n.mesh
	r := rand.New(rand.NewPCG(1, 2))
	id := func() string { return fmt.Sprintf("m%03d", r.IntN(300)) }
	addrs := func() []string {
		if r.IntN(4) == 0 {
			return nil
		}
		return []string{fmt.Sprintf("/ip4/10.0.%d.%d/tcp/4001", r.IntN(4), r.IntN(256))}
	}
	same := func(a, b []PeerAddrs) bool {
		return slices.EqualFunc(a, b, func(a, b PeerAddrs) bool { return a.ID == b.ID && slices.Equal(a.Addrs, b.Addrs) })
	}
	type handed struct{ book, copy []PeerAddrs }
	var out []handed
	patched := 0
	for step := range 20000 {
		switch k := r.IntN(100); {
		case k < 40:
			m.add(&member{id: id(), state: PeerAlive, addrs: addrs()})
		case k < 80:
			if mb := m.members[id()]; mb != nil {
				m.setAddrs(mb, addrs())
			}
		case k < 85:
			m.forget(id(), now)
		case k < 86:
			m.setAddrs(m.self, addrs()) // this peer's own: never in its book
		}
		if r.IntN(8) != 0 {
			continue
		}
		wasOK, dirty := m.bookOK, len(m.bookDirty)
		b := m.book()
		if wasOK && dirty > 0 {
			patched++
		}
		if want := m.fullBook(); !same(b, want) {
			t.Fatalf("step %d: book\n%v\nbuilt from every member\n%v", step, b, want)
		}
		if len(out) < 64 {
			out = append(out, handed{b, slices.Clone(b)})
		}
	}
	if patched < 100 {
		t.Errorf("%d books patched; the test checks too few", patched)
	}
	for i, h := range out {
		if !same(h.book, h.copy) {
			t.Fatalf("book %d changed after it was handed out", i)
		}
	}
}
