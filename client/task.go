package client

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// maxPendingLines bounds the log lines a task keeps until they are sent;
// older ones are dropped (and counted in a line sent with the next batch).
const maxPendingLines = 1000

// HandlerFunc runs one attempt of a task in a Worker. It must return when
// ctx ends (the lease's deadline passed, the task was canceled, or the
// worker stops). The result must be JSON (nil is null). Return
// Permanent(err) for a failure that must not be retried.
type HandlerFunc func(ctx context.Context, t Task) (json.RawMessage, error)

// Task is a task handed to a handler: the task as GET /v1/tasks/{id} shows
// it (RUNNING; ID, Group, Name, Handler, Attempt, Round, ...) with its
// payload and inputs. Attempt counts the attempts that finished before
// this one, so this run is attempt Attempt+1; Round is the lease's round.
type Task struct {
	TaskView
	Payload  json.RawMessage            // the task's payload (JSON)
	Inputs   map[string]json.RawMessage // results of its dependencies by name; nil without
	Lease    string                     // the token its outcome is reported on
	Deadline time.Time                  // when the lease runs out (the attempt's timeout)
	// Shard and Shards are set on the copies of a broadcast task: this
	// copy's index (0-based) and the number of copies; -1 and 0 otherwise.
	Shard, Shards int
	// Trace is the trace of the task's group: a W3C traceparent when the
	// submission carried one (make the handler's spans its children; the
	// handler's ctx passes it on to submissions made with api.Client).
	Trace string
	// MaxAttempts is the attempts its retry policy allows in all: the
	// run with Attempt+1 == MaxAttempts is the last (0 from a peer of an
	// older release). TaskView has its Priority, its Error while it runs
	// again after a failed attempt, and its Stage and Item in a pipeline.
	MaxAttempts int
	logs        *taskLog
}

// Log adds a line to the attempt's task log (GET /v1/tasks/{id}/logs). Lines
// are sent in batches with the heartbeats and before the outcome.
func (t Task) Log(line string) {
	if t.logs != nil {
		t.logs.add(line)
	}
}

// taskLog holds a task's log lines until they are sent.
type taskLog struct {
	mu      sync.Mutex
	lines   []api.WorkerLogLine // each with the time it was added: the peer shows it
	dropped int
}

func (l *taskLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for s := range strings.SplitSeq(strings.TrimRight(line, "\n"), "\n") {
		if len(l.lines) == maxPendingLines {
			l.lines = l.lines[1:]
			l.dropped++
		}
		l.lines = append(l.lines, api.WorkerLogLine{Text: s, At: &now})
	}
}

// pending reports whether lines wait to be sent.
func (l *taskLog) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines) > 0 || l.dropped > 0
}

// take returns the pending lines and forgets them.
func (l *taskLog) take() []api.WorkerLogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	if l.dropped > 0 {
		note := api.WorkerLogLine{Text: "(" + strconv.Itoa(l.dropped) + " lines dropped: the log was not sent fast enough)"}
		if len(out) > 0 {
			note.At = out[0].At
		}
		out = append([]api.WorkerLogLine{note}, out...)
	}
	l.lines, l.dropped = nil, 0
	return out
}

// permanentError marks a failure that is not retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the task fails without further attempts.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
