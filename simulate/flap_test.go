package simulate

import (
	"testing"
	"time"
)

// A leadership that goes back and forth every 3 s in quiet time counts a
// bounce at each return; the same outside quiet time, or spread wider
// than flapWindow, or moving on to a third peer, does not reach
// maxBounces.
func TestFlapBounces(t *testing.T) {
	run := func(leaders []int, every time.Duration, quiet bool) int {
		tr := leadTrack{cur: -1, prev: -1}
		top := 0
		for i, l := range leaders {
			top = max(top, tr.observe(l, time.Duration(i)*every, quiet))
		}
		return top
	}
	flapping := []int{1, 4, 1, 4, 1, 4, 1}
	if n := run(flapping, 3*time.Second, true); n < maxBounces {
		t.Errorf("leadership back and forth every 3 s: %d bounces in the window; want at least %d", n, maxBounces)
	}
	if n := run(flapping, 3*time.Second, false); n != 0 {
		t.Errorf("the same during faults: %d bounces; want none counted", n)
	}
	if n := run(flapping, flapWindow/2, true); n >= maxBounces {
		t.Errorf("back and forth every %v: %d bounces in the window; want fewer than %d", flapWindow/2, n, maxBounces)
	}
	if n := run([]int{0, 1, 2, 3, 4, 0, 1, 2}, 3*time.Second, true); n != 0 {
		t.Errorf("leadership moving on each time: %d bounces; want none", n)
	}
	if n := run([]int{1, -1, 1, 4, -1, 4, 1}, 3*time.Second, true); n != 1 {
		t.Errorf("1, none, 1, 4, none, 4, 1: %d bounces; want 1 (a partition without a leader for a moment is no hand-over)", n)
	}
}
