package simulate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// Broadcasts to external workers in the simulator: the workers workload
// submits some broadcast templates to workers (the API's "to": "workers";
// docs/api.md, Placement). The node the request reaches expands it over
// the workers the mesh lists as live (the edge's GET /v1/workers): one copy
// per worker, named by it and pinned to its peer. The core carries the
// worker to the copy's run (Run.Worker, through Grant.Worker from a remote
// owner), and the hub hands it to that worker only; a copy whose worker is
// dead fails its attempt (workers.go).

// toWorkersName names the template of a broadcast to workers until it is
// expanded (the simulator's stand-in for the request's "to").
const toWorkersName = "\x00to-workers"

// expandToWorkers expands a broadcast to workers over the live workers,
// as the runtime's edge does.
func (s *sim) expandToWorkers(spec *shard.GroupSpec) error {
	var ws []*simWorker
	for _, w := range s.allWorkers {
		nd := s.nodes[w.node]
		if nd.up && nd.hub != nil && !nd.hub.declared[w] && !w.dead && w.alive(s.now) {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return &shard.FieldError{Task: 0, Field: "handler", Message: fmt.Sprintf("no live worker serves handler %q", spec.Tasks[0].Handler)}
	}
	slices.SortFunc(ws, func(a, b *simWorker) int { return strings.Compare(a.id, b.id) })
	tmpl := spec.Tasks[0]
	spec.Tasks = make([]shard.TaskSpec, len(ws))
	for i, w := range ws {
		ts := tmpl
		ts.Name, ts.Pin = w.id, s.nodes[w.node].id
		spec.Tasks[i] = ts
	}
	return nil
}

// workerBroadcast checks an expansion to workers: each copy named by a
// worker and pinned to the peer it polls.
func (c *checker) workerBroadcast(nd *simNode, spec *shard.GroupSpec) {
	for _, ts := range spec.Tasks {
		i := slices.IndexFunc(c.s.allWorkers, func(w *simWorker) bool { return w.id == ts.Name })
		if i < 0 || c.s.nodes[c.s.allWorkers[i].node].id != ts.Pin || shard.BroadcastWorker(&ts) != ts.Name {
			c.s.fail(invWorkers, fmt.Sprintf("n%d expanded broadcast %s to workers with a bad copy %q pinned to %q", nd.idx, spec.ID, ts.Name, ts.Pin))
			return
		}
	}
	c.broadcasts++
}

// workerRun checks that an external run carries the worker its copy is
// pinned to (none for any other task): the core must carry the pin from
// the stored copy to the run, through a grant when the owner is another
// peer.
func (c *checker) workerRun(nd *simNode, r *workerRunView) {
	t := c.task(r.task)
	if t == nil {
		return
	}
	want := ""
	if t.g.spec.Mode == shard.ModeBroadcast {
		want = shard.BroadcastWorker(&t.g.spec.Tasks[t.idx()])
	}
	if r.worker != want {
		c.s.fail(invWorkers, fmt.Sprintf("n%d got a run of %s round %d for worker %q; the copy is pinned to worker %q", nd.idx, r.task, r.round, r.worker, want))
	}
}

// workerRunView is what workerRun reads of a run.
type workerRunView struct {
	task   shard.TaskID
	round  shard.Round
	worker string
}

// pinnedGone reports whether the worker a run is pinned to is not alive at
// this hub (unknown here, declared dead, or silent for the TTL).
func (h *simHub) pinnedGone(id string) bool {
	for _, w := range h.workers() {
		if w.id == id {
			return w.dead || !w.alive(h.nd.s.now)
		}
	}
	return true
}

// pinnedFailed is the outcome of a run pinned to a dead worker: the
// attempt fails (no other worker may take it).
func (h *simHub) pinnedFailed(t shard.TaskID, r shard.Round, worker string) shard.Outcome {
	return shard.Outcome{Task: t, Round: r, Error: fmt.Sprintf("worker %s is not alive on peer %s", worker, h.nd.id)}
}
