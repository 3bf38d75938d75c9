package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/needle-mesh/needle/bench"
)

// A short run of needle hostile on three real daemons: random valid-shaped
// requests with hostile values from four clients, and random wire messages
// from a host holding the swarm key. No peer may crash, nothing may answer
// 500, and every task the mesh acknowledged must finish. The closing notes
// report 10-minute runs (needle hostile --duration 10m).
func TestHostileMeshHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three daemons")
	}
	if os.Getenv("NEEDLE_HOSTILE") == "" {
		// A soak of three daemons under attack: .ci/run runs it alone
		// after make test (make hostile), where it does not share two
		// cores with every other package.
		t.Skip("run alone: make hostile (NEEDLE_HOSTILE=1)")
	}
	bin := buildNeedled(t)
	cfg := bench.DefaultHostile()
	cfg.Needled, cfg.Duration, cfg.Seed, cfg.DataDir = bin, 8*time.Second, 7, t.TempDir()
	rep, err := bench.Hostile(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if !rep.OK() {
		t.Fatalf("the mesh did not hold:\n%s", out.String())
	}
	if rep.Acked == 0 || rep.WireSent["message"] == 0 {
		t.Fatalf("the attack did not happen (nothing acknowledged or sent):\n%s", out.String())
	}
	t.Logf("\n%s", out.String())
}
