package peer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Long polls whose tasks' partitions move to other peers while they wait
// (four peers join a peer alone, 3 replicas of each partition): a wait
// for a task that ends at its new owner answers then, though the old
// owner may keep no replica to hear of it; a wait for a task that does
// not end answers when its wait runs out, not after it again (the old
// owner's "unavailable" at the end of the wait was retried with the whole
// wait).
//
// Each task has two waits: one of 16 s, which runs out, and one of 2 min,
// which a cancel ends. The cancels came at the end of the 16 s waits
// before, and on a loaded machine (-race) four peers took longer than
// that to start and lead: those waits ran out, READY, not CANCELED.
func TestMeshWaitFollowsAMovedTask(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	start := func(join []string) *meshPeer {
		return startMeshPeerConfig(t, meshPeerConfig(t, t.TempDir(), func(c *Config) { c.Join = join }))
	}
	p1 := start(nil)
	const n, wait, long = 24, 16 * time.Second, 2 * time.Minute
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
	ctx, stop := context.WithCancel(t.Context()) // lets the long waits not canceled go
	defer stop()
	waits := func(d time.Duration) []chan answer {
		answers := make([]chan answer, n)
		for i, g := range ids {
			answers[i] = make(chan answer, 1)
			go func() {
				tk, err := p1.c.GetTask(ctx, g+".0", d)
				a := answer{err: err, at: time.Now()}
				if err == nil {
					a.state = tk.State
				}
				answers[i] <- a
			}()
		}
		return answers
	}
	began := time.Now()
	short, longer := waits(wait), waits(long)
	// The partitions move in the middle of the waits: a wait retried
	// whole would end well after its time.
	time.Sleep(wait / 3) // the scenario's time, not a synchronisation
	join := []string{p1.p.tr.Addrs()[0]}
	peers := []*meshPeer{p1, start(join), start(join), start(join), start(join)}
	waitLeading(t, peers...)
	// Leadership moves partition by partition: every peer leads one long
	// before p1 has handed over all it will (on a slow machine, 2 of 24).
	var moved []int
	waitFor(t, fmt.Sprintf("a third of the %d groups to move off p1", n), 30*time.Second, func() bool {
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
	movedAt := time.Since(began)
	// Half the moved tasks end (canceled at their new owners); the rest,
	// and those that stayed, wait on.
	ends := map[int]bool{}
	for _, i := range moved[:len(moved)/2] {
		ends[i] = true
		waitFor(t, "a cancel to be taken", 30*time.Second, func() bool {
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
		case a := <-longer[i]:
			if a.err != nil || a.state != "CANCELED" {
				t.Errorf("wait for %s = %q, %v; want CANCELED", ids[i], a.state, a.err)
			}
		case <-time.After(canceled.Add(30 * time.Second).Sub(time.Now())):
			t.Fatalf("the wait of %v for %s (moved, then canceled) did not answer within 30 s of the cancel", long, ids[i])
		}
	}
	for i := range ids {
		a := <-short[i]
		switch {
		case ends[i] && (a.err != nil || a.state != "READY" && a.state != "CANCELED"):
			t.Errorf("wait for %s = %q, %v; want READY once the wait ran out, or CANCELED", ids[i], a.state, a.err)
		case !ends[i] && (a.err != nil || a.state != "READY"):
			t.Errorf("wait for %s = %q, %v; want READY once the wait ran out", ids[i], a.state, a.err)
		}
		switch took := a.at.Sub(began); {
		case took > wait+wait/4:
			t.Errorf("wait of %v for %s answered after %v", wait, ids[i], took.Round(time.Millisecond))
		case took < wait && !ends[i]:
			t.Errorf("wait of %v for %s answered %q after %v, before it ran out", wait, ids[i], a.state, took.Round(time.Millisecond))
		}
	}
	t.Logf("%d of %d groups moved (a third of them %v into the waits of %v), %d canceled %v into them; every wait answered",
		len(moved), n, movedAt.Round(time.Millisecond), wait, len(ends), canceled.Sub(began).Round(time.Millisecond))
}

// A long poll let go because another peer owns its target now (the loop's
// sweep) answers unavailable, so that the caller routes the rest of its
// wait to the new owner: not the state this peer reads, which it may
// still serve (it leads the partition until it has handed it over) and
// which is not the end of the wait (a group RUNNING came back after a few
// seconds of a 60 s wait, while a founder handed its partitions over).
func TestWaitLetGoIsUnavailable(t *testing.T) {
	p, c := startPeerWith(t, Config{})
	id := submitTask(t, c, `{"handler": "held.by.nobody"}`)
	g := shard.TaskID(id).Group()
	type answer struct {
		state string
		err   error
	}
	for _, kind := range []string{"task", "group"} {
		got := make(chan answer, 1)
		go func() {
			var a answer
			if kind == "task" {
				var v shard.TaskView
				v, a.err = local{p}.Task(t.Context(), shard.TaskID(id), time.Minute)
				a.state = v.State.String()
			} else {
				var v shard.GroupView
				v, a.err = local{p}.Group(t.Context(), g, time.Minute, false)
				a.state = v.State.String()
			}
			got <- a
		}()
		waitUntil(t, func() bool {
			var parked bool
			_ = p.read(t.Context(), func(*node.Node) error {
				parked = len(p.waiters.tasks[shard.TaskID(id)]) > 0 || len(p.waiters.groups[g]) > 0
				return nil
			})
			return parked
		})
		// As the sweep does when another peer owns the partition now.
		_ = p.read(t.Context(), func(*node.Node) error {
			p.waiters.tasks[shard.TaskID(id)] = live(p.waiters.tasks[shard.TaskID(id)], false)
			p.waiters.groups[g] = live(p.waiters.groups[g], false)
			return nil
		})
		if a := <-got; !errors.Is(a.err, api.ErrUnavailable) {
			t.Errorf("%s wait let go for another owner = %s, %v; want unavailable", kind, a.state, a.err)
		}
	}
}

// A long poll for a target this peer does not serve now (no lease: an
// election under way, a lease lapsed on a loaded machine, leadership in
// transfer) is not parked and answers unavailable, so that the caller
// routes and waits again; let go as if its target were unknown, the
// caller read the target at once, and a group wait of 60 s came back
// RUNNING after 0.15 s (cmd/needled TestMeshJoinByName under load).
func TestWaitNotServedIsUnavailable(t *testing.T) {
	cfg := node.DefaultNodeConfig("a", "1")
	cfg.Partitions = 8
	n, err := node.NewNode(cfg, nil, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	const g = shard.GroupID("g0123456789abcdef01234567")
	if _, err := n.GroupState(g); !errors.Is(err, node.ErrUnavailable) {
		t.Fatalf("a node that leads nothing yet reads group %s: %v; want unavailable", g, err)
	}
	ws := newWaiters()
	for _, w := range []*waiter{{group: g}, {task: shard.TaskID(g + ".0")}} {
		w.ctx, w.done = t.Context(), make(chan struct{})
		ws.add(n, w)
		select {
		case <-w.done:
		default:
			t.Fatalf("waiter %+v parked on a node that serves nothing", w)
		}
		if !w.moved {
			t.Errorf("waiter for %s let go as done; want it let go as unavailable (moved)", cmp.Or(string(w.group), string(w.task)))
		}
	}
}
