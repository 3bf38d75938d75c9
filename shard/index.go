package shard

import (
	"slices"
	"strings"
	"time"
)

// The list index: the groups of a partition ordered by (creation time, id),
// so that listing newest first walks it backwards and a cursor (the key of
// the last item a page returned) resumes with a binary search. It is derived
// from the folded state (appended to on submission, rebuilt on Restore), so
// every replica holds the same one; it is not part of snapshots. A group
// removed by retention lingers in the slice until the next compaction (dead
// counts those), so a removal costs O(1).
type index struct {
	groups []*group // sorted by (created, id); removed groups linger
	dead   int      // removed groups still in groups
}

// ListKey orders listed items: newest first means descending (Created,
// Group, Task). For groups Task is ignored.
type ListKey struct {
	Created time.Time // the group's creation time (the submission's time)
	Group   GroupID
	Task    int // the task's index in its group
}

// Less reports whether k sorts before o (older).
func (k ListKey) Less(o ListKey) bool {
	if c := k.Created.Compare(o.Created); c != 0 {
		return c < 0
	}
	if k.Group != o.Group {
		return k.Group < o.Group
	}
	return k.Task < o.Task
}

// MaxListLimit bounds Filter.Limit: the most items one list query answers.
const MaxListLimit = 1000

// Filter selects tasks (or groups) for ListTasks and ListGroups. Zero
// fields match everything.
type Filter struct {
	States      []State      // tasks: any of these states
	GroupStates []GroupState // groups: any of these states
	Handler     string       // tasks: this handler; groups: one task has it
	Mode        Mode         // the group's mode
	Schedule    ScheduleID   // groups created by this schedule's firings
	Peer        string       // ran on this peer (last lease holder's peer id)
	Label       string       // "key=value" the task requires
	Q           string       // a substring of a task name, a task or group id, or a group key
	// WorkerDeaths, when positive, matches the tasks that at least this
	// many external workers died running since their last outcome
	// (Deaths.Total): the tasks workers keep dying with, before the
	// crash limit fails them.
	WorkerDeaths int

	CreatedAfter, CreatedBefore   time.Time // exclusive bounds
	FinishedAfter, FinishedBefore time.Time // exclusive bounds; unfinished items never match a set bound

	// After, when set, lists only items older than it (the last item of
	// the previous page).
	After *ListKey
	Limit int // at most this many; <= 0 means 50
}

func (s *Shard) indexAdd(g *group) {
	ix := &s.index
	i := len(ix.groups)
	key := ListKey{Created: g.created, Group: g.id}
	for i > 0 && key.Less(ListKey{Created: ix.groups[i-1].created, Group: ix.groups[i-1].id}) {
		i-- // the owner's clock went back (a new leader): insert in order
	}
	ix.groups = slices.Insert(ix.groups, i, g)
}

func (s *Shard) indexRemoved(g *group) {
	ix := &s.index
	// The entry keeps its place (its creation and id) but not the group:
	// a removed group's memory is freed at its removal.
	key := ListKey{Created: g.created, Group: g.id}
	if i, ok := slices.BinarySearchFunc(ix.groups, key, func(e *group, k ListKey) int {
		ek := ListKey{Created: e.created, Group: e.id}
		switch {
		case ek.Less(k):
			return -1
		case k.Less(ek):
			return 1
		}
		return 0
	}); ok && ix.groups[i] == g {
		ix.groups[i] = &group{id: g.id, created: g.created}
	}
	ix.dead++
	if ix.dead < 1024 || ix.dead*2 < len(ix.groups) {
		return
	}
	ix.groups = slices.DeleteFunc(ix.groups, func(g *group) bool { return s.groups[g.id] != g })
	ix.dead = 0
}

// indexRebuild derives the index from the groups (after a restore).
func (s *Shard) indexRebuild() {
	gs := make([]*group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *group) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(string(a.id), string(b.id))
	})
	s.index = index{groups: gs}
}

