package main

import "testing"

func TestSimGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, simGCPercent}, {64 << 20, simGCPercent}, {192 << 20, simGCPercent}, {256 << 20, simGCPercent}, {384 << 20, 200}, {512 << 20, 150}, {640 << 20, 120}, {768 << 20, 100}, {1 << 30, 75}, {2 << 30, 37}, {3 << 30, simGCFloor}, {8 << 30, simGCFloor}} {
		if got := simGCPercentFor(c.live); got != c.want {
			t.Errorf("simGCPercentFor(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

func TestSimMemLimitFor(t *testing.T) {
	if got := simMemLimitFor(256 << 20); got != 0 {
		t.Errorf("simMemLimitFor(256 MiB) = %d, want none", got)
	}
	for _, live := range []uint64{640 << 20, 3 << 30, 8 << 30} {
		// The heap's goal (GOGC) is below the limit, by a quarter of
		// the room: the limit returns freed pages, it does not drive the
		// collections.
		goal := live + live*uint64(simGCPercentFor(live))/100
		if got, want := simMemLimitFor(live), int64(goal+simGCRoom/4); got != want {
			t.Errorf("simMemLimitFor(%d) = %d, want %d", live, got, want)
		}
	}
}
