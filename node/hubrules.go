package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// The rules of a worker hub (the runtime's peer/workers*.go, the
// simulator's simulate/workers*.go): what a peer's demand states, when a
// run queued there for its workers goes back to its owner, the
// quarantine of tasks that crash their workers, a worker restarted as
// another instance, and a release. Both hubs call these, each with its
// own clock (wall, virtual).

// WorkerStandingFor is how long a worker's free slots stay in its peer's
// demand after its last poll started or ended: the owners lease for it
// while it reports and polls again, and its next poll finds the tasks
// queued, instead of waiting for a lease to commit on every poll. A
// worker that stopped polling draws no more leases after it.
const WorkerStandingFor = time.Second

// WorkerUnwantedFor is how long a run waits in a peer's queue while no
// worker of its handler asks for work there (WorkerAsks) before it goes
// back to its owner (QueuedUnwanted).
const WorkerUnwantedFor = 2 * time.Second

// WorkerAsks reports whether a worker asks its peer for work: a poll of
// it waits there, or its last poll started or ended less than
// WorkerStandingFor ago (sincePoll).
func WorkerAsks(polling bool, sincePoll time.Duration) bool {
	return polling || sincePoll < WorkerStandingFor
}

// QueuedUnwanted reports whether run r, queued at a peer's hub for waited,
// goes back to its owner (as a Lost outcome: a new round, no attempt
// spent) because no worker of its handler asks there (wanted false): the
// worker whose free slots drew it stopped polling (it went away, polls
// another peer now, or is busy with what it holds), and a worker
// elsewhere may take it. Not a run pinned to a worker (r.Worker: no
// other may take it), nor a suspect (it waits for a worker to drain for
// it, and a draining worker asks for nothing).
func QueuedUnwanted(r *Run, wanted, suspect bool, waited time.Duration) bool {
	return !wanted && r.Worker == "" && !suspect && waited >= WorkerUnwantedFor
}

// Tasks that crash their workers (the runtime's
// peer/workers_quarantine.go): a task two workers died running is a
// suspect, handed to a worker that holds nothing else; a worker that
// dies holding it alone is a strike against it, and the strike that
// makes the crash limit fails it for good.

// DefaultWorkerCrashLimit is how many workers in a row may die running a
// task alone before it fails for good (--worker-crash-limit).
const DefaultWorkerCrashLimit = 3

// WorkerIsolateAfter is the number of worker deaths that makes a task a
// suspect, handed to a worker alone.
const WorkerIsolateAfter = 2

// WorkerSuspect reports whether run r, queued at a hub whose crash limit
// is crashLimit (0: none, and no isolation), is a suspect: its workers
// kept dying. Not a run pinned to a worker (it may go to no other).
func WorkerSuspect(r *Run, crashLimit int) bool {
	return r.Deaths.Total() >= WorkerIsolateAfter && r.Worker == "" && crashLimit > 0
}

// WorkerDeath is what a worker found dead (silent for the TTL, or
// restarted as another instance) holding held leases means for run r,
// one of them: the death recorded with its task (died: alone if it held
// nothing else, a strike), or, for the strike that makes crashLimit
// (0: no limit), the task failed for good (failed, after strikes).
func WorkerDeath(r *Run, held, crashLimit int) (died shard.Death, failed bool, strikes int) {
	if held > 1 {
		return shard.DiedWithOthers, false, r.Deaths.Alone // any of them may have killed it
	}
	strikes = r.Deaths.Alone + 1
	return shard.DiedAlone, crashLimit > 0 && strikes >= crashLimit, strikes
}

// Fill is what a hub does with a queued run a worker's poll takes
// (handler, labels and pin match): WorkerFill.
type Fill uint8

const (
	FillKeep    Fill = iota // it stays queued
	FillLease               // handed to the worker
	FillAlone               // a suspect, handed to the worker alone: it takes nothing else until it ends
	FillReserve             // a suspect the worker reserves: it takes nothing more, drains, and gets it once it holds nothing
)

// WorkerFill decides what a poll of a worker does with a queued run it
// takes: suspect is the run's (WorkerSuspect); held the leases the worker
// holds at the hub; isolated whether it holds a suspect (it takes
// nothing else meanwhile); draining whether it reserved another queued
// suspect; reserved whether another live worker reserved this one. A
// worker that holds nothing takes a suspect whoever reserved it.
func WorkerFill(suspect bool, held int, isolated, draining, reserved bool) Fill {
	switch {
	case isolated:
		return FillKeep
	case suspect && held == 0:
		return FillAlone
	case suspect && !draining && !reserved:
		return FillReserve
	case suspect, draining:
		return FillKeep
	}
	return FillLease
}

// QueuedExpired reports whether run r, queued at a hub, is past its
// lease's expiry at now (the hub's clock): it goes back to its owner,
// whatever its worker or suspicion.
func QueuedExpired(r *Run, now time.Time) bool {
	return !r.Expiry.IsZero() && now.After(r.Expiry)
}

// Instance is what a worker's poll naming its process's instance means
// to the hub: WorkerInstance.
type Instance uint8

const (
	InstanceSame      Instance = iota // the instance the hub knows, or none named
	InstanceFirst                     // the first the hub learns of the worker: its own
	InstanceRestarted                 // another instance: the process restarted, and its leases are buried at once
	InstanceConflict                  // one it retired: two live processes poll under one id (refused)
)

// WorkerInstance says what a poll of a worker naming instance next means
// to a hub that knows it as instance prev ("": none yet), having retired
// the instances retired before that. A restart buries the leases of the
// process that held them (WorkerDeath), without waiting the TTL: the new
// process holds none of them.
func WorkerInstance(prev, next string, retired []string) Instance {
	switch {
	case next == "" || next == prev:
		return InstanceSame
	case slices.Contains(retired, next):
		return InstanceConflict
	case prev == "":
		return InstanceFirst
	}
	return InstanceRestarted
}

// ReleaseText is what a worker's release of a lease records in its
// task's history: the task is READY again in a new round, no attempt
// spent and no death counted (the worker chose to), and the worker's free
// slots leave its peer's demand until it polls again (or the task would
// be leased straight back to it).
func ReleaseText(worker, reason string) string {
	if reason == "" {
		return fmt.Sprintf("released by worker %s", worker)
	}
	return fmt.Sprintf("released by worker %s: %s", worker, reason)
}
