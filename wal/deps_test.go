package wal_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps wal the storage contract the pure core can import: no
// storage engine (Badger is in wal/badgerwal), no network, no metrics.
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps printed nothing")
	}
	forbidden := []string{"net", "net/http", "os/exec"}
	substrings := []string{"badger", "libp2p", "prometheus", "opentelemetry"}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f {
				t.Errorf("wal depends on %s", dep)
			}
		}
		for _, f := range substrings {
			if strings.Contains(dep, f) {
				t.Errorf("wal depends on %s", dep)
			}
		}
	}
}
