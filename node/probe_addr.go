package node

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// Addresses second-hand. A direct message (a probe, Raft, a forwarded
// request) travels on a connection, and the runtime dials a member only at
// an address it knows (peer/loop.go, dialMembers): one side of every pair
// must know the other's. A member's own heartbeat carries its addresses,
// but under the probe protocol it gossips one only when it joins and when
// what it advertises changes, and a joiner's first heartbeats reach only
// the peers its pubsub is already linked to (the seed it dialed), not the
// peers behind it. A member learned from a membership list alone would
// have no address, and nothing would ever give it one: the heartbeat this
// peer asks it for (wantBeat) goes by a direct message too. So addresses
// ride with the membership, as in memberlist: a join update carries the
// joiner's, and a heartbeat sent to one peer for a Sync carries the
// sender's address book (Heartbeat.Book).

// maxAddrs bounds the addresses of one peer on the wire.
const maxAddrs = 32

func appendBook(dst []byte, book []PeerAddrs) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(book)))
	for _, e := range book {
		dst = shard.AppendString(dst, e.ID)
		dst = appendStrings(dst, e.Addrs)
	}
	return dst
}

func decodeBook(d *shard.Decoder) []PeerAddrs {
	n := d.Count(2)
	if n == 0 {
		return nil
	}
	out := make([]PeerAddrs, 0, n)
	for range n {
		e := PeerAddrs{ID: d.String(), Addrs: decodeAddrs(d)}
		if d.Err() != nil {
			return out
		}
		out = append(out, e)
	}
	return out
}

func decodeAddrs(d *shard.Decoder) []string {
	a := decodeStrings(d)
	if len(a) > maxAddrs {
		d.Fail("%d addresses of one peer, over %d", len(a), maxAddrs)
		return nil
	}
	return a
}

// book returns the addresses this peer knows of the members but itself,
// for a heartbeat to one peer (its receiver skips its own entry), sorted
// by id. It is shared by every heartbeat until an entry changes: in a
// forming mesh every member asks every other for its heartbeat, and a
// book built for each answer made formation N^3 work (41% of the
// simulator's CPU at 1,000 idle peers). Dead members stay in it: their
// addresses are what a peer pings them at, and a receiver only fills
// addresses it lacks.
//
// A new book is the last one with the entries of the members marked since
// (bookMark: a member added, replaced, forgotten, or given other
// addresses) replaced, in one merge: a forming mesh's addresses arrive a
// few at a time, and a book rebuilt from every member for each (a cache
// miss per member) was 7% of a forming 1,000-peer mesh's CPU. The last
// book is never changed in place: heartbeats hold it.
func (m *mesh) book() []PeerAddrs {
	switch {
	case m.bookOK && len(m.bookDirty) == 0:
		return m.bookCache
	case m.bookOK:
		m.bookCache = m.patchBook(m.bookCache, m.bookDirty)
	default:
		m.bookCache, m.bookOK = m.fullBook(), true
	}
	m.clearBookDirty()
	return m.bookCache
}

// fullBook builds the book from every member.
func (m *mesh) fullBook() []PeerAddrs {
	out := make([]PeerAddrs, 0, len(m.members))
	for _, mb := range m.sortedMembers() {
		if e, ok := m.bookEntry(mb); ok {
			out = append(out, e)
		}
	}
	return out
}

// bookEntry is mb's entry in the book, if it has one.
func (m *mesh) bookEntry(mb *member) (PeerAddrs, bool) {
	if mb == nil || mb.id == m.n.cfg.ID || len(mb.addrs) == 0 {
		return PeerAddrs{}, false
	}
	return PeerAddrs{ID: mb.id, Addrs: mb.addrs}, true
}

// patchBook returns a new book: old with the entries of ids as the
// members are now (sorts and compacts ids).
func (m *mesh) patchBook(old []PeerAddrs, ids []string) []PeerAddrs {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]PeerAddrs, 0, len(old)+len(ids))
	i := 0
	for _, id := range ids {
		j, found := slices.BinarySearchFunc(old[i:], id, func(e PeerAddrs, id string) int { return strings.Compare(e.ID, id) })
		out = append(out, old[i:i+j]...)
		if i += j; found {
			i++
		}
		if e, ok := m.bookEntry(m.members[id]); ok {
			out = append(out, e)
		}
	}
	return append(out, old[i:]...)
}

// bookMark marks member id's entry in the book as changed; past an
// eighth of the book, the next is built from every member.
func (m *mesh) bookMark(id string) {
	switch {
	case !m.bookOK:
	case len(m.bookDirty)*8 >= len(m.bookCache):
		m.bookOK = false
		m.clearBookDirty()
	default:
		m.bookDirty = append(m.bookDirty, id)
	}
}

// clearBookDirty empties bookDirty, keeping its array.
func (m *mesh) clearBookDirty() {
	clear(m.bookDirty)
	m.bookDirty = m.bookDirty[:0]
}

// setAddrs gives member mb the addresses addrs.
func (m *mesh) setAddrs(mb *member, addrs []string) {
	if !slices.Equal(mb.addrs, addrs) {
		m.bookMark(mb.id)
	}
	mb.addrs = addrs
	m.noteAddrs(mb)
}

// noteAddrs keeps mesh.noAddrs, the members other than this node with no
// address, up to date with mb's.
func (m *mesh) noteAddrs(mb *member) {
	if len(mb.addrs) == 0 && mb.id != m.n.cfg.ID {
		m.noAddrs[mb.id] = struct{}{}
	} else {
		delete(m.noAddrs, mb.id)
	}
}

// learnAddrs gives the members of a heartbeat's book that have no address
// here the addresses it names. A member's own heartbeat or update wins
// over a book (learnAddrs never replaces an address). A book that is the
// very one last merged from the same sender (shared, as book shares it,
// where messages are not copied: the simulator), with the membership
// unchanged since, has nothing new: it is skipped.
func (m *mesh) learnAddrs(from *member, book []PeerAddrs) {
	if len(book) == 0 {
		return
	}
	if len(m.noAddrs) == 0 {
		return // every member has its addresses: nothing to learn
	}
	if from.bookSeen.is(book) && from.bookAt == m.version {
		return
	}
	from.bookSeen, from.bookAt = markOf(book), m.version
	if len(m.noAddrs)*8 < len(book) {
		// Few lack them: look each up (a book is sorted by id, as book
		// builds it; one that is not only hides entries from this search).
		for id := range m.noAddrs {
			i, ok := slices.BinarySearchFunc(book, id, func(e PeerAddrs, id string) int { return strings.Compare(e.ID, id) })
			if mb := m.members[id]; ok && mb != nil {
				m.setAddrs(mb, book[i].Addrs)
			}
		}
		return
	}
	for _, e := range book {
		if mb := m.members[e.ID]; mb != nil && len(mb.addrs) == 0 && e.ID != m.n.cfg.ID {
			m.setAddrs(mb, e.Addrs)
		}
	}
}

// MemberAddrs returns the addresses this node knows of peer id (nil when
// none) and whether id is a member. The slice is shared: do not modify it.
func (n *Node) MemberAddrs(id string) (addrs []string, member bool) {
	if mb := n.mesh.members[id]; mb != nil {
		return mb.addrs, true
	}
	return nil, false
}
