package shard

import (
	"strconv"
	"strings"
	"time"
)

// TaskID names one task. It is "<group id>.<index>" so that any peer can
// route it to its group's partition without a directory lookup.
type TaskID string

// GroupID names one group. A group is the unit of ownership: all its tasks
// live in the same partition.
type GroupID string

// Round fences leases: every lease of a task gets the next round, and an
// outcome is accepted only for the task's current round.
type Round uint64

// TaskIDOf returns the id of the i-th task of group g.
func TaskIDOf(g GroupID, i int) TaskID {
	var buf [64]byte // one allocation, the id's, for most group ids
	b := append(buf[:0], g...)
	b = append(b, '.')
	return TaskID(strconv.AppendInt(b, int64(i), 10))
}

// Split returns the group and index of a task id; ok is false when id is not
// a well-formed task id.
func (id TaskID) Split() (g GroupID, i int, ok bool) {
	s := string(id)
	dot := strings.LastIndexByte(s, '.')
	if dot <= 0 || dot == len(s)-1 {
		return "", 0, false
	}
	n, ok := atoi(s[dot+1:])
	if !ok || n < 0 {
		return "", 0, false
	}
	return GroupID(s[:dot]), n, true
}

// atoi is strconv.Atoi's value for s, ok when it has one. An index of
// decimal digits (every id the shard makes) is read here: Atoi's checks
// for signs, bases and overflow made it most of Split, which a replica
// runs for every event it applies (1.5% of a simulated run's CPU).
func atoi(s string) (int, bool) {
	if len(s) > 18 {
		n, err := strconv.Atoi(s)
		return n, err == nil
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			n, err := strconv.Atoi(s) // a sign, or not a number
			return n, err == nil
		}
		n = n*10 + int(c)
	}
	return n, true
}

// Group returns the group of a task id, or "" when malformed.
func (id TaskID) Group() GroupID {
	g, _, _ := id.Split()
	return g
}

// State is the state of a task.
//
//	PENDING --deps done--> READY --leased--> RUNNING --ok--> SUCCEEDED
//	   |                     ^                  |  \--fail, no retry--> FAILED
//	   |                     |                  v
//	   |                     +---backoff--- WAITING (retry backoff or delay)
//	   +---- any non-terminal state --cancel--> CANCELED
type State uint8

const (
	StateUnknown State = iota
	Pending
	Ready
	Running
	Waiting
	Succeeded
	Failed
	Canceled
	numStates
)

var stateNames = [...]string{"UNKNOWN", "PENDING", "READY", "RUNNING", "WAITING", "SUCCEEDED", "FAILED", "CANCELED"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether s never changes again.
func (s State) Terminal() bool { return s == Succeeded || s == Failed || s == Canceled }

// ParseState parses a state name as printed by String.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if i > 0 && n == name {
			return State(i), true
		}
	}
	return StateUnknown, false
}

// States lists every valid state in order.
func States() []State {
	out := make([]State, 0, numStates-1)
	for s := Pending; s < numStates; s++ {
		out = append(out, s)
	}
	return out
}

// Mode is how the tasks of a group relate.
type Mode uint8

const (
	ModeSingle    Mode = iota + 1 // one task
	ModeDAG                       // deps by name
	ModeParallel                  // all at once; the group is a barrier
	ModePipeline                  // barrier stages ("staged"): stage s+1 starts when all of stage s succeeded
	ModeStream                    // streaming pipeline: item i enters stage s when it left stage s-1
	ModeBroadcast                 // one copy of a task per matching live peer, each pinned to it
)

// Mode names. ModePipeline (barrier stages of task lists) is "staged": the
// API's "pipeline" is the streaming one (ModeStream), and the edge still
// reads the barrier shape (stages of task lists) sent as "pipeline".
var modeNames = [...]string{"", "single", "dag", "parallel", "staged", "pipeline", "broadcast"}

// Known reports whether m is one of the modes above.
func (m Mode) Known() bool { return m >= ModeSingle && m <= ModeBroadcast }

func (m Mode) String() string {
	if int(m) < len(modeNames) && m != 0 {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a mode name.
func ParseMode(name string) (Mode, bool) {
	for i, n := range modeNames {
		if i > 0 && n == name {
			return Mode(i), true
		}
	}
	return 0, false
}

// Retry is a task's retry policy. Attempt n (1-based) that fails is retried
// after a delay drawn uniformly from [d/2, d] where d = min(Backoff*2^(n-1),
// MaxBackoff), never below Backoff... see Backoff() for the exact rule.
type Retry struct {
	MaxAttempts int           // attempts in all, >= 1; 0 means 1
	Backoff     time.Duration // delay before the first retry
	MaxBackoff  time.Duration // cap of the exponential delay
}

// TaskSpec is one task as submitted.
type TaskSpec struct {
	Name     string        // unique within the group; "" for a single task
	Handler  string        // registered handler name
	Payload  []byte        // opaque (JSON at the API)
	Priority int32         // higher runs first
	Timeout  time.Duration // per attempt; 0 = the peer's default
	Retry    Retry         // retry policy
	Delay    time.Duration // not before submission time + Delay
	Deps     []string      // names of tasks of the same group (dag)
	Stage    int           // pipeline stage, 0-based
	Item     int           // stream pipeline: the item, 0-based
	Require  []string      // "key=value" labels a peer must carry to run it, sorted
	Pin      string        // the only peer id that may run it; "" = any
}

// Constrained reports whether only some peers may run the task.
func (t *TaskSpec) Constrained() bool { return t.Pin != "" || len(t.Require) > 0 }

// Matches reports whether a peer with this id and labels may run the task.
func (t *TaskSpec) Matches(peer string, labels map[string]string) bool {
	if t.Pin != "" && t.Pin != peer {
		return false
	}
	for _, kv := range t.Require {
		k, v, _ := strings.Cut(kv, "=")
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// StageSpec is one stage of a streaming pipeline (ModeStream).
type StageSpec struct {
	Name        string
	Concurrency int // items in flight in this stage at once; 0 = unbounded
}

// GroupSpec is a group as submitted. ID is assigned at the edge (random, or
// derived from Key) before it reaches the core.
type GroupSpec struct {
	ID    GroupID
	Mode  Mode
	Key   string // idempotency key, optional
	Trace string // trace id, optional
	Tasks []TaskSpec
	// Stages names the stages of a streaming pipeline and bounds their
	// in-flight items (ModeStream only). Its tasks are item-major: task
	// i*len(Stages)+s is item i in stage s.
	Stages []StageSpec
	// Notify is a webhook URL called when the group reaches a terminal
	// state (the edge checks it against the allow-list); "" = none.
	Notify string
	// Concurrency bounds the group's tasks in flight (READY, RUNNING or
	// WAITING) at once, for parallel, dag and pipeline groups; the others
	// wait PENDING and are let in, lowest index first, as tasks finish.
	// 0 = unbounded. A streaming pipeline bounds each stage instead
	// (StageSpec.Concurrency).
	Concurrency int
}

// HolderPeer returns the peer id of a lease holder name "<peer id>#<boot
// nonce>" (the nonce tells one run of a peer from the next).
func HolderPeer(holder string) string {
	if i := strings.IndexByte(holder, '#'); i >= 0 {
		return holder[:i]
	}
	return holder
}
