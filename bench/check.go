package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// maxProblems bounds the failed checks kept per repetition.
const maxProblems = 10

// CheckError says that a benchmark saw wrong results or lost tasks. Run
// returns it after printing the table.
type CheckError struct {
	Failures []string // "w1 rep 2: 3 failed checks, first: ..."
}

func (e *CheckError) Error() string {
	return "bench: failed checks: " + strings.Join(e.Failures, "; ")
}

// checks collects failed checks of one repetition.
type checks struct {
	list  []string
	count int
}

// addf records a failed check.
func (c *checks) addf(format string, args ...any) {
	c.count++
	if len(c.list) < maxProblems {
		c.list = append(c.list, fmt.Sprintf(format, args...))
	}
}

// task checks that t SUCCEEDED with a result equal to payload.
func (c *checks) task(t Task, payload json.RawMessage) bool {
	if t.State != "SUCCEEDED" {
		c.addf("task %s: state %s, want SUCCEEDED (error: %v)", t.ID, t.State, t.Error)
		return false
	}
	if !jsonEqual(t.Result, payload) {
		c.addf("task %s: result %s, want %s", t.ID, clip(t.Result), clip(payload))
		return false
	}
	return true
}

// group checks every task of g against the payloads of the submitted
// tasks (id -> payload) and that no submitted task is missing from g.
func (c *checks) group(g Group, want map[string]json.RawMessage) (ok int) {
	seen := make(map[string]bool, len(g.Tasks))
	for _, t := range g.Tasks {
		p, known := want[t.ID]
		if !known {
			c.addf("group %s: unexpected task %s", g.ID, t.ID)
			continue
		}
		seen[t.ID] = true
		if c.task(t, p) {
			ok++
		}
	}
	if len(seen) < len(want) {
		var missing []string
		for _, id := range slices.Sorted(maps.Keys(want)) {
			if !seen[id] {
				missing = append(missing, id)
			}
		}
		c.addf("group %s: %d of %d submitted tasks missing (e.g. %s)",
			g.ID, len(missing), len(want), missing[0])
	}
	return ok
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// clip shortens a JSON value for a message.
func clip(b json.RawMessage) string {
	const n = 80
	if len(b) == 0 {
		return "(none)"
	}
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
