package main

import "testing"

func TestSimGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, simGCPercent}, {64 << 20, simGCPercent}, {256 << 20, simGCPercent}, {512 << 20, 200}, {1 << 30, 100}, {2 << 30, 50}, {3 << 30, 33}, {8 << 30, simGCFloor}} {
		if got := simGCPercentFor(c.live); got != c.want {
			t.Errorf("simGCPercentFor(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}
