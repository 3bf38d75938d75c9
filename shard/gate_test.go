package shard

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// inFlightOf counts the tasks of g in flight (READY, RUNNING, WAITING).
func (o *owner) inFlightOf(g GroupID) int {
	o.tb.Helper()
	v, err := o.s.Group(g)
	if err != nil {
		o.tb.Fatal(err)
	}
	return v.Counts[Ready] + v.Counts[Running] + v.Counts[Waiting]
}

func cappedSpec(id GroupID, mode Mode, n, conc int) GroupSpec {
	g := GroupSpec{ID: id, Mode: mode, Concurrency: conc}
	for i := range n {
		g.Tasks = append(g.Tasks, TaskSpec{Name: fmt.Sprint("t", i), Handler: "h", Retry: Retry{MaxAttempts: 2, Backoff: time.Second}})
	}
	return g
}

// A group's concurrency lets in its tasks lowest index first, as many at
// a time as it says, whatever ends the ones in flight: success, failure
// for good, cancellation; a retry waits its turn like the rest.
func TestGroupConcurrency(t *testing.T) {
	o := newOwner(t)
	o.submit(cappedSpec("g", ModeParallel, 8, 3))
	if got := o.inFlightOf("g"); got != 3 || o.s.ReadyLen() != 3 {
		t.Fatalf("in flight %d, READY %d after submission; want 3, 3", got, o.s.ReadyLen())
	}
	for i := 3; i < 8; i++ {
		if st := o.state(TaskIDOf("g", i)); st != Pending {
			t.Fatalf("task %d is %v; want PENDING", i, st)
		}
	}
	ids := o.lease(10, "w")
	if len(ids) != 3 || ids[0] != "g.0" || ids[2] != "g.2" {
		t.Fatalf("leased %v; want g.0..g.2", ids)
	}
	if err := o.report("g.0", "w", true, false); err != nil {
		t.Fatal(err)
	}
	if o.state("g.3") != Ready || o.state("g.4") != Pending {
		t.Fatalf("after a success: g.3 %v, g.4 %v; want READY, PENDING", o.state("g.3"), o.state("g.4"))
	}
	if err := o.report("g.1", "w", false, true); err != nil { // failed for good
		t.Fatal(err)
	}
	if o.state("g.4") != Ready {
		t.Fatalf("after a failure: g.4 %v; want READY", o.state("g.4"))
	}
	if err := o.report("g.2", "w", false, false); err != nil { // retried: WAITING keeps its room
		t.Fatal(err)
	}
	if o.state("g.2") != Waiting || o.state("g.5") != Pending {
		t.Fatalf("after a failed attempt: g.2 %v, g.5 %v; want WAITING, PENDING", o.state("g.2"), o.state("g.5"))
	}
	evs, err := o.s.Cancel(o.now, "g", "g.3", "me")
	if err != nil {
		t.Fatal(err)
	}
	o.commit(evs...)
	if o.state("g.5") != Ready || o.inFlightOf("g") != 3 {
		t.Fatalf("after a cancel: g.5 %v, in flight %d; want READY, 3", o.state("g.5"), o.inFlightOf("g"))
	}
	o.advance(2 * time.Second) // g.2's backoff
	o.runAll(func(id TaskID) bool { return id == "g.6" })
	v, _ := o.s.Group("g")
	if v.State != GroupFailed || v.Concurrency != 3 {
		t.Fatalf("group %v concurrency %d; want FAILED, 3", v.State, v.Concurrency)
	}
	// A retry of the group: its FAILED and CANCELED tasks (g.1, g.3, g.6)
	// go through the gate again.
	if err := o.retry("g", "", ""); err != nil {
		t.Fatal(err)
	}
	if got := o.inFlightOf("g"); got != 3 {
		t.Fatalf("in flight %d after the retry; want 3", got)
	}
	o.runAll(func(TaskID) bool { return false })
	if v, _ := o.s.Group("g"); v.State != GroupSucceeded {
		t.Fatalf("group %v after the retry; want SUCCEEDED", v.State)
	}
}