// IndexBytes returns the memory the list index holds (its slice), for
// measurements.
func (s *Shard) IndexBytes() int { return cap(s.index.groups) * 8 }

// walk calls f for the live groups newest first, starting below the
// cursor's group (inclusive of it when f must see its older tasks), and
// stops when f returns false or the groups are older than f.CreatedAfter.
// With tasks set, a group holding no task in f.States is passed over on
// its per-state counts, without looking at its tasks: listing the FAILED
// tasks of a partition costs a step per group, not per task.
func (s *Shard) walk(f *Filter, tasks bool, visit func(g *group) bool) {
	gs := s.index.groups
	end := len(gs)
	if f.After != nil {
		k := ListKey{Created: f.After.Created, Group: f.After.Group, Task: 1 << 30}
		end, _ = slices.BinarySearchFunc(gs, k, func(g *group, k ListKey) int {
			if (ListKey{Created: g.created, Group: g.id}).Less(k) {
				return -1
			}
			return 1
		})
	}
	for i := end - 1; i >= 0; i-- {
		g := gs[i]
		if !f.CreatedAfter.IsZero() && !g.created.After(f.CreatedAfter) {
			return
		}
		if tasks && !f.statesIn(g) {
			continue // a removed group's stub counts nothing
		}
		if s.groups[g.id] != g || !f.groupMatches(g) {
			continue
		}
		if !visit(g) {
			return
		}
	}
}

func (f *Filter) limit() int {
	if f.Limit <= 0 {
		return 50
	}
	return f.Limit
}

// statesIn reports whether g holds a task in one of f.States (true
// without States).
func (f *Filter) statesIn(g *group) bool {
	if len(f.States) == 0 {
		return true
	}
	for _, st := range f.States {
		if int(st) < len(g.counts) && g.counts[st] > 0 {
			return true
		}
	}
	return false
}

// groupMatches checks what a group alone decides.
func (f *Filter) groupMatches(g *group) bool {
	switch {
	case !f.CreatedBefore.IsZero() && !g.created.Before(f.CreatedBefore):
		return false
	case f.Mode != 0 && g.spec.Mode != f.Mode:
		return false
	case f.Schedule != "" && scheduleOf(g.id) != f.Schedule:
		return false
	}
	return true
}

// scheduleOf returns the schedule whose firing created group g, or "".
func scheduleOf(g GroupID) ScheduleID {
	if id, _, ok := ParseFiringGroupID(g); ok {
		return id
	}
	if id, _, _, ok := ParseTriggeredGroupID(g); ok {
		return id
	}
	return ""
}

func finishedIn(at, after, before time.Time) bool {
	if !after.IsZero() && !at.After(after) {
		return false
	}
	return before.IsZero() || (!at.IsZero() && at.Before(before))
}

// taskMatches checks what a task decides (the group matched already).
func (f *Filter) taskMatches(t *task) bool {
	switch {
	case len(f.States) > 0 && !slices.Contains(f.States, t.state):
		return false
	case f.Handler != "" && t.pol.Handler != f.Handler:
		return false
	case f.Peer != "" && HolderPeer(t.holder) != f.Peer:
		return false
	case f.Label != "" && !slices.Contains(t.pol.Require, f.Label):
		return false
	case f.WorkerDeaths > 0 && DeathsOf(t.crash).Total() < f.WorkerDeaths:
		return false
	case !f.FinishedAfter.IsZero() || !f.FinishedBefore.IsZero():
		if !finishedIn(t.finished.time(), f.FinishedAfter, f.FinishedBefore) {
			return false
		}
	}
	return f.Q == "" || t.matchesQ(f.Q)
}

func (t *task) matchesQ(q string) bool {
	return strings.Contains(t.name, q) || strings.Contains(string(t.id()), q) || strings.Contains(t.g.spec.Key, q)
}

