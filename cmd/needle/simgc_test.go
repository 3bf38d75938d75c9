package main

import "testing"

func TestSimGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, simGCPercent}, {64 << 20, simGCPercent}, {simGCSmall, simGCPercent}, {simGCSmall + 1, 100}, {8 << 30, 100}} {
		if got := simGCPercentFor(c.live); got != c.want {
			t.Errorf("simGCPercentFor(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}
