package client

import (
	"testing"

	"github.com/needle-mesh/needle/internal/deptest"
)

// TestDeps keeps the client small: a program that only calls the API or
// serves handlers must not link the peer (libp2p, Badger, Raft, the WAL).
// peer/api, the wire types, is allowed: only the peer package itself is
// forbidden, not the packages below it.
func TestDeps(t *testing.T) {
	const needle = "github.com/needle-mesh/needle/"
	deptest.Checker{BadDeps: map[string]string{
		needle + "peer":                   "the peer runtime",
		needle + "wal":                    "the write-ahead log",
		needle + "steal":                  "the peer's work stealing",
		needle + "ring":                   "the peer's placement",
		"github.com/libp2p/...":           "libp2p networking",
		"github.com/dgraph-io/badger/...": "disk storage (Badger)",
		"go.etcd.io/raft/...":             "Raft",
		"github.com/prometheus/...":       "metrics export (Prometheus)",
	}}.Check(t, ".")
}
