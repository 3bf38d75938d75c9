package steal

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Prefetch is the factor by which a thief may ask for more tasks than it has
// free slots: it asks for at most Prefetch*free. A grant takes one round trip
// plus the victim's Raft commit of the leases, so with a small queue of
// leased tasks the next slot to free starts work at once instead of idling
// for that round trip, and the thief asks half as often. It is kept small
// because a queued task's lease (timeout + grace) already runs while it
// waits, and because tasks leased to a thief can no longer be stolen by a
// peer that frees up later.
const Prefetch = 2

// Config configures a Thief. Every duration is measured on the thief's own
// clock (the now passed to Next, Granted and Refused).
type Config struct {
	// Rand draws the two candidates of each power-of-two-choices pick.
	// Required. Seed it per peer (e.g. from the peer id) so that thieves do
	// not draw the same sequence, and from the simulation seed in simulate/.
	Rand *rand.Rand
	// MaxBatch is the most tasks asked for in one steal request. Default 64.
	MaxBatch int
	// StaleAfter is how old (now - Load.At) a load may be before it is
	// ignored: a peer not heard of for that long is not a candidate.
	// Default 3 s (three missed 1 s gossip rounds).
	StaleAfter time.Duration
	// BackoffMin is how long a victim is not asked again after a refusal, an
	// empty grant or an unanswered request. Each further refusal in a row
	// doubles it, up to BackoffMax; a non-empty grant resets it.
	// Default 50 ms.
	BackoffMin time.Duration
	// BackoffMax caps the backoff. Default 2 s.
	BackoffMax time.Duration
	// RequestTTL is how long an unanswered request stays outstanding; after
	// it the request is abandoned (counted in Stats.Expired, and the victim
	// backs off) and Next may ask again. Default 1 s.
	RequestTTL time.Duration
	// SampleMin and SampleMax bound the wait between blind asks (Sample):
	// it starts at SampleMin, doubles with every blind ask, up to
	// SampleMax, and starts again at SampleMin after a grant. Defaults
	// 250 ms and 30 s: a blind ask is the fallback for a load
	// announcement lost on the way, and the probes of the failure
	// detector carry every peer's load twice a second besides; at 4 s an
	// idle mesh of 1,000 peers spent 0.5 of its 8.4 messages per peer per
	// second on asks refused, while its peers together still ask 33
	// random members a second at 30 s.
	SampleMin, SampleMax time.Duration
}

// DefaultConfig returns a Config with the defaults above and a fixed seed;
// a peer replaces Rand with one seeded from its id.
func DefaultConfig() Config {
	return Config{
		Rand:       rand.New(rand.NewPCG(1, 2)),
		MaxBatch:   64,
		StaleAfter: 3 * time.Second,
		BackoffMin: 50 * time.Millisecond,
		BackoffMax: 2 * time.Second,
		RequestTTL: time.Second,
		SampleMin:  250 * time.Millisecond,
		SampleMax:  30 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Rand == nil:
		return errors.New("steal: config Rand is required")
	case c.MaxBatch <= 0:
		return errors.New("steal: config MaxBatch must be > 0")
	case c.StaleAfter <= 0:
		return errors.New("steal: config StaleAfter must be > 0")
	case c.BackoffMin <= 0:
		return errors.New("steal: config BackoffMin must be > 0")
	case c.BackoffMax < c.BackoffMin:
		return errors.New("steal: config BackoffMax must be >= BackoffMin")
	case c.RequestTTL <= 0:
		return errors.New("steal: config RequestTTL must be > 0")
	case c.SampleMin <= 0 || c.SampleMax < c.SampleMin:
		return errors.New("steal: config wants SampleMin > 0 and SampleMax >= SampleMin")
	}
	return nil
}
