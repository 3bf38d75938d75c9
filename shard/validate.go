package shard

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// MaxTasksPerGroup bounds a group in the core, whatever the edge allows.
const MaxTasksPerGroup = 1 << 20

// Bounds on the durations of a spec. A longer one is refused at the edge
// (400 naming the field) and by Submit and SetSchedule: added to a time it
// would overflow (2562047h is the whole int64 range of nanoseconds), and a
// year covers every real use.
const (
	MaxDelay   = 366 * 24 * time.Hour // not-before of a task after its submission
	MaxTimeout = 366 * 24 * time.Hour // one attempt
	MaxBackoff = 24 * time.Hour       // retry.backoff and retry.max_backoff
	MaxEvery   = 366 * 24 * time.Hour // a schedule's interval
)

// MinTimeout is the shortest per-attempt timeout a spec may set (0 is
// none: the peer's default). It is the resolution of the timing wheel
// that expires leases: a shorter timeout cannot be honoured, and a task
// given one could only time out (1ns was accepted, and every attempt
// failed before a worker saw it). The edge refuses it with a 400 naming
// the field, Submit and SetSchedule too.
const MinTimeout = wheelResolution

// Validate checks the structure of a group (see ValidateStored) and the
// bounds of its durations (MaxDelay, MaxTimeout, MaxBackoff, MinTimeout). The edge
// decodes requests into specs and calls it; the core calls it again on
// every command from the network before proposing it.
func (g *GroupSpec) Validate() error {
	if err := g.ValidateStored(); err != nil {
		return err
	}
	for i := range g.Tasks {
		if err := g.Tasks[i].checkBounds(); err != nil {
			err.Task = i
			return err
		}
	}
	return nil
}

// MinTimeoutError is the message of a timeout d under MinTimeout, as
// Validate words it (the edge's error says the same).
func MinTimeoutError(d time.Duration) string {
	return fmt.Sprintf("%v is under the minimum of %v (the resolution of a peer's timers): the task could only time out", d, MinTimeout)
}

// checkBounds checks a task's durations against their bounds.
func (t *TaskSpec) checkBounds() *FieldError {
	for _, b := range []struct {
		field string
		d     time.Duration
		max   time.Duration
	}{
		{"timeout", t.Timeout, MaxTimeout},
		{"delay", t.Delay, MaxDelay},
		{"retry.backoff", t.Retry.Backoff, MaxBackoff},
		{"retry.max_backoff", t.Retry.MaxBackoff, MaxBackoff},
	} {
		if b.d > b.max {
			return &FieldError{Field: b.field, Message: fmt.Sprintf("%v is over the maximum of %v", b.d, b.max)}
		}
	}
	if t.Timeout > 0 && t.Timeout < MinTimeout {
		return &FieldError{Field: "timeout", Message: MinTimeoutError(t.Timeout)}
	}
	return nil
}

// ValidateStored checks what every committed group must satisfy to be
// applied, snapshotted and restored: a known mode, a non-empty task list
// that fits the mode, non-empty handlers, unique names, dependencies that
// exist and form no cycle (dag), contiguous stages (pipeline), counts the
// codec can hold, non-negative durations. Apply refuses a submission that
// fails it (the entry changes nothing, on every replica alike) and Restore
// a snapshot. It does not check Validate's bounds, which are newer than
// some logs: a committed entry stays applicable across versions.
func (g *GroupSpec) ValidateStored() error {
	if g.ID == "" {
		return &FieldError{Task: -1, Field: "id", Message: "group id is empty"}
	}
	if _, ok := ParseMode(g.Mode.String()); !ok {
		return &FieldError{Task: -1, Field: "mode", Message: fmt.Sprintf("unknown mode %d", g.Mode)}
	}
	n := len(g.Tasks)
	switch {
	case n == 0:
		return &FieldError{Task: -1, Field: "tasks", Message: "a group needs at least one task"}
	case n > MaxTasksPerGroup:
		return &FieldError{Task: -1, Field: "tasks", Message: fmt.Sprintf("%d tasks is over the limit of %d", n, MaxTasksPerGroup)}
	case g.Mode == ModeSingle && n != 1:
		return &FieldError{Task: -1, Field: "tasks", Message: "a single-task group has exactly one task"}
	}
	names := namesPool.Get().(map[string]int)
	defer func() {
		clear(names)
		namesPool.Put(names)
	}()
	for i := range g.Tasks {
		if err := g.Tasks[i].validate(g.Mode); err != nil {
			err.Task = i
			return err
		}
		if name := g.Tasks[i].Name; name != "" {
			if j, dup := names[name]; dup {
				return &FieldError{Task: i, Field: "name", Message: fmt.Sprintf("duplicate name %q (also tasks[%d])", name, j)}
			}
			names[name] = i
		}
	}
	if len(g.Stages) > 0 && g.Mode != ModeStream {
		return &FieldError{Task: -1, Field: "stages", Message: "stage objects are only for streaming pipelines"}
	}
	switch {
	case g.Concurrency < 0:
		return &FieldError{Task: -1, Field: "concurrency", Message: "must be >= 0 (0 = unbounded)"}
	case g.Concurrency > math.MaxInt32:
		return &FieldError{Task: -1, Field: "concurrency", Message: fmt.Sprintf("%d is over the maximum of %d", g.Concurrency, math.MaxInt32)}
	case g.Concurrency > 0 && g.Mode == ModeStream:
		return &FieldError{Task: -1, Field: "concurrency", Message: "a streaming pipeline bounds each stage instead (stages[].concurrency)"}
	case g.Concurrency > 0 && g.Mode != ModeParallel && g.Mode != ModeDAG && g.Mode != ModePipeline:
		return &FieldError{Task: -1, Field: "concurrency", Message: fmt.Sprintf("only for parallel, dag and staged groups, not %s", g.Mode)}
	}
	if len(g.Notify) > MaxNotifyLen {
		return &FieldError{Task: -1, Field: "notify", Message: fmt.Sprintf("longer than %d bytes", MaxNotifyLen)}
	}
	switch g.Mode {
	case ModeDAG:
		return validateDAG(g.Tasks, names)
	case ModePipeline:
		return validateStages(g.Tasks)
	case ModeStream:
		return validateStream(g)
	case ModeBroadcast:
		return validateBroadcast(g.Tasks)
	}
	return nil
}

