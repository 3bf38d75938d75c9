package cron

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestPure keeps cron as pure as the shard it serves: no network, process,
// storage, metrics or tracing package, no goroutine, no wall clock, no
// global randomness (see internal/deptest).
func TestPure(t *testing.T) { deptest.Pure(t, ".") }
