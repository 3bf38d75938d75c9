package wal_test

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestPure keeps wal the storage contract the pure core can import: no
// storage engine (Badger is in wal/badgerwal), no network, no metrics, and
// no goroutines, wall clock or global rand in its source.
func TestPure(t *testing.T) { deptest.Pure(t, ".") }
