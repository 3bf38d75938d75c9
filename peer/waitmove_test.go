package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Long polls whose tasks' partitions move to other peers while they wait
// (four peers join a peer alone, 3 replicas of each partition): a wait
// for a task that ends at its new owner answers then, though the old
// owner may keep no replica to hear of it; a wait for a task that does
// not end answers when its wait runs out, not after it again (the old
// owner's "unavailable" at the end of the wait was retried with the whole
// wait).
func TestMeshWaitFollowsAMovedTask(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	start := func(join []string) *meshPeer {
		return startMeshPeerConfig(t, meshPeerConfig(t, t.TempDir(), func(c *Config) { c.Join = join }))
	}
	p1 := start(nil)
	const n, wait = 24, 16 * time.Second
	ids := make([]string, n)
	for i := range ids {
		res := submitRetrying(t, p1.c, fmt.Sprintf(`{"mode":"parallel","key":"held-%d","tasks":[{"handler":"held.by.nobody","payload":%d}]}`, i, i))
		ids[i] = res.Group
	}
	type answer struct {
		state string
		err   error
		at    time.Time
	}
	answers := make([]chan answer, n)
	began := time.Now()
	for i, g := range ids {
		answers[i] = make(chan answer, 1)
		go func() {
			tk, err := p1.c.GetTask(t.Context(), g+".0", wait)
			a := answer{err: err, at: time.Now()}
			if err == nil {
				a.state = tk.State
			}
			answers[i] <- a
		}()
	}
	// The partitions move in the middle of the waits: a wait retried
	// whole would end well after its time.
	time.Sleep(wait / 3) // the scenario's time, not a synchronisation
	join := []string{p1.p.tr.Addrs()[0]}
	peers := []*meshPeer{p1, start(join), start(join), start(join), start(join)}
	waitLeading(t, peers...)
	// Leadership moves partition by partition: every peer leads one long
	// before p1 has handed over all it will (on a slow machine, 2 of 24).
	var moved []int
	waitFor(t, fmt.Sprintf("a third of the %d groups to move off p1", n), wait/3, func() bool {
		moved = moved[:0]
		_ = p1.p.read(t.Context(), func(nd *node.Node) error {
			for i, g := range ids {
				if o := nd.Owner(shard.GroupID(g)); o != "" && o != p1.p.ID() {
					moved = append(moved, i)
				}
			}
			return nil
		})
		return len(moved) >= n/3
	})
	// Half the moved tasks end (canceled at their new owners); the rest,
	// and those that stayed, wait on.
	ends := map[int]bool{}
	for _, i := range moved[:len(moved)/2] {
		ends[i] = true
		waitFor(t, "a cancel to be taken", 10*time.Second, func() bool {
			_, err := p1.c.CancelGroup(t.Context(), ids[i])
			return err == nil
		})
	}
	canceled := time.Now()
	for i := range ids {
		if !ends[i] {
			continue
		}
		select {
		case a := <-answers[i]:
			if a.err != nil || a.state != "CANCELED" {
				t.Errorf("wait for %s = %q, %v; want CANCELED", ids[i], a.state, a.err)
			}
		case <-time.After(canceled.Add(wait / 2).Sub(time.Now())):
			t.Fatalf("the wait for %s (moved, then canceled) did not answer within %v of the cancel", ids[i], wait/2)
		}
	}
	for i := range ids {
		if ends[i] {
			continue
		}
		a := <-answers[i]
		if a.err != nil || a.state != "READY" {
			t.Errorf("wait for %s = %q, %v; want READY once the wait ran out", ids[i], a.state, a.err)
		}
		if took := a.at.Sub(began); took > wait+wait/4 {
			t.Errorf("wait of %v for %s answered after %v", wait, ids[i], took.Round(time.Millisecond))
		}
	}
	t.Logf("%d of %d groups moved; every wait answered", len(moved), n)
}