// namesPool keeps the maps ValidateStored indexes task names in, cleared:
// every replica validates every group it applies, and a new map for each
// group of 1,000 named tasks was 4% of the bytes a busy peer allocated.
var namesPool = sync.Pool{New: func() any { return map[string]int{} }}

// MaxNotifyLen bounds a webhook URL.
const MaxNotifyLen = 2048

// validateStream checks a streaming pipeline: named stages with
// non-negative concurrency, and tasks laid out item-major (task
// i*len(Stages)+s is item i in stage s).
func validateStream(g *GroupSpec) error {
	ns := len(g.Stages)
	if ns == 0 {
		return &FieldError{Task: -1, Field: "stages", Message: "a pipeline needs at least one stage"}
	}
	seen := make(map[string]int, ns)
	for i, st := range g.Stages {
		field := fmt.Sprintf("stages[%d]", i)
		switch {
		case st.Name == "":
			return &FieldError{Task: -1, Field: field + ".name", Message: "stage name is required"}
		case st.Concurrency < 0:
			return &FieldError{Task: -1, Field: field + ".concurrency", Message: "must be >= 0 (0 = unbounded)"}
		case st.Concurrency > math.MaxInt32:
			return &FieldError{Task: -1, Field: field + ".concurrency", Message: fmt.Sprintf("%d is over the maximum of %d", st.Concurrency, math.MaxInt32)}
		}
		if j, dup := seen[st.Name]; dup {
			return &FieldError{Task: -1, Field: field + ".name", Message: fmt.Sprintf("duplicate stage name %q (also stages[%d])", st.Name, j)}
		}
		seen[st.Name] = i
	}
	if len(g.Tasks)%ns != 0 {
		return &FieldError{Task: -1, Field: "items", Message: fmt.Sprintf("%d tasks is not items x %d stages", len(g.Tasks), ns)}
	}
	for i := range g.Tasks {
		if t := &g.Tasks[i]; t.Item != i/ns || t.Stage != i%ns {
			return &FieldError{Task: i, Field: "stage", Message: fmt.Sprintf("task %d must be item %d of stage %d", i, i/ns, i%ns)}
		}
	}
	return nil
}

// validateBroadcast checks that every copy is pinned: a peer's copy (named
// by its pin) to a different peer, a worker's copy (named by its worker,
// see Shard.BroadcastWorker) to the peer that worker polls, where several
// workers may poll one peer (the names, unique in the group, keep the
// workers apart). Copies of both kinds are not mixed in one group.
func validateBroadcast(tasks []TaskSpec) error {
	pins := make(map[string]int, len(tasks))
	for i := range tasks {
		p := tasks[i].Pin
		if p == "" {
			return &FieldError{Task: i, Field: "pin", Message: "every copy of a broadcast is pinned to its peer"}
		}
		if toWorker := BroadcastWorker(&tasks[i]) != ""; toWorker != (BroadcastWorker(&tasks[0]) != "") {
			return &FieldError{Task: i, Field: "name", Message: "a broadcast goes to peers (each copy named by its pin) or to workers, not both"}
		} else if toWorker {
			continue
		}
		if j, dup := pins[p]; dup {
			return &FieldError{Task: i, Field: "pin", Message: fmt.Sprintf("peer %s twice (also tasks[%d])", p, j)}
		}
		pins[p] = i
	}
	return nil
}

