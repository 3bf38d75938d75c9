package node

import (
	"testing"
)

// A peer heartbeats early (within workerBeatEvery, not a heartbeat
// interval later) when its workers begin to wait or want more tasks, so
// that owners elsewhere offer them; not when they want fewer.
func TestDemandBeatsEarly(t *testing.T) {
	h := newHarness(t, 4)
	h.tick(2 * h.n.cfg.HeartbeatEvery)
	beats := func(ds ...Demand) int {
		t.Helper()
		h.n.SetDemand(ds)
		h.now = h.now.Add(2 * workerBeatEvery)
		h.n.Tick(h.now)
		n := 0
		for h.n.HasReady() {
			rd := h.n.Ready()
			n += len(rd.Gossip)
			if err := h.log.Append(&rd.Persist); err != nil {
				t.Fatal(err)
			}
			h.n.Advance(rd)
		}
		return n
	}
	steps := []struct {
		name string
		want int
		beat bool
	}{
		{"begins to wait", 2, true},
		{"unchanged", 2, false},
		{"wants fewer", 1, false},
		{"wants more", 5, true},
		{"wants none", 0, true},
	}
	for _, s := range steps {
		if got := beats(Demand{Handler: "resize", Want: s.want}); (got > 0) != s.beat {
			t.Errorf("%s (want %d): %d heartbeats; want early: %v", s.name, s.want, got, s.beat)
		}
	}
	if got := beats(); got != 1 {
		t.Errorf("no worker left: %d heartbeats; want 1", got)
	}
}
