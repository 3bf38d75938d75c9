package simulate

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestDeps: the simulator runs the core the daemon ships and none of the
// daemon's adapters: no network, storage, metrics or process library is
// linked. (Its own source may use goroutines and the wall clock, to run
// seeds in parallel and to report its speed, so only the dependencies are
// checked.)
func TestDeps(t *testing.T) {
	deptest.Checker{BadDeps: deptest.PureDeps}.Check(t, ".")
}
