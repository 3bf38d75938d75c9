package peer

import (
	"sync"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// failLogBurst is how many handler failures are logged per failLogWindow;
// the rest are counted and the count is reported with the next line logged.
const (
	failLogBurst  = 10
	failLogWindow = 10 * time.Second
)

// failLog logs handler failures at warn, at most failLogBurst per window,
// so a handler failing on every task cannot flood the log.
type failLog struct {
	mu      sync.Mutex
	start   time.Time
	logged  int
	dropped int
}

// allow reports whether a failure at now may be logged, and how many were
// suppressed since the last one logged.
func (f *failLog) allow(now time.Time) (bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.start) >= failLogWindow {
		f.start, f.logged = now, 0
	}
	if f.logged >= failLogBurst {
		f.dropped++
		return false, 0
	}
	f.logged++
	d := f.dropped
	f.dropped = 0
	return true, d
}

// logOutcome logs a failed attempt of r (not one the peer aborted itself:
// a cancel, a lost lease or a stop) with the task's and group's ids.
func (p *Peer) logOutcome(r node.Run, o shard.Outcome, aborted bool) {
	if o.OK || aborted {
		return
	}
	ok, dropped := p.failures.allow(time.Now())
	if !ok {
		return
	}
	attrs := []any{keyTask, r.Task, keyGroup, r.Task.Group(), "handler", r.Handler, "attempt", r.Attempt + 1,
		keyRound, r.Round, "permanent", o.Permanent, "timed_out", o.TimedOut, keyErr, o.Error}
	if dropped > 0 {
		attrs = append(attrs, "suppressed", dropped)
	}
	p.log.Warn("handler failed", attrs...)
}