// In a DAG, a task whose dependencies are done takes room like the others:
// a task with dependencies never jumps the gate.
func TestGroupConcurrencyDAG(t *testing.T) {
	o := newOwner(t)
	spec := cappedSpec("d", ModeDAG, 5, 1)
	spec.Tasks[1].Deps = []string{"t0"}
	o.submit(spec)
	for range 5 {
		ids := o.lease(10, "w")
		if len(ids) != 1 || o.inFlightOf("d") != 1 {
			t.Fatalf("leased %v with %d in flight; want one at a time", ids, o.inFlightOf("d"))
		}
		if err := o.report(ids[0], "w", true, false); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := o.s.Group("d"); v.State != GroupSucceeded {
		t.Fatalf("group %v; want SUCCEEDED", v.State)
	}
}

// Random runs of capped groups never have more tasks in flight than the
// concurrency, and give the same state on a replica that replays the log
// and on one restored from a snapshot taken midway (the held tasks and
// the counts in flight derive from the state).
func TestGroupConcurrencyReplayAndRestore(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			o := newOwner(t)
			mode := []Mode{ModeParallel, ModeDAG, ModePipeline}[r.IntN(3)]
			conc := 1 + r.IntN(4)
			spec := cappedSpec("g", mode, 1+r.IntN(15), conc)
			for i := range spec.Tasks {
				switch {
				case mode == ModeDAG && i > 0 && r.IntN(2) == 0:
					spec.Tasks[i].Deps = []string{fmt.Sprint("t", r.IntN(i))}
				case mode == ModePipeline:
					spec.Tasks[i].Stage = i / 3
				}
				if r.IntN(5) == 0 {
					spec.Tasks[i].Delay = time.Duration(r.IntN(3)) * time.Second
				}
			}
			o.submit(spec)
			var snap []byte
			var snapAt int
			for step := 0; step < 100; step++ {
				if step == 3 {
					snap, snapAt = o.s.Snapshot(), len(o.log)
				}
				for _, id := range o.lease(1+r.IntN(3), "w") {
					_ = o.report(id, "w", r.IntN(4) != 0, r.IntN(3) == 0)
				}
				if r.IntN(10) == 0 {
					if evs, err := o.s.Cancel(o.now, "g", TaskIDOf("g", r.IntN(len(spec.Tasks))), "me"); err == nil {
						o.commit(evs...)
					}
				}
				if r.IntN(15) == 0 {
					_ = o.retry("g", "", "")
				}
				o.advance(time.Duration(r.IntN(1500)) * time.Millisecond)
				if n := o.inFlightOf("g"); n > conc {
					t.Fatalf("step %d: %d in flight; concurrency %d", step, n, conc)
				}
			}
			assertReplayAndRestore(t, o, snap, snapAt)
		})
	}
}

func TestGroupConcurrencyValidate(t *testing.T) {
	for _, c := range []struct {
		spec GroupSpec
		want string
	}{
		{cappedSpec("g", ModeParallel, 2, -1), "concurrency: must be >= 0"},
		{cappedSpec("g", ModeParallel, 2, 1<<31), "concurrency: 2147483648 is over the maximum"},
		{GroupSpec{ID: "g", Mode: ModeSingle, Concurrency: 1, Tasks: []TaskSpec{{Handler: "h"}}}, "concurrency: only for parallel, dag and staged groups, not single"},
		{GroupSpec{ID: "g", Mode: ModeStream, Concurrency: 1, Stages: []StageSpec{{Name: "s"}}, Tasks: []TaskSpec{{Handler: "h"}}}, "concurrency: a streaming pipeline bounds each stage"},
	} {
		err := c.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%v, concurrency %d) = %v; want %q", c.spec.Mode, c.spec.Concurrency, err, c.want)
		}
	}
	if ok := cappedSpec("g", ModeDAG, 2, 2); ok.Validate() != nil {
		t.Error(ok.Validate())
	}
}

// A group's concurrency round-trips through the codec, and a group
// without one encodes as it did before concurrency existed (no byte
// changes); a flag without its value, or a value of 0, is refused.
func TestGroupConcurrencyCodec(t *testing.T) {
	plain := cappedSpec("g", ModeParallel, 2, 0)
	capped := cappedSpec("g", ModeParallel, 2, 7)
	pb, cb := AppendGroupSpec(nil, &plain), AppendGroupSpec(nil, &capped)
	modeAt := 2 // id "g": its length, then its byte
	if pb[modeAt] != byte(ModeParallel) || cb[modeAt] != byte(ModeParallel)|modeExt {
		t.Fatalf("mode bytes %#x, %#x", pb[modeAt], cb[modeAt])
	}
	if string(cb[:modeAt]) != string(pb[:modeAt]) || string(cb[modeAt+1:len(cb)-1]) != string(pb[modeAt+1:]) || cb[len(cb)-1] != 7 {
		t.Fatalf("capped encoding is not the plain one with the flag and the value appended:\n%x\n%x", pb, cb)
	}
	g, n, err := DecodeGroupSpec(cb)
	if err != nil || n != len(cb) || g.Concurrency != 7 {
		t.Fatalf("decoded %d of %d bytes, concurrency %d, %v", n, len(cb), g.Concurrency, err)
	}
	if _, _, err := DecodeGroupSpec(cb[:len(cb)-1]); err == nil {
		t.Error("a flagged concurrency without its value decoded")
	}
	zero := append(cb[:len(cb)-1:len(cb)-1], 0)
	if _, _, err := DecodeGroupSpec(zero); err == nil || !strings.Contains(err.Error(), "concurrency 0") {
		t.Errorf("a flagged concurrency of 0: %v", err)
	}
}
