package peer

import (
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// nodeFiles are the files of the Node, the pure core of this package: they
// do no IO and start nothing; the runtime (peer.go, loop.go, worker.go,
// forward.go, backend.go, tracing.go, the HTTP side) drives them.
var nodeFiles = []string{
	"node.go", "mesh.go", "step.go", "ready.go", "wire.go", "request.go", "steal.go", "notify.go",
	"partition.go", "placement.go", "raftcheck.go", "raftlog.go", "snapshot.go", "drain.go", "lag.go",
	"pace.go", "settled.go",
}

// TestNodeImportsNoRuntime keeps the Node pure: none of its files imports
// a network, process, storage, metrics or tracing library. (The package as
// a whole links them, for the runtime, so this reads the files' imports.)
func TestNodeImportsNoRuntime(t *testing.T) {
	forbidden := []string{"net", "net/http", "os", "os/exec", "github.com/needle-mesh/needle/peer/p2p",
		"github.com/needle-mesh/needle/peer/api"}
	substrings := []string{"libp2p", "badger", "prometheus", "opentelemetry"}
	fset := token.NewFileSet()
	for _, name := range nodeFiles {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad {
					t.Errorf("%s imports %s", name, path)
				}
			}
			for _, bad := range substrings {
				if strings.Contains(path, bad) {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
	}
}
