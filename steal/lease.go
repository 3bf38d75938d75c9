package steal

import (
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// Lease is what a grant carries for each stolen task (the peer adds the task
// spec): the right of Holder to run Task in Round until Expiry. It is valid
// only once the owner has committed the matching leased event through the
// partition's Raft log, and an outcome is accepted only while it is the
// task's current lease (shard.Shard.Report fences on Round and Holder).
type Lease struct {
	Task   shard.TaskID // the leased task
	Round  shard.Round  // the lease's round, >= 1; outcomes carry it back
	Holder string       // the peer (id + boot nonce) that runs the task
	Expiry time.Time    // on the owner's clock; the holder renews before it
}

// ErrNotLease is returned by LeaseOf for an event that is not a lease.
var ErrNotLease = errors.New("steal: not a lease event")

// LeaseOf returns the lease a committed leased or renewed event grants.
func LeaseOf(e shard.Event) (Lease, error) {
	if e.Type != shard.EvLeased && e.Type != shard.EvRenewed {
		return Lease{}, fmt.Errorf("%w: %v", ErrNotLease, e.Type)
	}
	l := Lease{Task: e.Task, Round: e.Round, Holder: e.Holder, Expiry: e.Expiry}
	return l, l.Validate()
}

// Validate checks a lease received from the network: a well-formed task id,
// a round, a holder and an expiry.
func (l Lease) Validate() error {
	switch {
	case l.Task.Group() == "":
		return fmt.Errorf("steal: lease: malformed task id %q", l.Task)
	case l.Round == 0:
		return fmt.Errorf("steal: lease %s: round 0", l.Task)
	case l.Holder == "":
		return fmt.Errorf("steal: lease %s round %d: no holder", l.Task, l.Round)
	case l.Expiry.IsZero():
		return fmt.Errorf("steal: lease %s round %d: no expiry", l.Task, l.Round)
	}
	return nil
}

// Expired reports whether the lease has ended at now (on the owner's clock;
// a holder should stop well before, at the task's timeout).
func (l Lease) Expired(now time.Time) bool { return !now.Before(l.Expiry) }

// Outcome returns the outcome to report for this lease, fenced by its round
// and holder; the caller fills in the result or error.
func (l Lease) Outcome(ok bool) shard.Outcome {
	return shard.Outcome{Task: l.Task, Round: l.Round, Holder: l.Holder, OK: ok}
}
