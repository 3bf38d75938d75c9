package shard

import "testing"

// A refused delivery gives up at once (no retry), with its reason in the
// group and the task's history.
func TestNotifyRefusedGivesUp(t *testing.T) {
	o := newOwner(t)
	o.submit(GroupSpec{ID: "g", Mode: ModeSingle, Notify: "http://hook", Tasks: []TaskSpec{{Handler: "h"}}})
	id := o.lease(1, "w")[0]
	if err := o.report(id, "w", true, false); err != nil {
		t.Fatal(err)
	}
	jobs := o.s.NotifyDue(o.now, 10)
	if len(jobs) != 1 {
		t.Fatalf("due = %+v", jobs)
	}
	o.commit(o.s.NotifyRefused(o.now, jobs[0], "not on this peer's allow-list"))
	v, _ := o.s.Group("g")
	if v.Notify.State != "failed" || v.Notify.Attempts != 1 || v.Notify.LastError == "" || o.s.NotifyPending() != 0 {
		t.Fatalf("notify = %+v pending %d", v.Notify, o.s.NotifyPending())
	}
	hist, _ := o.s.TaskEvents(id)
	if last := hist[len(hist)-1]; last.Type != EvNotified || last.Error == "" {
		t.Fatalf("history ends with %+v", last)
	}
}