// ValidateLabel checks one "key=value" label or selector.
func ValidateLabel(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	switch {
	case !ok:
		return fmt.Errorf("%q is not key=value", kv)
	case k == "" || v == "":
		return fmt.Errorf("%q: key and value must not be empty", kv)
	case strings.ContainsAny(k, "=, \t\n") || strings.ContainsAny(v, ", \t\n"):
		return fmt.Errorf("%q: no spaces or commas, and one '=' between key and value", kv)
	case len(kv) > 256:
		return fmt.Errorf("%q: longer than 256 bytes", kv[:32]+"...")
	}
	return nil
}

func (t *TaskSpec) validate(mode Mode) *FieldError {
	switch {
	case t.Handler == "":
		return &FieldError{Field: "handler", Message: "handler is required"}
	case t.Timeout < 0:
		return &FieldError{Field: "timeout", Message: "must not be negative"}
	case t.Delay < 0:
		return &FieldError{Field: "delay", Message: "must not be negative"}
	case t.Retry.MaxAttempts < 0:
		return &FieldError{Field: "retry.max_attempts", Message: "must be >= 1"}
	case t.Retry.Backoff < 0:
		return &FieldError{Field: "retry.backoff", Message: "must not be negative"}
	case t.Retry.MaxBackoff < 0:
		return &FieldError{Field: "retry.max_backoff", Message: "must not be negative"}
	case t.Stage < 0 || (mode != ModePipeline && mode != ModeStream && t.Stage != 0):
		return &FieldError{Field: "stage", Message: "stage is only for pipeline groups and must be >= 0"}
	case t.Item < 0 || t.Item > math.MaxInt32 || (mode != ModeStream && t.Item != 0):
		return &FieldError{Field: "item", Message: "item is only for streaming pipelines and must be >= 0"}
	case len(t.Pin) > 256:
		return &FieldError{Field: "pin", Message: "peer id longer than 256 bytes"}
	case mode == ModeDAG && t.Name == "":
		return &FieldError{Field: "name", Message: "tasks of a dag need a name"}
	case mode != ModeDAG && len(t.Deps) > 0:
		return &FieldError{Field: "deps", Message: fmt.Sprintf("deps are only allowed in dag groups, not %v", mode)}
	}
	for i, kv := range t.Require {
		if err := ValidateLabel(kv); err != nil {
			return &FieldError{Field: fmt.Sprintf("require[%d]", i), Message: err.Error()}
		}
		if i > 0 && t.Require[i-1] >= kv {
			return &FieldError{Field: "require", Message: "labels must be sorted and unique"}
		}
	}
	return nil
}

// validateDAG checks that deps name tasks of the group and that there is no
// cycle (iterative three-colour DFS, so a deep chain cannot blow the stack).
func validateDAG(tasks []TaskSpec, names map[string]int) error {
	adj := make([][]int, len(tasks))
	for i := range tasks {
		for _, d := range tasks[i].Deps {
			j, ok := names[d]
			if !ok {
				return &FieldError{Task: i, Field: "deps", Message: fmt.Sprintf("unknown task %q", d)}
			}
			if j == i {
				return &FieldError{Task: i, Field: "deps", Message: fmt.Sprintf("task %q depends on itself", d)}
			}
			adj[i] = append(adj[i], j)
		}
	}
	if i := findCycle(adj); i >= 0 {
		return &FieldError{Task: i, Field: "deps", Message: fmt.Sprintf("dependency cycle through %q", tasks[i].Name)}
	}
	return nil
}

// findCycle returns a node on a cycle of the graph, or -1.
func findCycle(adj [][]int) int {
	const (
		white = iota
		grey
		black
	)
	colour := make([]uint8, len(adj))
	type frame struct{ node, next int }
	var stack []frame
	for root := range adj {
		if colour[root] != white {
			continue
		}
		stack = append(stack[:0], frame{root, 0})
		colour[root] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(adj[f.node]) {
				colour[f.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			m := adj[f.node][f.next]
			f.next++
			switch colour[m] {
			case grey:
				return m
			case white:
				colour[m] = grey
				stack = append(stack, frame{m, 0})
			}
		}
	}
	return -1
}

// validateStages checks that pipeline stages are 0..k-1 with none empty.
func validateStages(tasks []TaskSpec) error {
	maxStage := 0
	for _, t := range tasks {
		maxStage = max(maxStage, t.Stage)
	}
	if maxStage >= len(tasks) {
		return &FieldError{Task: -1, Field: "stages", Message: "stage numbers must be contiguous from 0"}
	}
	seen := make([]bool, maxStage+1)
	for _, t := range tasks {
		seen[t.Stage] = true
	}
	for s, ok := range seen {
		if !ok {
			return &FieldError{Task: -1, Field: fmt.Sprintf("stages[%d]", s), Message: "stage is empty"}
		}
	}
	return nil
}
