package ring

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestPure keeps ring pure (see internal/deptest) and stricter still: a
// pure function of its inputs, it does not even import the clock,
// randomness, the OS, the network or locks.
func TestPure(t *testing.T) {
	deptest.Checker{BadDeps: deptest.PureDeps, Source: true, BadImports: map[string]string{
		"os": "the OS", "net": "the network", "syscall": "the OS", "sync": "locks",
		"time": "the clock", "math/rand": "randomness", "math/rand/v2": "randomness", "crypto/rand": "randomness",
	}}.Check(t, ".")
}
