package simulate

import (
	"time"

	"github.com/needle-mesh/needle/node"
)

// message is what the simulated network carries: exactly one field is set.
type message struct {
	env    *node.Envelope // node to node (Raft; later forwarded outcomes, steals)
	gossip bool           // env was published (pubsub), not sent on a connection
	req    *request       // client to node
	reply  *response      // node to client
}

// network delivers messages between endpoints 0..peers-1 (the nodes) and
// endpoint peers (the client). Each link has its own latency; without the
// reorder fault a link is FIFO (a stream). Faults set cuts (partition),
// a drop and a duplication probability, and extra random delay (reorder).
type network struct {
	s       *sim
	n       int             // endpoints
	latency []time.Duration // base latency per link, from*n+to
	last    []time.Duration // latest delivery time per link (FIFO)
	cut     []bool          // link cut by a partition
	drop    float64         // probability a message is lost
	dup     float64         // probability a message is delivered twice
	reorder time.Duration   // extra delay drawn in [0, reorder); links stop being FIFO
	slow    []time.Duration // extra delay of every message to or from an endpoint (Slow)
	links   *links          // the transport's connections between nodes (links.go)
	free    *delivery       // deliveries done, to reuse

	sent, dropped, duplicated, undeliverable uint64
	kinds                                    [3]uint64 // sent, by trafficKind
}

func newNetwork(s *sim, endpoints int) *network {
	nw := &network{s: s, n: endpoints, latency: make([]time.Duration, endpoints*endpoints),
		last: make([]time.Duration, endpoints*endpoints), cut: make([]bool, endpoints*endpoints),
		slow: make([]time.Duration, endpoints), links: newLinks(endpoints - 1)}
	for i := range nw.latency {
		nw.latency[i] = 100*time.Microsecond + time.Duration(s.rng.Int64N(int64(900*time.Microsecond)))
	}
	return nw
}

// client is the client's endpoint.
func (nw *network) client() int { return nw.n - 1 }

// send puts m on the link from -> to.
func (nw *network) send(from, to int, m message) {
	nw.sent++
	nw.kinds[trafficKind(&m)]++
	if to < 0 {
		nw.undeliverable++
		return
	}
	if m.env != nil && !nw.linked(from, to, m.gossip) {
		nw.dropped++
		return
	}
	if nw.cut[from*nw.n+to] || (nw.drop > 0 && nw.s.rng.Float64() < nw.drop) {
		nw.dropped++
		return
	}
	nw.schedule(from, to, m)
	if nw.dup > 0 && nw.s.rng.Float64() < nw.dup {
		nw.duplicated++
		nw.schedule(from, to, m)
	}
}

// lost counts a message of a kind (trafficKind) as send counts one that
// finds no way (linked), for a caller that did not build it (gossip).
func (nw *network) lost(kind int) {
	nw.sent++
	nw.kinds[kind]++
	nw.dropped++
}

// linked reports whether a message between two nodes finds its way: a
// connection for a direct one, the gossip mesh for gossip (links.go).
func (nw *network) linked(from, to int, gossip bool) bool {
	if gossip {
		return nw.links.gossip(from, to, nw.s.now)
	}
	return nw.links.direct(nw.s, from, to)
}

func (nw *network) schedule(from, to int, m message) {
	k := from*nw.n + to
	lat := nw.latency[k]
	at := nw.s.now + lat + time.Duration(nw.s.rng.Int64N(int64(lat/4)+1)) + nw.slow[from] + nw.slow[to]
	if nw.reorder > 0 {
		at += time.Duration(nw.s.rng.Int64N(int64(nw.reorder)))
	} else {
		at = max(at, nw.last[k])
		nw.last[k] = at
	}
	d := nw.free
	if d == nil {
		d = &delivery{nw: nw}
		d.run = d.deliver
	} else {
		nw.free = d.next
	}
	if m.env != nil {
		// The sender's envelope is its own again once its Ready is
		// advanced (node.Ready): the delivery carries a copy.
		d.env = *m.env
		m.env = &d.env
	}
	d.from, d.to, d.m = from, to, m
	nw.s.at(at, d.run)
}

// delivery is a message in flight. Deliveries are reused (network.free):
// a closure per message was the largest share of an idle run's
// allocations.
type delivery struct {
	nw       *network
	from, to int
	m        message
	env      node.Envelope // m.env points here
	run      func()        // d.deliver, bound once
	next     *delivery
}

// deliver hands the message over, and then frees the delivery: what the
// receiver keeps of m.env after the delivery it copies (simNode.receive).
func (d *delivery) deliver() {
	nw := d.nw
	nw.deliver(d.from, d.to, d.m)
	d.m, d.env, d.next, nw.free = message{}, node.Envelope{}, nw.free, d
}

func (nw *network) deliver(from, to int, m message) {
	if to == nw.client() {
		nw.s.cl.receive(from, m.reply)
		return
	}
	nw.s.nodes[to].receive(from, m)
}

// isolate cuts every link between the two sides (both directions).
func (nw *network) isolate(a, b []int, cut bool) {
	for _, x := range a {
		for _, y := range b {
			nw.cut[x*nw.n+y] = cut
			nw.cut[y*nw.n+x] = cut
		}
	}
}

// cutFrom cuts (or restores) the links from every endpoint in from to every
// endpoint in to, one direction only.
func (nw *network) cutFrom(from, to []int, cut bool) {
	for _, x := range from {
		for _, y := range to {
			nw.cut[x*nw.n+y] = cut
		}
	}
}
