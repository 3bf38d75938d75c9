package shard

// A gate bounds the tasks of a group in flight (READY, RUNNING or WAITING)
// at once: each stage of a streaming pipeline has one (its concurrency),
// and a parallel, dag or pipeline group with a concurrency has one for all
// its tasks. A task whose dependencies are done while its gate is full
// waits PENDING in the gate's held heap, and the lowest index goes in first
// as a task of the gate finishes, so the order is a function of the state
// (every replica lets in the same task).

// initGates gives g its gates, none when nothing bounds it.
func (g *group) initGates() {
	n := 0
	switch {
	case g.spec.Mode == ModeStream:
		n = len(g.spec.Stages)
	case g.spec.Concurrency > 0:
		n = 1
	}
	if n > 0 {
		g.gateLive = make([]int, n)
		g.held = make([]intHeap, n)
	}
}

// gate returns the index of t's gate: its stage in a streaming pipeline,
// 0 otherwise. Only meaningful when g has gates (gateLive != nil).
func (g *group) gate(t *task) int {
	if g.spec.Mode == ModeStream {
		return int(t.stage)
	}
	return 0
}

// gateCap is gate i's bound on tasks in flight; 0 = unbounded.
func (g *group) gateCap(i int) int {
	if g.spec.Mode == ModeStream {
		return g.spec.Stages[i].Concurrency
	}
	return g.spec.Concurrency
}

// gateFull reports whether t's gate has no room for it.
func (g *group) gateFull(t *task) bool {
	if g.gateLive == nil {
		return false
	}
	i := g.gate(t)
	c := g.gateCap(i)
	return c > 0 && g.gateLive[i] >= c
}

// inFlight is 1 for the states that hold room in a gate.
func inFlight(st State) int {
	if st == Ready || st == Running || st == Waiting {
		return 1
	}
	return 0
}
