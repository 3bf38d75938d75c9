package peer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/node"
)

// running holds the real peers the current test started and has not
// stopped (the tests of this package do not run in parallel): a wait that
// times out logs what each of them sees (meshState), so that a failure
// under load says which partitions had no leader and who held whom dead.
var running struct {
	sync.Mutex
	peers []*meshPeer
}

func track(mp *meshPeer) {
	running.Lock()
	defer running.Unlock()
	running.peers = append(running.peers, mp)
}

func untrack(mp *meshPeer) {
	running.Lock()
	defer running.Unlock()
	running.peers = slices.DeleteFunc(running.peers, func(o *meshPeer) bool { return o == mp })
}

// meshState describes each running peer's view: its members (state,
// addresses known, silence) and, per partition, the leader it knows, the
// term, what it applied and the replica set.
func meshState() string {
	running.Lock()
	peers := slices.Clone(running.peers)
	running.Unlock()
	var b strings.Builder
	for _, mp := range peers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := mp.p.read(ctx, func(n *node.Node) error {
			describeNode(&b, n)
			return nil
		})
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "peer %s: its loop did not answer: %v\n", short(mp.p.tr.ID()), err)
		}
	}
	return b.String()
}

func describeNode(b *strings.Builder, n *node.Node) {
	st := n.Stats()
	fmt.Fprintf(b, "peer %s: voter %d leading %d; counters %+v\n", short(n.ID()), st.Voter, st.Leading, n.Counters())
	for _, m := range n.Members() {
		fmt.Fprintf(b, "  member %s %v addrs %d silent %v\n", short(m.ID), m.State, len(m.Addrs), n.Now().Sub(m.LastSeen).Round(time.Millisecond))
	}
	for i := range n.Partitions() {
		r, ok := n.Replica(i)
		if !ok {
			fmt.Fprintf(b, "  p%d: no replica here\n", i)
			continue
		}
		fmt.Fprintf(b, "  p%d: leader %s term %d applied %d serving %v abdicated %v quiesced %v voters %v learners %v outgoing %v\n",
			i, short(r.Leader), r.Term, r.Applied, r.Serving, r.Abdicated, r.Quiesced, shorts(r.Voters), shorts(r.Learners), shorts(r.Outgoing))
	}
}

// short is the tail of a peer id: enough to tell the peers of a test apart.
func short(id string) string {
	if len(id) > 6 {
		return id[len(id)-6:]
	}
	return id
}

func shorts(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	return out
}
