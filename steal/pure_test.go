package steal

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestPure keeps steal pure: it links no network, process, storage, metrics
// or tracing package, starts no goroutine, reads no wall clock and uses no
// global randomness (see internal/deptest).
func TestPure(t *testing.T) { deptest.Pure(t, ".") }
