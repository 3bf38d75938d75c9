package node

import (
	"math"
	"time"
)

// instant is a time kept by the mesh as its offset from the mesh's base
// time (mesh.base, the now it was created with): 8 bytes and no pointer
// where a time.Time takes 24 and holds one, and a member keeps several
// (every peer keeps a member for every other). The zero instant is the zero
// time ("never"); an offset at or after the base is kept one nanosecond
// higher, so that the base itself is not the zero instant.
//
// mesh.at rebuilds the time as base.Add(offset), which keeps the base's
// monotonic clock reading: with the monotonic times a daemon passes (its
// base and its nows from time.Now), an instant compares with, and
// subtracts from, another time by the monotonic clock as the time it was
// made from did, unmoved by wall clock steps. Times without a monotonic
// reading (the simulator's) come back as the same instant. Times within
// about 292 years of the base are kept exactly.
type instant int64

// instant returns t as an instant of this mesh (the zero time: zero).
func (m *mesh) instant(t time.Time) instant {
	if t.IsZero() {
		return 0
	}
	if t == m.lastAt {
		// The same time, to its monotonic reading and location: the
		// node's now, converted at every tick and every message heard.
		// A time without a monotonic reading (the simulator's)
		// subtracts slowly.
		return m.lastInstant
	}
	d := t.Sub(m.base)
	if d >= 0 && d < math.MaxInt64 {
		d++
	}
	m.lastAt, m.lastInstant = t, instant(d)
	return instant(d)
}

// at returns the time i was made from (zero: the zero time).
func (m *mesh) at(i instant) time.Time {
	switch {
	case i == 0:
		return time.Time{}
	case i > 0:
		return m.base.Add(time.Duration(i - 1))
	}
	return m.base.Add(time.Duration(i))
}
