package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// A worker that dies holding one lease of this peer is a strike against
// that task only if it held nothing else, and a worker behind a load
// balancer holds leases of several peers (each hands out its own: its
// polls reach them all). So before a death counts alone, the hub asks
// the other live peers how many leases that worker (that process: its
// instance) held with them when it died, or holds still. Any lease there,
// or a peer that does not answer, makes it a death beside other tasks: a
// suspect, no strike. Deaths are rare, and the question is one round
// trip to each peer, at most contextWithTimeout.

// buriedKeep bounds how long, and how many, dead workers' lease counts a
// hub keeps to answer that question.
const (
	buriedKeep    = 10 * time.Minute
	maxBuriedKept = 4096
)

// buriedWorker is what a hub keeps of a worker it found dead.
type buriedWorker struct {
	key  string // workerKey
	held int
	at   time.Time
}

func workerKey(id, instance string) string { return id + "\x00" + instance }

// remember keeps how many leases w held here when it was found dead.
// h.mu is held.
func (h *hub) remember(w *xworker, held int, now time.Time) {
	if held == 0 {
		return
	}
	for len(h.buried) > 0 && (len(h.buried) >= maxBuriedKept || now.Sub(h.buried[0].at) > buriedKeep) {
		h.buried = h.buried[1:]
	}
	h.buried = append(h.buried, buriedWorker{key: workerKey(w.id, w.instance), held: held, at: now})
}

// heldBy returns the leases worker id (of instance, "" for any) holds
// here, or held when this hub found it dead.
func (h *hub) heldBy(id, instance string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	if w := h.workers[id]; w != nil && (instance == "" || w.instance == instance) {
		for _, l := range h.byTask {
			if l.worker == id && l.state == leaseHeld {
				n++
			}
		}
	}
	key := workerKey(id, instance)
	for _, b := range h.buried {
		if b.key == key || instance == "" && len(b.key) > len(id) && b.key[:len(id)+1] == id+"\x00" {
			n += b.held
		}
	}
	return n
}

// heldElsewhere asks the other live peers how many leases worker id (of
// instance) holds or held with them; known is false when one of them did
// not answer.
func (h *hub) heldElsewhere(ctx context.Context, id, instance string) (n int, known bool) {
	var members []string
	if err := h.p.read(ctx, func(nd *node.Node) error { members = liveOthers(nd); return nil }); err != nil {
		return 0, false
	}
	answered := 0
	askAll(ctx, h.p, members, &workerHeldReq{Worker: id, Instance: instance}, func(a *workerHeldAns) {
		answered++
		n += a.Held
	})
	return n, answered == len(members)
}

// elsewhereDeath is the outcome of a lone death d whose worker held n
// leases of other peers (or, !known, may have): a death beside others.
func elsewhereDeath(self string, d *loneDeath, n int, known bool) shard.Outcome {
	others := fmt.Sprintf("%d tasks of other peers", n)
	if !known {
		others = "perhaps tasks of other peers (not every peer answered)"
	}
	return shard.Outcome{Task: d.run.Task, Round: d.run.Round, Lost: true, Died: shard.DiedWithOthers,
		Error: fmt.Sprintf("worker %s on peer %s died running it and %s: %s", d.worker, self, others, d.why)}
}

// workerHeldReq asks a peer how many leases a worker holds or held there.
type workerHeldReq struct {
	rpcHeader
	Worker   string `json:"worker,omitempty"`
	Instance string `json:"instance,omitempty"`
}

type workerHeldAns struct {
	rpcError
	Held int `json:"held,omitempty"`
}

func (*workerHeldReq) op() string { return opWorkerHeld }
func (r *workerHeldReq) serve(_ context.Context, p *Peer) (workerHeldAns, error) {
	return workerHeldAns{Held: p.hub.heldBy(r.Worker, r.Instance)}, nil
}
