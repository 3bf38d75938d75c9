package shard

import (
	"slices"
	"time"
)

// InitialLeases returns lease events for up to n tasks of a group that are
// READY as soon as it is submitted (no dependencies, no delay), highest
// priority first, to be proposed in the same entry right after its
// submitted event: the owner then starts them one Raft commit earlier. The
// caller only does this when nothing else is READY (the new tasks jump no
// queue). The leases apply like any other (fenced: READY and round 1).
// Constrained tasks (labels, pin) are left to Lease, which matches them.
func InitialLeases(now time.Time, spec *GroupSpec, n int, holder string, defaultTimeout, grace time.Duration) []Event {
	if n <= 0 {
		return nil
	}
	var idx []int
	for i := range spec.Tasks {
		t := &spec.Tasks[i]
		if t.Delay > 0 || len(t.Deps) > 0 || (spec.Mode == ModePipeline && t.Stage > 0) || t.Constrained() {
			continue
		}
		if spec.Mode == ModeStream && (t.Stage > 0 || !spec.streamAdmits(t)) {
			continue
		}
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return int(spec.Tasks[b].Priority) - int(spec.Tasks[a].Priority)
	})
	evs := make([]Event, 0, min(n, len(idx)))
	for _, i := range idx[:min(n, len(idx))] {
		timeout := spec.Tasks[i].Timeout
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		evs = append(evs, Event{Type: EvLeased, At: now, Group: spec.ID, Task: TaskIDOf(spec.ID, i),
			Round: 1, Holder: holder, Expiry: now.Add(timeout + grace)})
	}
	return evs
}

// Config returns the shard's configuration.
func (s *Shard) Config() Config { return s.cfg }

// streamAdmits reports whether item t of a streaming pipeline's first stage
// is released at submission (within the stage's concurrency).
func (g *GroupSpec) streamAdmits(t *TaskSpec) bool {
	if t.Stage >= len(g.Stages) {
		return false
	}
	c := g.Stages[t.Stage].Concurrency
	return c <= 0 || t.Item < c
}
