// Package client is the Go client of a needle mesh for programs that do not
// embed a peer: typed calls to the HTTP API of any peer (Client: submit
// tasks and groups, get, wait, cancel, list, retry, logs) and a worker
// (Worker) that serves handlers in this process over the worker protocol
// (docs/api.md, "Workers"): it polls a peer for the tasks of its handlers,
// runs them, and reports each outcome on the lease the poll handed out.
//
// The package links only the API's wire types: no libp2p, Badger or Raft
// (TestDeps).
//
// Guarantees of Worker.Run:
//
//  1. At most Concurrency handlers run at once; a poll never asks for more
//     tasks than there are free slots.
//  2. A task runs at least once: a handler may run again for the same task
//     (its lease was lost: the worker was cut off, stalled past the
//     deadline, or stopped). Task.ID, Task.Attempt and Task.Round tell runs
//     apart, as NEEDLE_TASK_ID and friends do for exec.
//  3. The handler's context ends when the lease's deadline passes, when a
//     heartbeat learns that the task was canceled or the lease lost, and
//     when the worker stops and StopGrace has passed.
//  4. An outcome is reported once per run, retried on 503, 429 and
//     connection errors with a jittered exponential backoff; a 409
//     lease_lost ends the retries (the task is someone else's now).
//     Outcomes go in batches (POST /v1/leases/report, or in the next poll's
//     "done" while a batch is in flight): those that finish while one
//     report is in flight share the next request.
//  5. When ctx ends, Run stops polling, lets running handlers finish for
//     StopGrace, then cancels them and fails their tasks (retryable, so they
//     run again elsewhere), and returns once every report was sent.
package client
