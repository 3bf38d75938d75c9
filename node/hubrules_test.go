package node

import (
	"testing"
	"time"

	"github.com/needle-mesh/needle/shard"
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

// TestWorkerQuarantineRules: the bounds of suspicion, of the crash limit
// and of the isolation a poll applies.
func TestWorkerQuarantineRules(t *testing.T) {
	once, twice := &Run{Deaths: shard.Deaths{Shared: 1}}, &Run{Deaths: shard.Deaths{Shared: 1, Alone: 1}}
	if WorkerSuspect(once, 3) || !WorkerSuspect(twice, 3) || WorkerSuspect(twice, 0) {
		t.Error("WorkerSuspect: want a suspect from WorkerIsolateAfter deaths on, and none without a crash limit")
	}
	if pinned := (Run{Deaths: twice.Deaths, Worker: "w1"}); WorkerSuspect(&pinned, 3) {
		t.Error("WorkerSuspect: a copy pinned to a worker is no suspect")
	}
	for _, c := range []struct {
		alone, held, limit int
		died               shard.Death
		failed             bool
	}{
		{0, 2, 3, shard.DiedWithOthers, false},
		{2, 2, 3, shard.DiedWithOthers, false}, // beside others: no strike, whatever the count
		{0, 1, 3, shard.DiedAlone, false},
		{1, 1, 3, shard.DiedAlone, false},
		{2, 1, 3, shard.DiedAlone, true}, // the third strike
		{5, 1, 0, shard.DiedAlone, false},
	} {
		r := &Run{Deaths: shard.Deaths{Alone: c.alone}}
		died, failed, strikes := WorkerDeath(r, c.held, c.limit)
		if died != c.died || failed != c.failed || c.held == 1 && strikes != c.alone+1 {
			t.Errorf("WorkerDeath(alone %d, held %d, limit %d) = %v, %v, %d; want %v, %v", c.alone, c.held, c.limit, died, failed, strikes, c.died, c.failed)
		}
	}
	for _, c := range []struct {
		suspect                     bool
		held                        int
		isolated, draining, reserve bool
		want                        Fill
	}{
		{false, 1, false, false, false, FillLease},
		{false, 0, true, false, false, FillKeep},    // runs a suspect alone
		{true, 0, true, false, false, FillKeep},     // even another suspect
		{false, 1, false, true, false, FillKeep},    // drains for one
		{true, 0, false, false, true, FillAlone},    // holds nothing: whoever reserved it
		{true, 0, false, true, false, FillAlone},    // drained
		{true, 1, false, false, false, FillReserve}, // holds leases: drains for it
		{true, 1, false, false, true, FillKeep},     // another worker drains for it
		{true, 1, false, true, false, FillKeep},     // drains for another
	} {
		if got := WorkerFill(c.suspect, c.held, c.isolated, c.draining, c.reserve); got != c.want {
			t.Errorf("WorkerFill(suspect %v, held %d, isolated %v, draining %v, reserved %v) = %d; want %d", c.suspect, c.held, c.isolated, c.draining, c.reserve, got, c.want)
		}
	}
}

// TestWorkerInstanceRules: a restart, a conflict, and what is neither.
func TestWorkerInstanceRules(t *testing.T) {
	for _, c := range []struct {
		prev, next string
		retired    []string
		want       Instance
	}{
		{"a", "a", nil, InstanceSame},
		{"a", "", nil, InstanceSame}, // a poll that names none
		{"", "a", nil, InstanceFirst},
		{"a", "b", nil, InstanceRestarted},
		{"b", "a", []string{"a"}, InstanceConflict},
		{"", "a", []string{"a"}, InstanceConflict},
	} {
		if got := WorkerInstance(c.prev, c.next, c.retired); got != c.want {
			t.Errorf("WorkerInstance(%q, %q, %q) = %d; want %d", c.prev, c.next, c.retired, got, c.want)
		}
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Run{Expiry: at}
	if QueuedExpired(r, at) || !QueuedExpired(r, at.Add(1)) || QueuedExpired(&Run{}, at) {
		t.Error("QueuedExpired: want true only after a known expiry")
	}
	if ReleaseText("w1", "") != "released by worker w1" || ReleaseText("w1", "stopping") != "released by worker w1: stopping" {
		t.Error("ReleaseText: the worker, and the reason if given")
	}
}
