package api

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/needle-mesh/needle/shard"
)

// CorePath returns the JSON path of the field a *shard.FieldError names in
// spec, as the client wrote it: "tasks[3].deps" for a dag or parallel group,
// "stages[1][0].timeout" for a pipeline, "timeout" for a single task, and
// the bare field for a group-level error (Task < 0).
func CorePath(spec *shard.GroupSpec, fe *shard.FieldError) string {
	if fe.Task < 0 || fe.Task >= len(spec.Tasks) {
		return fe.Field
	}
	switch spec.Mode {
	case shard.ModeSingle:
		return fe.Field
	case shard.ModePipeline:
		return join(stagePath(spec.Tasks, fe.Task), fe.Field)
	case shard.ModeStream:
		return join("stages["+strconv.Itoa(spec.Tasks[fe.Task].Stage)+"]", fe.Field)
	case shard.ModeBroadcast:
		return join("tasks[0]", fe.Field) // every copy comes from the one template
	}
	return join("tasks["+strconv.Itoa(fe.Task)+"]", fe.Field)
}

// stagePath returns "stages[s][j]" for the i-th task of a flattened
// pipeline.
func stagePath(tasks []shard.TaskSpec, i int) string {
	s, j := tasks[i].Stage, 0
	for k := i - 1; k >= 0 && tasks[k].Stage == s; k-- {
		j++
	}
	return fmt.Sprintf("stages[%d][%d]", s, j)
}

// checkDeps checks the deps of a dag: every dep names another task of the
// group, at most once, and the graph has no cycle.
func checkDeps(tasks []shard.TaskSpec, names map[string]int) error {
	deps := make([][]int, len(tasks))
	for i, t := range tasks {
		path := "tasks[" + strconv.Itoa(i) + "].deps"
		seen := make(map[int]bool, len(t.Deps))
		for _, d := range t.Deps {
			j, ok := names[d]
			switch {
			case !ok:
				return fieldErr(path, "unknown task %q", d)
			case j == i:
				return fieldErr(path, "task %q depends on itself", d)
			case seen[j]:
				return fieldErr(path, "duplicate dep %q", d)
			}
			seen[j] = true
			deps[i] = append(deps[i], j)
		}
	}
	if i, cycle := findCycle(deps); cycle != nil {
		parts := make([]string, len(cycle))
		for k, j := range cycle {
			parts[k] = strconv.Quote(tasks[j].Name)
		}
		return fieldErr("tasks["+strconv.Itoa(i)+"].deps", "dependency cycle: %s", strings.Join(parts, " -> "))
	}
	return nil
}

// findCycle returns a task on a cycle of the graph (i depends on deps[i])
// and the cycle from it back to it, or -1, nil when the graph is acyclic. It
// runs Kahn's algorithm; each task left over has a left-over dep, so walking
// left-over deps from any of them must revisit a task, which is on a cycle.
func findCycle(deps [][]int) (int, []int) {
	pending := make([]int, len(deps)) // deps not yet resolved
	dependents := make([][]int, len(deps))
	var queue []int
	for i, ds := range deps {
		pending[i] = len(ds)
		for _, j := range ds {
			dependents[j] = append(dependents[j], i)
		}
		if len(ds) == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, k := range dependents[i] {
			if pending[k]--; pending[k] == 0 {
				queue = append(queue, k)
			}
		}
	}
	start := -1
	for i, p := range pending {
		if p > 0 {
			start = i
			break
		}
	}
	if start < 0 {
		return -1, nil
	}
	return walkCycle(deps, pending, start)
}

// walkCycle follows unresolved deps from start until a task repeats.
func walkCycle(deps [][]int, pending []int, start int) (int, []int) {
	pos := map[int]int{} // task -> position on the walk
	var walk []int
	cur := start
	for {
		if p, ok := pos[cur]; ok {
			return cur, append(walk[p:], cur)
		}
		pos[cur] = len(walk)
		walk = append(walk, cur)
		next := -1
		for _, j := range deps[cur] {
			if pending[j] > 0 {
				next = j
				break
			}
		}
		if next < 0 {
			panic("api: findCycle: a left-over task has no left-over dep")
		}
		cur = next
	}
}
