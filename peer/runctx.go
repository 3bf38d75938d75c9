package peer

import (
	"context"
	"sync"
	"time"
)

// runContext is a handler's context: its parent's values and
// cancellation (an aborted run), and the attempt's deadline. The timer
// that enforces the deadline, and the watch on the parent, are set up
// only when the handler asks for Done: a handler that returns without
// waiting on its context (echo, most computations) costs no timer, where
// context.WithTimeout made and stopped one per run, about 5% of a peer's
// CPU under W1. Err is checked against the clock, so a handler that only
// polls Err still sees its deadline pass.
//
// Without a deadline it is a run's abort (newRunAbort): the loop aborts
// a run (rd.Abort) or ends it when its outcome comes back (runEnded), and
// the peer's run context, its parent, ends them all at a stop. Unlike
// context.WithCancel it registers with its parent only once something
// waits on Done: registering each run among its parent's children and
// removing it again was 5% of a peer's loop under W1.
type runContext struct {
	context.Context           // the parent
	deadline        time.Time // none when zero

	mu   sync.Mutex
	done chan struct{} // made by the first Done
	err  error         // set once: canceled, expired, or the parent's error
	stop func()        // stops the timer and the watch on the parent
}

// withRunDeadline returns a context for a run ending at deadline and the
// function that ends it (as context.WithDeadline's cancel: call it when
// the run returns).
func withRunDeadline(parent context.Context, deadline time.Time) (*runContext, func()) {
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c := &runContext{Context: parent, deadline: deadline}
	return c, func() { c.end(context.Canceled) }
}

// newRunAbort returns a run's abort: a context without a deadline of its
// own, ended by abort.
func newRunAbort(parent context.Context) *runContext { return &runContext{Context: parent} }

// abort cancels the run (a no-op once it is done).
func (c *runContext) abort() { c.end(context.Canceled) }

func (c *runContext) Deadline() (time.Time, bool) {
	if c.deadline.IsZero() {
		return c.Context.Deadline()
	}
	return c.deadline, true
}

// Done returns a channel closed when the run is canceled, its deadline
// passes or its parent is done.
func (c *runContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.errLocked() != nil {
		close(c.done)
		return c.done
	}
	unwatch := context.AfterFunc(c.Context, func() { c.end(c.Context.Err()) })
	c.stop = func() { unwatch() }
	if !c.deadline.IsZero() {
		t := time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
		c.stop = func() { t.Stop(); unwatch() }
	}
	return c.done
}

// Err returns why the run's context is done, nil while it is not.
func (c *runContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errLocked()
}

// errLocked is Err with c.mu held: the error set, else the parent's or
// the deadline's, which it sets (Err returns the same error from then on).
func (c *runContext) errLocked() error {
	if c.err == nil {
		if err := c.Context.Err(); err != nil {
			c.setLocked(err)
		} else if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			c.setLocked(context.DeadlineExceeded)
		}
	}
	return c.err
}

// end sets err unless an error is set, and releases the timer.
func (c *runContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.setLocked(err)
	}
	if c.stop != nil {
		// Neither stop waits for its function, which may be waiting for
		// c.mu in end: calling them here cannot deadlock.
		c.stop()
		c.stop = nil
	}
}

func (c *runContext) setLocked(err error) {
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}
