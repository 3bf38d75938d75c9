package main

import (
	"slices"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

func TestSubmitRequirePin(t *testing.T) {
	f := &fakeBackend{}
	addr := mustServer(t, f, api.HandlerOptions{})
	r := runCLI(t, addr, "", "submit", "--handler", "echo", "--require", "zone=a", "--require", "gpu=true", "--pin", "peerX")
	r.check(t, 0, "g1.0\n", "")
	ts := f.submitted()[0].Tasks[0]
	if !slices.Equal(ts.Require, []string{"gpu=true", "zone=a"}) || ts.Pin != "peerX" {
		t.Errorf("submitted require %v pin %q; want [gpu=true zone=a] peerX", ts.Require, ts.Pin)
	}
	r = runCLI(t, addr, "", "submit", "--handler", "echo", "--require", "gpu")
	r.check(t, 1, "", "require[0]")
	if len(f.submitted()) != 1 {
		t.Errorf("a bad selector created a task")
	}
	r = runCLI(t, addr, "", "submit", "-f", "-", "--pin", "p")
	r.check(t, 2, "", "--pin")
}
