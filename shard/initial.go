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
	for i := range spec.readyAtSubmit {
		if !spec.Tasks[i].Constrained() {
			idx = append(idx, i)
		}
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

// ReadyAtSubmit counts the tasks of a group that are READY as soon as it
// applies: no dependencies, no delay, admitted by its pipeline's stages.
// Constrained ones count: they are READY for the peers that match them.
func ReadyAtSubmit(spec *GroupSpec) int {
	n := 0
	for range spec.readyAtSubmit {
		n++
	}
	return n
}

// readyAtSubmit yields the index of every task of g that is READY when g
// applies, in order: no dependencies, admitted by its gate (gate.go:
// the first Concurrency tasks without dependencies, or a streaming
// pipeline's first items), no delay (a delayed task admitted waits in
// its gate's room).
func (g *GroupSpec) readyAtSubmit(yield func(int) bool) {
	admitted := 0
	for i := range g.Tasks {
		t := &g.Tasks[i]
		switch {
		case len(t.Deps) > 0 || g.Mode == ModePipeline && t.Stage > 0:
			continue
		case g.Mode == ModeStream:
			if t.Stage != 0 || !g.streamAdmits(t) {
				continue
			}
		case g.Concurrency > 0:
			if admitted >= g.Concurrency {
				return
			}
			admitted++
		}
		if t.Delay > 0 {
			continue
		}
		if !yield(i) {
			return
		}
	}
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
