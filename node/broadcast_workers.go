package node

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// Scheduled broadcasts to external workers. The owner of a schedule
// expands each firing over the live workers of the template's handler in
// its own view: its own workers (SetDemand) and those the live members
// advertised in their last heartbeat (WorkerAd.Workers). The copies are
// those of a submitted broadcast to workers (api.ExpandToWorkers): named
// by the worker's id, pinned to the peer it polls, in worker id order.

// liveWorker is one external worker in this node's view.
type liveWorker struct {
	id, peer string
	labels   map[string]string
}

// workersOf returns the live workers of handler in this node's view,
// sorted by id and peer: this peer's, unless it drains, and those of the
// live, not draining members.
func (n *Node) workersOf(handler string) []liveWorker {
	var out []liveWorker
	if n.mesh.placeable(n.cfg.ID) {
		for _, d := range n.ext.demand {
			if d.Handler == handler {
				for _, id := range d.Workers {
					out = append(out, liveWorker{id: id, peer: n.cfg.ID, labels: d.Labels})
				}
			}
		}
	}
	for _, peer := range n.mesh.memberIDs() {
		if peer == n.cfg.ID || !n.mesh.placeable(peer) {
			continue
		}
		for _, w := range n.mesh.members[peer].workers() {
			if w.Handler != handler {
				continue
			}
			labels := ParseLabels(w.Labels)
			for _, id := range w.Workers {
				out = append(out, liveWorker{id: id, peer: peer, labels: labels})
			}
		}
	}
	slices.SortFunc(out, func(a, b liveWorker) int {
		return cmp.Or(strings.Compare(a.id, b.id), strings.Compare(a.peer, b.peer))
	})
	return out
}

// expandToWorkers turns a broadcast template named shard.WorkersTemplate
// into one copy per live worker of its handler that carries its labels: a
// worker polling two peers gets one copy, at the first peer in id order; a
// worker whose id is its peer's id is left out (its copy would read as the
// peer's). No worker serving the handler is a *shard.FieldError on
// tasks[0].handler, none carrying the labels one on tasks[0].require.
func (n *Node) expandToWorkers(spec *shard.GroupSpec) error {
	tmpl := spec.Tasks[0]
	tmpl.Name = ""
	served := 0
	var copies []shard.TaskSpec
	ws := n.workersOf(tmpl.Handler)
	for i, w := range ws {
		if w.id == w.peer || (i > 0 && ws[i-1].id == w.id) {
			continue
		}
		served++
		if !tmpl.Matches("", w.labels) {
			continue
		}
		ts := tmpl
		ts.Name, ts.Pin = w.id, w.peer
		copies = append(copies, ts)
	}
	switch {
	case served == 0:
		return &shard.FieldError{Task: 0, Field: "handler", Message: fmt.Sprintf("no live worker serves handler %q", tmpl.Handler)}
	case len(copies) == 0:
		return &shard.FieldError{Task: 0, Field: "require", Message: fmt.Sprintf("none of the %d live workers of handler %q has labels %s",
			served, tmpl.Handler, strings.Join(tmpl.Require, ","))}
	case len(copies) > shard.MaxTasksPerGroup:
		return &shard.FieldError{Task: -1, Field: "tasks", Message: fmt.Sprintf("%d live workers of handler %q exceed the limit of %d tasks",
			len(copies), tmpl.Handler, shard.MaxTasksPerGroup)}
	}
	spec.Tasks = copies
	return nil
}
