package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the client small: a program that only calls the API or
// serves handlers must not link the peer (libp2p, Badger, Raft, the WAL).
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"github.com/needle-mesh/needle/peer", "github.com/needle-mesh/needle/wal",
		"github.com/needle-mesh/needle/steal", "github.com/needle-mesh/needle/ring"}
	substrings := []string{"libp2p", "badger", "go.etcd.io/raft", "prometheus"}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f {
				t.Errorf("client depends on %s", dep)
			}
		}
		for _, f := range substrings {
			if strings.Contains(dep, f) {
				t.Errorf("client depends on %s", dep)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/needle-mesh/needle/peer/api\n") {
		t.Errorf("go list -deps does not list peer/api: the test lists the wrong package\n%s", out)
	}
}