// ListTasks returns up to f.Limit tasks matching f, newest first (by
// ListKey descending), each with its key.
func (s *Shard) ListTasks(f *Filter) ([]TaskView, []ListKey) {
	var out []TaskView
	var keys []ListKey
	n := f.limit()
	s.walk(f, true, func(g *group) bool {
		last := len(g.tasks) - 1
		if f.After != nil && f.After.Group == g.id && f.After.Created.Equal(g.created) {
			last = f.After.Task - 1
		}
		for i := min(last, len(g.tasks)-1); i >= 0; i-- {
			t := g.tasks[i]
			if !f.taskMatches(t) {
				continue
			}
			out = append(out, t.view())
			keys = append(keys, ListKey{Created: g.created, Group: g.id, Task: i})
			if len(out) == n {
				return false
			}
		}
		return true
	})
	return out, keys
}

// ListGroups returns up to f.Limit group summaries matching f, newest first.
// A group matches when its own fields do and, for the task-level fields
// (Handler, Peer, Label, Q, WorkerDeaths), one of its tasks does; States is ignored
// (GroupStates applies).
func (s *Shard) ListGroups(f *Filter) ([]GroupView, []ListKey) {
	var out []GroupView
	var keys []ListKey
	n := f.limit()
	tf := *f
	tf.States, tf.FinishedAfter, tf.FinishedBefore = nil, time.Time{}, time.Time{}
	taskLevel := tf.Handler != "" || tf.Peer != "" || tf.Label != "" || tf.Q != "" || tf.WorkerDeaths > 0
	s.walk(f, false, func(g *group) bool {
		if f.After != nil && f.After.Group == g.id && f.After.Created.Equal(g.created) {
			return true // the cursor's own group was on the previous page
		}
		if len(f.GroupStates) > 0 && !slices.Contains(f.GroupStates, g.state) {
			return true
		}
		if (!f.FinishedAfter.IsZero() || !f.FinishedBefore.IsZero()) && !finishedIn(g.finished, f.FinishedAfter, f.FinishedBefore) {
			return true
		}
		if taskLevel && !slices.ContainsFunc(g.tasks, tf.taskMatches) {
			return true
		}
		v, _ := s.groupView(g.id, false)
		out = append(out, v)
		keys = append(keys, ListKey{Created: g.created, Group: g.id})
		return len(out) < n
	})
	return out, keys
}

// HandlerStats counts one handler's tasks by state.
type HandlerStats struct {
	Counts      [8]int    // tasks by State
	OldestReady time.Time // when the longest-waiting READY task became READY (zero: none)
}

// AddHandlerStats adds the partition's tasks to into, per handler. A READY
// task restored from a snapshot counts as READY since its creation (the
// time it became READY is not replicated).
func (s *Shard) AddHandlerStats(into map[string]*HandlerStats) {
	for _, g := range s.index.groups {
		if s.groups[g.id] != g {
			continue
		}
		for _, t := range g.tasks {
			hs := into[t.pol.Handler]
			if hs == nil {
				hs = &HandlerStats{}
				into[t.pol.Handler] = hs
			}
			hs.Counts[t.state]++
			if t.state != Ready {
				continue
			}
			since := t.readyAt.time()
			if since.IsZero() {
				since = t.g.created
			}
			if hs.OldestReady.IsZero() || since.Before(hs.OldestReady) {
				hs.OldestReady = since
			}
		}
	}
}

// AddOldestReady lowers into[h] to the time the longest-waiting queued
// READY task of handler h became READY (its creation, when restored from a
// snapshot, as in AddHandlerStats). It walks the queued READY tasks only,
// not the partition: cheap enough for a gauge refreshed every second.
func (s *Shard) AddOldestReady(into map[string]time.Time) {
	add := func(q *readyQueue) {
		for _, it := range q.items {
			t := it.t
			since := t.readyAt.time()
			if since.IsZero() {
				since = t.g.created
			}
			if cur, ok := into[t.pol.Handler]; !ok || since.Before(cur) {
				into[t.pol.Handler] = since
			}
		}
	}
	add(&s.ready.plain)
	for _, c := range s.ready.classes { // a minimum: the map order does not matter
		add(&c.q)
	}
}
