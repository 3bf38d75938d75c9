package node

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// LabelList returns labels as "key=value" strings, sorted (the form
// heartbeats carry and /v1/peers shows).
func LabelList(labels map[string]string) []string {
	if len(labels) == 0 {
		return nil
	}
	out := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+"="+labels[k])
	}
	return out
}

// ParseLabels returns "key=value" strings as a map; strings without '='
// are skipped (heartbeats are checked when decoded).
func ParseLabels(list []string) map[string]string {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// Labels returns this peer's labels, "key=value", sorted.
func (n *Node) Labels() []string { return LabelList(n.placement.Labels) }

// ReadyRunnable is readyRunnable, for checks: the simulator holds a peer
// that keeps taking other owners' surplus while it has READY work of
// its own to a bound (its starvation invariant).
func (n *Node) ReadyRunnable() int { return n.readyRunnable() }

// readyRunnable counts the READY tasks, in the partitions this node serves,
// that it may run itself (not pinned elsewhere, labels it carries).
func (n *Node) readyRunnable() int {
	total := 0
	for p := range n.readyHeld {
		total += p.shard.ReadyFor(n.placement)
	}
	return total
}

// placeable reports whether a peer may be handed new work: a live member
// that is not draining.
func (m *mesh) placeable(id string) bool {
	mb := m.members[id]
	if id == m.n.cfg.ID {
		return !m.n.draining
	}
	return mb != nil && mb.state != PeerDead && !mb.draining
}

// runnableBy returns the live, not draining members (sorted) that may run
// a task with this pin and require.
func (m *mesh) runnableBy(ts *shard.TaskSpec) []string {
	var out []string
	for _, id := range m.memberIDs() {
		if m.placeable(id) && ts.Matches(id, m.members[id].labels()) {
			out = append(out, id)
		}
	}
	return out
}

// waiting says why a READY constrained task may not start: no live peer
// matches it in this node's membership view. "" when one does (or when
// the task is not READY or not constrained).
func (n *Node) waiting(v *shard.TaskView) string {
	if v.State == shard.Ready && n.External(v.Handler) {
		switch served, matched := n.servesExternal(v.Handler, v.Require); {
		case !served:
			return noWorker(v.Handler)
		case !matched:
			return fmt.Sprintf("no live worker of handler %q has labels %s", v.Handler, strings.Join(v.Require, ","))
		}
		return ""
	}
	if v.State != shard.Ready || (v.Pin == "" && len(v.Require) == 0) {
		return ""
	}
	ts := shard.TaskSpec{Pin: v.Pin, Require: v.Require}
	if len(n.mesh.runnableBy(&ts)) > 0 {
		return ""
	}
	if v.Pin != "" {
		mb := n.mesh.members[v.Pin]
		switch {
		case mb == nil:
			return fmt.Sprintf("pinned to peer %s, which is not a member of the mesh (yet: the task runs once it joins)", v.Pin)
		case !n.mesh.placeable(v.Pin):
			return fmt.Sprintf("pinned to peer %s, which is not alive", v.Pin)
		}
		return fmt.Sprintf("pinned to peer %s, which lacks labels %s", v.Pin, strings.Join(v.Require, ","))
	}
	return "no live peer has labels " + strings.Join(v.Require, ",")
}

// HandlerWaiting says why READY tasks of handler wait whatever their
// labels: an external handler that no live worker in this node's view
// serves. "" when some may run them.
func (n *Node) HandlerWaiting(handler string) string {
	if !n.External(handler) {
		return ""
	}
	if served, _ := n.servesExternal(handler, nil); served {
		return ""
	}
	return noWorker(handler)
}

func noWorker(handler string) string {
	return fmt.Sprintf("no live worker serves handler %q", handler)
}

// ExpandBroadcast turns a broadcast group as submitted (one task template,
// optionally with require) into one copy per live peer that matches the
// template's labels in this node's membership view, each pinned to its
// peer and named by its id, in peer id order. Peers that join later are
// not included. A spec whose tasks are already pinned (expanded by the
// peer that took the request) is left as it is. Zero matching peers is a
// *shard.FieldError on tasks[0].require. A schedule's template to workers
// (shard.WorkersTemplate) is expanded over the live external workers of
// its handler instead (expandToWorkers).
func (n *Node) ExpandBroadcast(spec *shard.GroupSpec) error {
	if spec.Mode != shard.ModeBroadcast || (len(spec.Tasks) > 0 && spec.Tasks[0].Pin != "") {
		return nil
	}
	if len(spec.Tasks) != 1 {
		return &shard.FieldError{Task: -1, Field: "tasks", Message: fmt.Sprintf("a broadcast takes one task template, not %d", len(spec.Tasks))}
	}
	if shard.ToWorkers(spec) {
		return n.expandToWorkers(spec)
	}
	tmpl := spec.Tasks[0]
	peers := n.mesh.runnableBy(&tmpl)
	if len(peers) == 0 {
		return &shard.FieldError{Task: 0, Field: "require", Message: fmt.Sprintf("no live peer has labels %s (%d members)",
			strings.Join(tmpl.Require, ","), len(n.mesh.members))}
	}
	spec.Tasks = make([]shard.TaskSpec, len(peers))
	for i, id := range peers {
		ts := tmpl
		ts.Name, ts.Pin = id, id
		spec.Tasks[i] = ts
	}
	return nil
}
