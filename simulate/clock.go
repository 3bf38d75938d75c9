package simulate

import "time"

// epoch is virtual time zero as the nodes' clocks show it (before skew).
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is one node's clock: a piecewise-linear function of virtual time.
// Since (baseVT, baseClk) it runs at rate 1 + ppm/1e6. Skew faults change
// the rate (Linear, Periodic) or jump it forward (Step). Within a run of
// the node it never goes backwards, as a monotonic clock; a restart may
// start it anywhere (offset). Integer arithmetic keeps it deterministic.
type clock struct {
	baseVT  time.Duration // virtual time of the last change
	baseClk time.Duration // clock reading (since epoch) at baseVT
	ppm     int64         // drift in parts per million; > -1e6
}

// read returns the clock's reading at virtual time vt (>= baseVT).
func (c *clock) read(vt time.Duration) time.Duration {
	d := vt - c.baseVT
	return c.baseClk + d + time.Duration(int64(d)/1000*c.ppm/1000)
}

// now returns the node's time.Time at virtual time vt.
func (c *clock) now(vt time.Duration) time.Time { return epoch.Add(c.read(vt)) }

// setRate changes the drift from vt on.
func (c *clock) setRate(vt time.Duration, ppm int64) {
	c.baseClk, c.baseVT, c.ppm = c.read(vt), vt, ppm
}

// jump moves the clock by d at vt (forward only while the node runs).
func (c *clock) jump(vt, d time.Duration) {
	c.baseClk, c.baseVT = c.read(vt)+d, vt
}

// virtual returns the virtual time it takes this clock to advance d at the
// current rate (at least 1 ns).
func (c *clock) virtual(d time.Duration) time.Duration {
	v := time.Duration(int64(d) * 1_000_000 / (1_000_000 + c.ppm)) // d < 2.5 h
	return max(v, 1)
}
