package node

import (
	"testing"
	"time"
)

// TestQueuedUnwanted: a queued run goes back only when no worker asks,
// it waited WorkerUnwantedFor, and it is neither pinned nor a suspect;
// a worker asks while it polls and WorkerStandingFor after.
func TestQueuedUnwanted(t *testing.T) {
	free, pinned := &Run{}, &Run{Worker: "w1"}
	for _, c := range []struct {
		r               *Run
		wanted, suspect bool
		waited          time.Duration
		want            bool
	}{
		{free, false, false, WorkerUnwantedFor, true},
		{free, false, false, WorkerUnwantedFor - 1, false},
		{free, true, false, time.Hour, false},
		{free, false, true, time.Hour, false},
		{pinned, false, false, time.Hour, false},
	} {
		if got := QueuedUnwanted(c.r, c.wanted, c.suspect, c.waited); got != c.want {
			t.Errorf("QueuedUnwanted(worker %q, wanted %v, suspect %v, waited %v) = %v; want %v", c.r.Worker, c.wanted, c.suspect, c.waited, got, c.want)
		}
	}
	if !WorkerAsks(true, time.Hour) || !WorkerAsks(false, WorkerStandingFor-1) || WorkerAsks(false, WorkerStandingFor) {
		t.Error("WorkerAsks: want true while polling or within WorkerStandingFor of its last poll, false after")
	}
}
