package simulate

import (
	"testing"

	"github.com/needle-mesh/needle/node/nodetest"
)

// TestSimulatorDrivesThroughNodeDriver runs a small mesh with every node's
// node.Driver traced: the simulator hands each Ready to the shared driver
// (the one peer/loop.go uses), which sends a leader's early Raft messages
// before its persist and the responses after it.
func TestSimulatorDrivesThroughNodeDriver(t *testing.T) {
	c := nodetest.NewContract()
	cfg := small(3)
	cfg.driverTrace = c.For
	r := mustRun(t, cfg)
	if len(r.Violations) > 0 {
		t.Fatalf("violations: %+v", r.Violations)
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	readies, early := c.Counts()
	if readies == 0 || early == 0 {
		t.Fatalf("traced %d Readies, %d with early sends before the persist; want both > 0", readies, early)
	}
	t.Logf("%d Readies, %d sent early messages before their persist", readies, early)
}
