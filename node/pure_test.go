package node

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestPure: the protocol links no network, storage, metrics or process
// library, and its files start no goroutine, read no clock and draw no
// global randomness.
func TestPure(t *testing.T) { deptest.Pure(t, ".") }
