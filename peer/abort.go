package peer

import (
	"context"
	"sync"
)

// runAbort is a run's cancellation: the loop aborts a run (rd.Abort) or
// ends it when its outcome comes back (runEnded), and the peer's run
// context (its parent) ends them all at a stop. Unlike
// context.WithCancel it registers with its parent only once something
// waits on Done: most runs never do (echo, most computations), and
// registering each run among its parent's children and removing it again
// was 5% of a peer's loop under W1.
type runAbort struct {
	context.Context // the parent

	mu      sync.Mutex
	done    chan struct{} // made by the first Done
	err     error         // set once: canceled, or the parent's error
	unwatch func() bool   // stops the watch on the parent (set with done)
}

func newRunAbort(parent context.Context) *runAbort { return &runAbort{Context: parent} }

// Done returns a channel closed once the run is aborted or its parent is
// done.
func (a *runAbort) Done() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		return a.done
	}
	a.done = make(chan struct{})
	if a.errLocked() != nil {
		close(a.done)
		return a.done
	}
	a.unwatch = context.AfterFunc(a.Context, func() { a.end(a.Context.Err()) })
	return a.done
}

// Err returns context.Canceled once the run is aborted, the parent's
// error once it is done, nil before.
func (a *runAbort) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.errLocked()
}

func (a *runAbort) errLocked() error {
	if a.err == nil {
		if err := a.Context.Err(); err != nil {
			a.setLocked(err)
		}
	}
	return a.err
}

// abort cancels the run (a no-op once it is done).
func (a *runAbort) abort() { a.end(context.Canceled) }

func (a *runAbort) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.setLocked(err)
	}
	if a.unwatch != nil {
		// It does not wait for its function, which may be waiting for
		// a.mu in end: calling it here cannot deadlock.
		a.unwatch()
		a.unwatch = nil
	}
}

func (a *runAbort) setLocked(err error) {
	a.err = err
	if a.done != nil {
		close(a.done)
	}
}
