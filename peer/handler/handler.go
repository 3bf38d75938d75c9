// Package handler holds the task handlers a peer runs in process: the
// handler contract (Call, Func, Permanent), the Registry that maps
// handler names to functions, and the built-ins (echo, sleep, fail, exec,
// http) with their allow-lists (BuiltinConfig, NewBuiltins).
//
// The runtime (package peer) looks a task's handler up in its Registry
// and runs it; a name that is not registered is an external handler,
// served by workers that poll for it. needled builds the Registry from its
// flags; a Go program that embeds a peer registers its own handlers in it.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/needle-mesh/needle/shard"
)

// Call is what a handler receives for one attempt of a task.
type Call struct {
	Task    shard.TaskID
	Round   shard.Round
	Attempt int    // 1-based attempt number
	Payload []byte // the task's payload (JSON)
	// Inputs are the results of the task's dependencies, by dependency
	// name: in a dag the tasks named in its deps, in a pipeline every task
	// of the previous stage (an unnamed one by its task id). nil for a task
	// without dependencies. Handlers must not modify Payload or Inputs.
	Inputs map[string]json.RawMessage
	// Shard and Shards are set on a copy of a broadcast group: this copy's
	// index (0-based) and the number of copies, to split work by; 0 and 0
	// for any other task.
	Shard, Shards int
	// Trace is the W3C traceparent of the attempt's run span ("" when the
	// task has no trace context); ctx carries the same span, for handlers
	// that use OpenTelemetry.
	Trace string
	// Log writes to the attempt's task log (GET /v1/tasks/{id}/logs),
	// one record per line; never nil when a peer runs the handler.
	Log *slog.Logger
	// logw receives raw output lines for the attempt's log (LogWriter).
	logw io.Writer
}

// WithLogWriter returns c with w as its LogWriter: the runtime sets the
// attempt's task log here.
func (c Call) WithLogWriter(w io.Writer) Call {
	c.logw = w
	return c
}

// LogWriter returns a writer into the attempt's task log: each line
// written is one log line (exec sends its stderr there).
func (c Call) LogWriter() io.Writer {
	if c.logw == nil {
		return io.Discard
	}
	return c.logw
}

// Func runs one attempt of a task. It must return when ctx is
// canceled (the attempt timed out, or the task was canceled). The result
// should be JSON (the API returns it as is); a nil result is stored as
// null. Return Permanent(err) for a failure that must not be retried.
type Func func(ctx context.Context, c Call) (result []byte, err error)

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

// ErrRegister is wrapped by Register's error.
var ErrRegister = errors.New("handler: register")

// Registry maps handler names to functions. It is safe for concurrent use:
// handlers may be registered while the peer runs.
type Registry struct {
	mu      sync.RWMutex
	m       map[string]Func
	setPeer func(id string) error // the built-ins' (exec with an ExecDir); nil without
}

// SetPeer tells the built-ins the id of the peer that runs them (the
// peer does, at start): exec's attempts go under ExecDir/<id>, a
// directory of this peer alone, and the attempt directories an earlier
// run of the peer left there are removed. A registry serves one peer.
// Without exec or an ExecDir it does nothing.
func (r *Registry) SetPeer(id string) error {
	if r.setPeer == nil {
		return nil
	}
	return r.setPeer(id)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: make(map[string]Func)} }

// Register adds or replaces a handler. The name must be non-empty.
func (r *Registry) Register(name string, h Func) error {
	if name == "" || h == nil {
		return fmt.Errorf("%w: %q: empty name or nil handler", ErrRegister, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = h
	return nil
}

// Lookup returns the handler registered under name.
func (r *Registry) Lookup(name string) (Func, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.m[name]
	return h, ok
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	_, ok := r.Lookup(name)
	return ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}
