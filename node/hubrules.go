package node

import "time"

// The rules of a worker hub (the runtime's peer/workers.go, the
// simulator's simulate/workers.go) that decide what a peer's demand
// states and when a run queued there for its workers goes back to its
// owner. Both hubs call these, each with its own clock (wall, virtual).

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
