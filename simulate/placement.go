package simulate

import (
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// invPlace is the placement invariant: a pinned task runs, and its
// outcome is accepted, only on its pinned peer (also when stolen); a task
// that requires labels only on a peer carrying them; a broadcast has one
// copy per matching peer, pinned to it.
const invPlace = "placement"

// nodeLabels returns the labels of node i in the placement workload:
// zone a or b in turns, gpu on every third node from n1, and none in the
// other workloads (their runs stay as they were).
func nodeLabels(cfg Config, i int) map[string]string {
	if cfg.Workload != "placement" {
		return nil
	}
	l := map[string]string{"zone": "a"}
	if i%2 == 1 {
		l["zone"] = "b"
	}
	if i%3 == 1 {
		l["gpu"] = "true"
	}
	return l
}

// placement draws parallel groups and single tasks whose tasks are plain,
// require a label some peer carries, are pinned to a peer, or both; and
// broadcast groups of one template, with or without a label. Durations
// and failures are those of mixed; arrivals spread the same way.
func (g *gen) placement() *workload {
	w := &workload{}
	var work time.Duration
	for left := g.cfg.Tasks; left > 0; {
		var a arrival
		var d time.Duration
		if g.rng.IntN(5) == 0 {
			a, d = g.broadcastGroup()
			left -= min(left, g.cfg.Peers)
		} else {
			a, d = g.placedGroup(min(left, 1+g.rng.IntN(12)))
			left -= len(a.spec.Tasks)
		}
		work += d
		w.arrivals = append(w.arrivals, a)
	}
	g.spread(w, work*10/time.Duration(9*g.cfg.Peers*g.cfg.Slots))
	return w
}

func (g *gen) placedGroup(size int) (arrival, time.Duration) {
	mode := shard.ModeParallel
	if size == 1 {
		mode = shard.ModeSingle
	}
	fail := []uint16{0, 0, 50}[g.rng.IntN(3)]
	tasks := make([]shard.TaskSpec, size)
	var work time.Duration
	for i := range tasks {
		b := behaviour{dur: g.duration(g.rng.IntN(3)), failPM: fail, permPM: 200}
		work += b.dur
		tasks[i] = g.mixedTask(b, i)
		g.constrain(&tasks[i])
	}
	if g.rng.IntN(6) == 0 {
		// Delayed work: READY only after the faults (a peer that leaves
		// for good among them), so tasks pinned to a peer that left
		// reach the owner's queue and must fail, not wait forever.
		delay := 5*time.Second + time.Duration(g.rng.Int64N(int64(10*time.Second)))
		for i := range tasks {
			tasks[i].Delay = delay
		}
	}
	key := ""
	if g.rng.IntN(10) < 2 {
		key = fmt.Sprintf("key-%d-%d", g.cfg.Seed, g.n)
	}
	a := arrival{spec: g.group(mode, key, tasks), cancelTask: -1}
	if key != "" && g.rng.IntN(2) == 0 {
		a.repeat = time.Duration(1 + g.rng.Int64N(int64(time.Second)))
	}
	return a, work
}

// constrain makes a task plain (2 in 5), require a label of some peer, be
// pinned to a peer, or both (then the label is one of the pinned peer's).
func (g *gen) constrain(t *shard.TaskSpec) {
	k := g.rng.IntN(10)
	if k < 4 {
		return
	}
	i := g.rng.IntN(g.cfg.Peers)
	if k >= 7 {
		t.Pin = fmt.Sprintf("n%d", i)
	}
	if k < 7 || k == 9 {
		labels := node.LabelList(nodeLabels(g.cfg, i))
		t.Require = []string{labels[g.rng.IntN(len(labels))]}
	}
}

// broadcastGroup is a broadcast template: every peer, or those of one
// zone. The node that takes the request expands it (as the runtime's
// backend does), so the copies are known only then.
func (g *gen) broadcastGroup() (arrival, time.Duration) {
	b := behaviour{dur: g.duration(0)}
	t := shard.TaskSpec{Handler: "sleep", Payload: b.encode(0), Timeout: 2 * time.Second,
		Retry: shard.Retry{MaxAttempts: 3, Backoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond}}
	if g.rng.IntN(2) == 0 {
		t.Require = []string{"zone=" + []string{"a", "b"}[g.rng.IntN(min(2, g.cfg.Peers))]}
	}
	key := ""
	if g.rng.IntN(4) == 0 {
		key = fmt.Sprintf("key-%d-%d", g.cfg.Seed, g.n)
	}
	return arrival{spec: g.group(shard.ModeBroadcast, key, []shard.TaskSpec{t}), cancelTask: -1}, b.dur * time.Duration(g.cfg.Peers)
}

// unexpanded reports whether spec is a broadcast template not yet expanded.
func unexpanded(spec *shard.GroupSpec) bool {
	return spec.Mode == shard.ModeBroadcast && len(spec.Tasks) == 1 && spec.Tasks[0].Pin == ""
}

// expand expands a broadcast template on the first node its request
// reaches, like the runtime's backend, and registers the group with the
// checker once its copies are known. When no live peer matches, the op
// keeps the refusal: this and every later copy of the request answer it.
func (nd *simNode) expand(o *op) {
	o.expanded = true
	if !unexpanded(o.spec) {
		return // a repeat of an expanded broadcast
	}
	if o.spec.Tasks[0].Name == toWorkersName {
		if o.expandErr = nd.s.expandToWorkers(o.spec); o.expandErr == nil {
			nd.s.chk.workerBroadcast(nd, o.spec)
			nd.s.chk.register(o.spec)
		}
		return
	}
	if o.expandErr = nd.n.ExpandBroadcast(o.spec); o.expandErr != nil {
		return
	}
	nd.s.chk.broadcast(nd, o.spec)
	nd.s.chk.register(o.spec)
}

// broadcast checks an expansion: one copy per distinct peer, each named
// by and pinned to a peer that carries the template's labels.
func (c *checker) broadcast(nd *simNode, spec *shard.GroupSpec) {
	seen := map[string]bool{}
	for _, ts := range spec.Tasks {
		i, ok := c.s.byID[ts.Pin]
		switch {
		case !ok || seen[ts.Pin] || ts.Name != ts.Pin:
			c.s.fail(invPlace, fmt.Sprintf("n%d expanded broadcast %s to a bad copy %q pinned to %q", nd.idx, spec.ID, ts.Name, ts.Pin))
			return
		case !ts.Matches(ts.Pin, nodeLabels(c.s.cfg, i)):
			c.s.fail(invPlace, fmt.Sprintf("n%d expanded broadcast %s to %s, which lacks %v", nd.idx, spec.ID, ts.Pin, ts.Require))
			return
		}
		seen[ts.Pin] = true
	}
	c.broadcasts++
}

// placed checks that node nd may run task t (a start, or the holder of an
// accepted outcome); what says which, made only for a failure.
func (c *checker) placed(t *taskRec, nd int, what func() string) {
	ts := &t.g.spec.Tasks[t.idx()]
	if !ts.Constrained() {
		return
	}
	c.constrained++
	if !ts.Matches(c.s.nodes[nd].id, nodeLabels(c.s.cfg, nd)) {
		c.s.fail(invPlace, fmt.Sprintf("%s %s on n%d: pinned to %q, requires %v, n%d has %v",
			what(), t.id, nd, ts.Pin, ts.Require, nd, node.LabelList(nodeLabels(c.s.cfg, nd))))
	}
}

// unplaceable checks a task that failed with no holder (no run's outcome):
// only a task pinned to a peer that left the mesh may (shard.FailPinnedTo).
func (c *checker) unplaceable(t *taskRec, nd *simNode, why string) {
	pin := t.g.spec.Tasks[t.idx()].Pin
	if pin == forgerID && c.s.forgerGone {
		c.leftPinned++ // a broadcast copy the forger got as a member, failed once it was forgotten
		return
	}
	if i, ok := c.s.byID[pin]; !ok || !c.s.nodes[i].left {
		c.s.fail(invPlace, fmt.Sprintf("n%d failed %s without a run (%q); it is pinned to %q, which did not leave", nd.idx, t.id, why, pin))
		return
	}
	c.leftPinned++
}

// holderNode returns the node index of a lease holder "n<i>#<boot>".
func (c *checker) holderNode(holder string) (int, bool) {
	i, ok := c.s.byID[shard.HolderPeer(holder)]
	return i, ok
}

// idx returns the task's index in its group.
func (t *taskRec) idx() int {
	_, i, _ := t.id.Split()
	return i
}

// broadcastRuns checks, after a run without faults, that every copy of
// every broadcast ran exactly once (with faults a copy may run again:
// at-least-once).
func (c *checker) broadcastRuns() {
	if len(c.s.cfg.Faults) > 0 {
		return
	}
	for _, g := range c.order {
		if g.spec.Mode != shard.ModeBroadcast || !g.acked {
			continue
		}
		for _, t := range g.tasks {
			if t.runs != 1 && t.state == shard.Succeeded {
				c.s.fail(invPlace, fmt.Sprintf("broadcast copy %s (peer %s) ran %d times without faults", t.id, t.g.spec.Tasks[t.idx()].Pin, t.runs))
				return
			}
		}
	}
}
