package main

import (
	"strings"
	"testing"

	"github.com/needle-mesh/needle/ring"
	"github.com/needle-mesh/needle/simulate"
)

// needle simulate places as a new needled data dir does (spread), and
// the replay command every run prints names the placement, so a run of
// either placement replays as itself.
func TestSimulatePlacementDefaultAndReplay(t *testing.T) {
	cfg, _, _, _, err := parseSimulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Placement != ring.PlacementSpread {
		t.Errorf("default placement %v, want spread (a new data dir's)", cfg.Placement)
	}
	for _, p := range []ring.Placement{ring.PlacementCircle, ring.PlacementSpread} {
		want := simulate.DefaultConfig()
		want.Placement, want.Seed, want.Peers = p, 9, 5
		cmd := want.ReplayCommand()
		args, ok := strings.CutPrefix(cmd, "needle simulate ")
		if !ok {
			t.Fatalf("replay command %q", cmd)
		}
		got, _, _, _, err := parseSimulate(strings.Fields(args))
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if got.Placement != p || got.Seed != 9 || got.Peers != 5 {
			t.Errorf("%s parsed to placement %v seed %d peers %d", cmd, got.Placement, got.Seed, got.Peers)
		}
		if !strings.Contains(want.String(), "placement="+p.String()) {
			t.Errorf("run line %q does not name placement %v", want.String(), p)
		}
	}
}
