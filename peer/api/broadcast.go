package api

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// Broadcast targets, the "to" of a broadcast group (POST /v1/groups).
const (
	// ToPeers runs one copy on every live peer matching the template's
	// labels (the default).
	ToPeers = "peers"
	// ToWorkers runs one copy in every live external worker of the
	// template's handler that carries its labels, mesh-wide.
	ToWorkers = "workers"
)

// WorkerBroadcaster is what a Backend implements to take broadcasts to
// external workers.
type WorkerBroadcaster interface {
	// WorkersFor returns the live external workers of the whole mesh that
	// serve handler (GET /v1/workers, filtered). A handler this peer runs
	// itself (built in or registered) is a *FieldError naming
	// tasks[0].handler; peers that did not answer are ErrUnavailable, as a
	// copy would be missing for each of their workers.
	WorkersFor(ctx context.Context, handler string) ([]WorkerInfo, error)
}

// checkTo reads a group's "to": "" or "peers" (a broadcast to peers) or
// "workers", on a broadcast only.
func checkTo(to string, mode shard.Mode) (string, error) {
	switch {
	case to == "":
		return ToPeers, nil
	case mode != shard.ModeBroadcast:
		return "", fieldErr("to", "only for a broadcast (mode broadcast), not %v", mode)
	case to != ToPeers && to != ToWorkers:
		return "", fieldErr("to", "unknown target %q; want peers or workers", to)
	}
	return to, nil
}

// ExpandToWorkers turns a broadcast template (one task, not pinned) into one
// copy per live worker in ws that serves its handler and carries its
// required labels: named by the worker's id and pinned to the peer it
// polls, in worker id order (the copies' shard indexes). A worker listed by
// two peers (it polls both) gets one copy, at the first peer in id order;
// a worker whose id is its peer's id (a copy named so would read as the
// peer's) is left out. No worker serving the handler is a *FieldError
// naming tasks[0].handler, none carrying the labels one naming
// tasks[0].require.
func ExpandToWorkers(spec *shard.GroupSpec, ws []WorkerInfo, maxTasks int) error {
	if spec.Mode != shard.ModeBroadcast || len(spec.Tasks) != 1 || spec.Tasks[0].Pin != "" {
		return fieldErr("to", "workers: only for a broadcast of one task template")
	}
	tmpl := spec.Tasks[0]
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b WorkerInfo) int { return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.Peer, b.Peer)) })
	served := 0
	var copies []shard.TaskSpec
	for i, w := range ws {
		if !slices.Contains(w.Handlers, tmpl.Handler) || w.ID == w.Peer || w.Peer == "" || (i > 0 && ws[i-1].ID == w.ID) {
			continue
		}
		served++
		labels := map[string]string{}
		for _, kv := range w.Labels {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = v
		}
		if !tmpl.Matches("", labels) {
			continue
		}
		ts := tmpl
		ts.Name, ts.Pin = w.ID, w.Peer
		copies = append(copies, ts)
	}
	switch {
	case served == 0:
		return fieldErr("tasks[0].handler", "no live worker serves handler %q: a broadcast to workers runs one copy in each", tmpl.Handler)
	case len(copies) == 0:
		return fieldErr("tasks[0].require", "none of the %d live workers of handler %q has labels %s", served, tmpl.Handler, strings.Join(tmpl.Require, ","))
	case maxTasks > 0 && len(copies) > maxTasks:
		return fieldErr("to", "%d live workers of handler %q exceed the limit of %d tasks", len(copies), tmpl.Handler, maxTasks)
	}
	spec.Tasks = copies
	return nil
}

// expandToWorkers expands a broadcast to workers over the mesh's live
// workers, as the backend lists them.
func (s *server) expandToWorkers(ctx context.Context, spec *shard.GroupSpec) error {
	wb, ok := s.b.(WorkerBroadcaster)
	if !ok {
		return fieldErr("to", "workers: this peer serves no external workers")
	}
	ws, err := wb.WorkersFor(ctx, spec.Tasks[0].Handler)
	if err != nil {
		return err
	}
	if err := ExpandToWorkers(spec, ws, s.opts.Limits.withDefaults().MaxTasks); err != nil {
		return err
	}
	return validateCore(spec)
}

// checkScheduleToWorkers refuses a schedule to workers that no firing
// could expand: this peer serves no external workers, or the handler runs
// in the peers (built in or registered). Which workers are live is up to
// each firing (none: the firing is skipped), so an unreachable peer does
// not refuse it.
func (s *server) checkScheduleToWorkers(ctx context.Context, spec *shard.ScheduleSpec) error {
	wb, ok := s.b.(WorkerBroadcaster)
	if !ok {
		return fieldErr("group.to", "workers: this peer serves no external workers")
	}
	_, err := wb.WorkersFor(ctx, spec.Group.Tasks[0].Handler)
	var fe *FieldError
	if errors.As(err, &fe) {
		c := *fe
		c.Field = join("group", fe.Field)
		return &c
	}
	return nil
}
