package shard

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// randomShard submits groups at random times (sometimes going back, as a
// new leader's clock may) and drives some tasks to an outcome.
func randomShard(tb testing.TB, seed uint64, groups int) *owner {
	o := newOwner(tb)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range groups {
		o.now = o.now.Add(time.Duration(r.IntN(3)-1) * time.Second)
		n := 1 + r.IntN(3)
		spec := GroupSpec{ID: GroupID(fmt.Sprintf("g%03d", i)), Mode: ModeParallel, Key: fmt.Sprintf("k%d", i%7)}
		if n == 1 {
			spec.Mode = ModeSingle
		}
		for j := range n {
			spec.Tasks = append(spec.Tasks, TaskSpec{Name: fmt.Sprintf("t%d", j), Handler: []string{"echo", "sleep"}[r.IntN(2)]})
		}
		o.submit(spec)
	}
	for _, id := range o.lease(groups, "p1#1") {
		if r.IntN(3) > 0 {
			if err := o.report(id, "p1#1", r.IntN(2) == 0, true); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return o
}

// naiveList is the reference: every task, filtered, sorted newest first.
func naiveList(s *Shard, f Filter) []TaskID {
	type kt struct {
		k  ListKey
		id TaskID
	}
	var all []kt
	for _, g := range s.groups {
		if !f.groupMatches(g) || (!f.CreatedAfter.IsZero() && !g.created.After(f.CreatedAfter)) {
			continue
		}
		for i, t := range g.tasks {
			if f.taskMatches(t) {
				all = append(all, kt{ListKey{g.created, g.id, i}, t.id()})
			}
		}
	}
	slices.SortFunc(all, func(a, b kt) int {
		if b.k.Less(a.k) {
			return -1
		}
		return 1
	})
	ids := make([]TaskID, len(all))
	for i, x := range all {
		ids[i] = x.id
	}
	return ids
}

// pageAll lists with f page by page, each page resuming after the last key.
func pageAll(s *Shard, f Filter, limit int) []TaskID {
	var ids []TaskID
	f.Limit = limit
	for {
		vs, keys := s.ListTasks(&f)
		for _, v := range vs {
			ids = append(ids, v.ID)
		}
		if len(vs) < limit {
			return ids
		}
		f.After = &keys[len(keys)-1]
	}
}

func TestListTasksPagesMatchReference(t *testing.T) {
	filters := map[string]Filter{
		"all":       {},
		"failed":    {States: []State{Failed}},
		"done":      {States: []State{Succeeded, Canceled, Failed}},
		"handler":   {Handler: "sleep"},
		"q":         {Q: "k3"},
		"peer":      {Peer: "p1"},
		"created":   {CreatedAfter: t0.Add(-5 * time.Second), CreatedBefore: t0.Add(5 * time.Second)},
		"finished":  {FinishedAfter: t0.Add(-time.Hour)},
		"mode":      {Mode: ModeSingle},
		"no-match":  {Handler: "nope"},
		"name-only": {Q: "t2"},
	}
	for seed := range uint64(20) {
		o := randomShard(t, seed, 60)
		for name, f := range filters {
			want := naiveList(o.s, f)
			for _, limit := range []int{1, 7, 1000} {
				if got := pageAll(o.s, f, limit); !slices.Equal(got, want) {
					t.Fatalf("seed %d %s limit %d: paged %v; want %v", seed, name, limit, got, want)
				}
			}
		}
	}
}

func TestListIndexSurvivesRestoreAndRemoval(t *testing.T) {
	o := randomShard(t, 3, 80)
	o.s.cfg.Retention = time.Minute
	o.now = o.now.Add(time.Hour)
	o.commit(o.s.Due(o.now)...) // retention removes the finished groups
	if o.s.Len() == 80 {
		t.Fatal("no group was removed; the test needs removals")
	}
	want := naiveList(o.s, Filter{})
	if got := pageAll(o.s, Filter{}, 5); !slices.Equal(got, want) {
		t.Fatalf("after removals: %v; want %v", got, want)
	}
	r, _ := New(o.s.cfg)
	if err := r.Restore(o.s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got := pageAll(r, Filter{}, 5); !slices.Equal(got, want) {
		t.Fatalf("restored: %v; want %v", got, want)
	}
}

func TestListCursorStableWhileWorkArrives(t *testing.T) {
	o := randomShard(t, 9, 30)
	f := Filter{Limit: 10}
	first, keys := o.s.ListTasks(&f)
	existing := naiveList(o.s, Filter{})
	o.now = o.now.Add(time.Minute)
	o.submit(GroupSpec{ID: "new", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}})
	f.After = &keys[len(keys)-1]
	rest := pageAll(o.s, f, 10)
	var got []TaskID
	for _, v := range first {
		got = append(got, v.ID)
	}
	if got = append(got, rest...); !slices.Equal(got, existing) {
		t.Fatalf("pages %v; want %v", got, existing)
	}
}

func TestListGroups(t *testing.T) {
	o := randomShard(t, 5, 40)
	var all []GroupID
	f := Filter{Limit: 3}
	for {
		vs, keys := o.s.ListGroups(&f)
		for _, v := range vs {
			all = append(all, v.ID)
		}
		if len(vs) < 3 {
			break
		}
		f.After = &keys[len(keys)-1]
	}
	if len(all) != 40 || slices.Contains(all[1:], all[0]) {
		t.Fatalf("listed %d groups %v; want 40, each once", len(all), all)
	}
	failed, _ := o.s.ListGroups(&Filter{GroupStates: []GroupState{GroupFailed}, Limit: 1000})
	for _, v := range failed {
		if v.State != GroupFailed {
			t.Errorf("group %s is %v in a FAILED list", v.ID, v.State)
		}
	}
	sleepers, _ := o.s.ListGroups(&Filter{Handler: "sleep", Limit: 1000})
	for _, v := range sleepers {
		g, _ := o.s.Group(v.ID)
		if !slices.ContainsFunc(g.Tasks, func(t TaskView) bool { return t.Handler == "sleep" }) {
			t.Errorf("group %s has no sleep task", v.ID)
		}
	}
}

// TestIndexMemoryPerTask measures what the list index adds to the heap per
// retained task: the shard's heap with the index minus without it, over
// 200,000 single-task groups (the worst case: one index slot per task).
func TestIndexMemoryPerTask(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 200,000 groups")
	}
	const n = 200_000
	o := newOwner(t)
	for i := range n {
		o.commit(Event{Type: EvSubmitted, At: o.now, Group: GroupID(fmt.Sprintf("g%07d", i)),
			Spec: &GroupSpec{ID: GroupID(fmt.Sprintf("g%07d", i)), Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "echo"}}}})
	}
	grown := o.s.IndexBytes() // as built by appends (slack included)
	o.s.index = index{}
	without := heapInUse()
	o.s.indexRebuild()
	with := heapInUse()
	runtime.KeepAlive(o)
	perTask := float64(with-without) / n
	t.Logf("list index: %.1f B/task measured (heap %d -> %d over %d tasks); grown by appends: %.1f B/task",
		perTask, without, with, n, float64(grown)/n)
	if perTask > 200 || float64(grown)/n > 200 {
		t.Errorf("index costs %.1f B/task (%.1f grown); want <= 200", perTask, float64(grown)/n)
	}
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestListWorkerDeaths: the worker_deaths filter finds the tasks that at
// least N workers died running since their last outcome, alone or beside
// other tasks, and their groups; an outcome clears them from it.
func TestListWorkerDeaths(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "a", Mode: ModeParallel, Tasks: []TaskSpec{{Handler: "h"}, {Handler: "h"}}})
	o.submit(GroupSpec{ID: "b", Mode: ModeSingle, Tasks: []TaskSpec{{Handler: "h"}}})
	// a.0 and a.1 go to one worker, which dies; then a.1 alone, which dies.
	if got := o.lease(2, "w"); len(got) != 2 {
		t.Fatalf("leased %v", got)
	}
	o.died("a.0", "w", DiedWithOthers)
	o.died("a.1", "w", DiedWithOthers)
	if got := o.lease(3, "w"); len(got) != 3 {
		t.Fatalf("leased %v", got)
	}
	o.died("a.1", "w", DiedAlone)
	tasks := func(n int) []TaskID {
		vs, _ := o.s.ListTasks(&Filter{WorkerDeaths: n, Limit: 100})
		var ids []TaskID
		for _, v := range vs {
			ids = append(ids, v.ID)
		}
		slices.Sort(ids)
		return ids
	}
	groups := func(n int) []GroupID {
		vs, _ := o.s.ListGroups(&Filter{WorkerDeaths: n, Limit: 100})
		var ids []GroupID
		for _, v := range vs {
			ids = append(ids, v.ID)
		}
		return ids
	}
	if got := tasks(1); !slices.Equal(got, []TaskID{"a.0", "a.1"}) {
		t.Errorf("worker_deaths=1 lists %v; want [a.0 a.1]", got)
	}
	if got := tasks(2); !slices.Equal(got, []TaskID{"a.1"}) {
		t.Errorf("worker_deaths=2 lists %v; want [a.1]", got)
	}
	if got := tasks(3); len(got) != 0 {
		t.Errorf("worker_deaths=3 lists %v; want none", got)
	}
	if got := tasks(0); len(got) != 3 {
		t.Errorf("no filter lists %v; want all 3 tasks", got)
	}
	if got := groups(2); !slices.Equal(got, []GroupID{"a"}) {
		t.Errorf("groups with worker_deaths=2: %v; want [a]", got)
	}
	if got := o.lease(1, "w"); !slices.Equal(got, []TaskID{"a.1"}) {
		t.Fatalf("leased %v; want [a.1]", got)
	}
	if err := o.report("a.1", "w", true, false); err != nil {
		t.Fatal(err)
	}
	if got := tasks(1); !slices.Equal(got, []TaskID{"a.0"}) {
		t.Errorf("after a.1's outcome, worker_deaths=1 lists %v; want [a.0]", got)
	}
}
