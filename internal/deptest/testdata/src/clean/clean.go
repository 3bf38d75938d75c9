// Package clean keeps every rule: time and randomness are inputs.
package clean

import (
	"math/rand/v2"
	"time"
)

// Due reports whether a deadline has passed at now.
func Due(now, deadline time.Time) bool { return !now.Before(deadline) }

// Pick draws from the caller's generator.
func Pick(r *rand.Rand, n int) int { return r.IntN(n) }
