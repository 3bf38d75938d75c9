package peer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Broadcasts to external workers. The peer that takes the request expands
// the template over the live workers of its handler, mesh-wide (one copy
// per worker, named by the worker's id and pinned to the peer it polls;
// api.ExpandToWorkers). The owner leases a copy to that peer only, as any
// pinned task, and this peer's hub hands it to that worker only
// (Run.Worker). A copy whose worker is dead here (silent for the TTL,
// unknown, or dead while it ran the copy) fails the attempt: the copy's
// retry policy decides whether it runs again, in that worker once it polls
// again under the same id.

var _ api.WorkerBroadcaster = backend{}

// WorkersFor lists the live workers of the mesh that serve handler, for a
// broadcast to workers.
func (b backend) WorkersFor(ctx context.Context, handler string) ([]api.WorkerInfo, error) {
	if b.p.handlers.Has(handler) {
		return nil, &api.FieldError{Field: "tasks[0].handler",
			Message: api.InPeersMessage(handler) + ": broadcast it to peers"}
	}
	list, err := b.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	if len(list.Unreachable) > 0 {
		return nil, api.NewError(api.CodeUnavailable, "", unansweredMessage(list.Unreachable))
	}
	out := list.Workers[:0]
	for _, w := range list.Workers {
		for _, h := range w.Handlers {
			if h == handler {
				out = append(out, w)
				break
			}
		}
	}
	return out, nil
}

// unansweredMessage is the 503 of a broadcast to workers while live peers
// did not answer for theirs: which, why it is refused, and what to do. It
// said "api: unavailable: peers X did not answer for their workers, which
// would miss their copies", and not whether to retry.
func unansweredMessage(peers []string) string {
	return fmt.Sprintf("peers %s did not answer for their workers (down or cut off, and not found dead yet): "+
		"a broadcast now would miss the copies of their workers; the request did nothing: retry it "+
		"(a peer that died is left out once found dead, within seconds)", strings.Join(peers, ", "))
}

// takes reports whether poll q may take run r: it serves r (handler,
// labels), and r is not pinned to another worker.
func (q *xpoll) takes(r *node.Run) bool {
	return (r.Worker == "" || r.Worker == q.w.id) && q.serves(r)
}

// pinnedGone reports whether r is pinned to a worker that is not alive on
// this peer at now. h.mu is held.
func (h *hub) pinnedGone(r *node.Run, now time.Time) bool {
	if r.Worker == "" {
		return false
	}
	w := h.workers[r.Worker]
	return w == nil || w.polling == 0 && now.Sub(w.seen) >= h.ttl
}

// pinnedFailed is the outcome of a copy pinned to a worker that is dead:
// the attempt fails (not handed back as Lost: no other worker may take it),
// and the copy's retry policy decides.
func (h *hub) pinnedFailed(r *node.Run) shard.Outcome {
	return shard.Outcome{Task: r.Task, Round: r.Round,
		Error: fmt.Sprintf("worker %s is not alive on peer %s: no poll or heartbeat for %v", r.Worker, h.p.ID(), h.ttl)}
}
