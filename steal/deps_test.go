package steal

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps steal pure: none of its dependencies may do network,
// process or disk-database IO, or export metrics or traces.
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"net", "net/http", "os/exec"}
	substrings := []string{"libp2p", "badger", "prometheus", "opentelemetry"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f {
				t.Errorf("steal depends on %s", dep)
			}
		}
		for _, f := range substrings {
			if strings.Contains(dep, f) {
				t.Errorf("steal depends on %s", dep)
			}
		}
	}
}
