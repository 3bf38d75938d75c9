package simulate

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// A duplicated submit request is answered twice: Created by the copy that
// created the group, not Created by the other. With reordering the second
// answer can arrive first; the checker used to take the first arrival as
// the acknowledgement and call the creating reply, arriving later, a
// second creation (21 of 200 seeds, e.g. seed 27 at 0.818 s).
func TestCheckerCreatedReplyArrivingLate(t *testing.T) {
	spec := &shard.GroupSpec{ID: "g1", Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Handler: "echo"}}}
	type arrival struct {
		at, sent        time.Duration
		created, repeat bool
	}
	ms := time.Millisecond
	for _, tt := range []struct {
		name     string
		arrivals []arrival
		ok       bool
	}{
		{"created reply arrives late", []arrival{{at: 15 * ms, sent: 12 * ms}, {at: 18 * ms, sent: 1 * ms, created: true}}, true},
		{"created twice", []arrival{{at: 2 * ms, sent: 1 * ms, created: true}, {at: 4 * ms, sent: 3 * ms, created: true}}, false},
		{"created after the acknowledgement", []arrival{{at: 2 * ms, sent: 1 * ms}, {at: 51 * ms, sent: 50 * ms, created: true}}, false},
		{"repeat creates", []arrival{{at: 2 * ms, sent: 1 * ms, created: true}, {at: 90 * ms, sent: 89 * ms, created: true, repeat: true}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{}
			s.chk = newChecker(s)
			s.chk.register(spec)
			for _, a := range tt.arrivals {
				s.now = a.at
				o := &op{kind: opSubmit, spec: spec, group: spec.ID, repeat: a.repeat}
				s.chk.submitted(o, &response{req: &request{op: o, try: 1}, sent: a.sent, reply: node.Reply{Req: 1,
					Submit: node.SubmitResult{Group: "g1", Tasks: []shard.TaskID{shard.TaskIDOf("g1", 0)}, Created: a.created}}})
			}
			if got := s.viol == nil; got != tt.ok {
				t.Fatalf("violation %v; want ok=%v", s.viol, tt.ok)
			}
		})
	}
}

// TestScheduleCheckerCatches feeds the schedule checker firings that break
// "each tick at most once": a tick twice in one view, a tick that changes,
// and a tick a later view forgot.
func TestScheduleCheckerCatches(t *testing.T) {
	at := func(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
	fire := func(id shard.ScheduleID, sec int64) shard.Firing {
		return shard.Firing{At: at(sec), Group: shard.FiringGroupID(id, at(sec))}
	}
	for _, tt := range []struct {
		name  string
		views [][]int64 // negative: an overlap skip
	}{
		{"twice", [][]int64{{10, 11, 11}}},
		{"changed", [][]int64{{10, 11}, {11, -12}, {-11, 12}}},
		{"forgotten", [][]int64{{10, 11, 12}, {10, 12}}},
	} {
		s := &sim{}
		c := newChecker(s)
		spec := &shard.ScheduleSpec{ID: "s000000000000000000000001", Every: time.Second,
			Group: shard.GroupSpec{Mode: shard.ModeSingle, Tasks: []shard.TaskSpec{{Handler: "sleep"}}}}
		r := c.schedule(&schedPlan{spec: spec})
		for _, v := range tt.views {
			var fs []shard.Firing
			for _, sec := range v {
				if sec < 0 {
					fs = append(fs, shard.Firing{At: at(-sec), Skipped: true})
				} else {
					fs = append(fs, fire(spec.ID, sec))
				}
			}
			c.checkFirings(&simNode{}, r, fs)
		}
		if s.viol == nil || s.viol.Invariant != invSched {
			t.Errorf("%s: violation %v; want %s", tt.name, s.viol, invSched)
		}
	}
}

// A retry makes a FAILED or CANCELED task unfinished again (invariant 2
// holds between retries), never a SUCCEEDED one; a replica behind reports
// the runs before a retry as they were observed, or it breaks invariant 2.
func TestCheckerRetries(t *testing.T) {
	spec := &shard.GroupSpec{ID: "g1", Mode: shard.ModeParallel, Tasks: []shard.TaskSpec{{Handler: "echo"}}}
	id := shard.TaskIDOf("g1", 0)
	retried := shard.Change{Task: id, Group: "g1", State: shard.Ready, Retried: true, Retries: 1}
	for _, tt := range []struct {
		name     string
		observed shard.State // before the retry
		late     shard.State // a late report of the runs before it (0: none)
		ok       bool
	}{
		{"failed, retried", shard.Failed, 0, true},
		{"canceled, retried, reported late", shard.Canceled, shard.Canceled, true},
		{"never observed, retried, reported late", 0, shard.Failed, true},
		{"succeeded, retried", shard.Succeeded, 0, false},
		{"failed, retried, reported late as canceled", shard.Failed, shard.Canceled, false},
		{"failed, retried, reported late as succeeded", 0, shard.Succeeded, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{}
			s.chk = newChecker(s)
			c := s.chk
			c.register(spec)
			task := c.task(id)
			if tt.observed != 0 {
				task.state = tt.observed
				c.outstanding--
				task.g.left--
			}
			c.changes(&simNode{}, []shard.Change{retried})
			if s.viol == nil && (c.outstanding != 1 || task.g.left != 1 || task.state != 0 || task.retries != 1) {
				t.Fatalf("after the retry: outstanding %d left %d state %v retries %d", c.outstanding, task.g.left, task.state, task.retries)
			}
			if tt.late != 0 && s.viol == nil {
				c.changes(&simNode{}, []shard.Change{{Task: id, Group: "g1", State: tt.late}})
			}
			if got := s.viol == nil; got != tt.ok {
				t.Fatalf("violation %v; want ok=%v", s.viol, tt.ok)
			}
		})
	}
}
