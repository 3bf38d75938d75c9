package shard

import (
	"strconv"
	"time"
)

// EventType says what changed. Values are part of the on-disk format: append
// only, never renumber.
type EventType uint8

const (
	EvSubmitted         EventType = iota + 1 // Group, Spec, At: the group and its tasks exist
	EvLeased                                 // Task, Round, Holder, Expiry: READY -> RUNNING
	EvRenewed                                // Task, Round, Holder, Expiry: lease extended
	EvSucceeded                              // Task, Round, Holder, Result: RUNNING -> SUCCEEDED
	EvFailed                                 // Task, Round, Holder, Error, Permanent, TimedOut, NotBefore: -> WAITING or FAILED
	EvExpired                                // Task, Round: the lease ended without outcome; -> READY
	EvReadied                                // Task: WAITING -> READY (delay or backoff elapsed)
	EvCanceled                               // Task or Group (Task empty), By: -> CANCELED with dependents
	EvRemoved                                // Group: retention ended; the group is forgotten
	EvScheduleSet                            // Group = schedule id, Sched, Expiry = next tick: the schedule exists
	EvScheduleDeleted                        // Group = schedule id, By
	EvSchedulePaused                         // Group = schedule id, By
	EvScheduleResumed                        // Group = schedule id, By, Expiry = next tick
	EvScheduleFired                          // Group = firing group id, NotBefore = the tick it fences on, Expiry = next tick, By = "" | "skipped" | "missed"
	EvNotified                               // Group, Round = delivery attempt, Error = "" (delivered) or why not, Permanent = gave up, NotBefore = next attempt
	EvScheduleTriggered                      // Group = firing group id, By: a schedule fired by hand; the next tick stays
	EvRetried                                // Task or Group (Task empty), By, Key: FAILED/CANCELED tasks run again in place
	EvScheduleUpdated                        // Group = schedule id, Sched = the new spec, Expiry = next tick, Round = the revision it fences on (0 = none), By
	EvPeerDrained                            // Group = a peer id, By: an operator drained the peer (the audit trail's only)
	EvPeerForgotten                          // Group = a peer id, By: an operator removed the peer from the mesh (the audit trail's only)
	numEventTypes
)

var eventNames = [...]string{"", "submitted", "leased", "renewed", "succeeded", "failed", "expired", "readied", "canceled", "removed",
	"schedule_set", "schedule_deleted", "schedule_paused", "schedule_resumed", "schedule_fired",
	"notified", "schedule_triggered", "retried", "schedule_updated", "peer_drained", "peer_forgotten"}

func (t EventType) String() string {
	if int(t) < len(eventNames) && t != 0 {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

func (t EventType) schedule() bool {
	return t >= EvScheduleSet && t <= EvScheduleFired || t == EvScheduleTriggered || t == EvScheduleUpdated
}

// Schedule reports whether t is a schedule event (not about a group's tasks).
func (t EventType) Schedule() bool { return t.schedule() }

// PeerAction reports whether t records an operator's action on a peer
// (drain, forget): it changes no state but the audit trail.
func (t EventType) PeerAction() bool { return t == EvPeerDrained || t == EvPeerForgotten }

// Valid reports whether t is a known event type.
func (t EventType) Valid() bool { return t > 0 && t < numEventTypes }

// Event is one state change. Events are proposed by the owner, committed
// through the partition's Raft log, and applied on every replica in log
// order. Everything an apply needs (times, jitter) is in the event, so every
// replica computes the same state.
type Event struct {
	Type      EventType
	At        time.Time     // owner's clock when proposed
	Group     GroupID       // always set
	Task      TaskID        // set for task events
	Round     Round         // lease round the event refers to
	Holder    string        // lease holder (peer id + boot nonce), or the peer reporting
	Expiry    time.Time     // lease expiry (leased, renewed)
	NotBefore time.Time     // failed: when the retry becomes READY
	Result    []byte        // succeeded: the handler's result
	Error     string        // failed: the handler's error
	Permanent bool          // failed: do not retry
	TimedOut  bool          // failed: the attempt hit its timeout
	By        string        // canceled/removed: who asked (audit)
	Spec      *GroupSpec    // submitted: the group
	Sched     *ScheduleSpec // schedule_set, schedule_updated: the schedule
	Key       string        // retried: the request's idempotency key, "" = none
	Died      Death         // expired: its external worker died holding the lease
}

// Death says that an expired lease ended with the death of the external
// worker that held it, and whether it was the only lease that worker
// held. The task keeps count (Deaths): a task that workers keep dying
// with is handed to a worker alone, and a lone death is a strike against
// it (peer/workers_quarantine.go).
type Death uint8

const (
	DiedWithOthers Death = 1 // the worker held other leases too
	DiedAlone      Death = 2 // the worker held this lease alone: a strike
)

// Deaths counts the external workers that died running a task since its
// last outcome: holding other leases too (Shared, counted up to 3) and
// holding it alone (Alone, up to 63).
type Deaths struct {
	Shared int `json:"shared"`
	Alone  int `json:"alone"`
}

// Bounds of Deaths: a count saturates.
const (
	maxShared = 3
	maxAlone  = 63
)

// MaxDeaths is the most deaths a task counts (both bounds together),
// MaxSharedDeaths the most it counts beside other tasks.
const (
	MaxDeaths       = maxShared + maxAlone
	MaxSharedDeaths = maxShared
)

// Total is the number of deaths.
func (d Deaths) Total() int { return d.Shared + d.Alone }

// Mark is d in one byte (Shared in the low two bits, Alone above), as
// snapshots and grants carry it; counts are clamped to their bounds.
func (d Deaths) Mark() byte {
	return byte(min(max(d.Shared, 0), maxShared)) | byte(min(max(d.Alone, 0), maxAlone))<<2
}

// DeathsOf reads a Mark.
func DeathsOf(mark byte) Deaths { return Deaths{Shared: int(mark & 3), Alone: int(mark >> 2)} }
