package peer

import (
	"testing"

	"github.com/needle-mesh/needle/peer/handler"
)

// execResult is the exec built-in's result.
type execResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// MustBuiltins returns a registry with the built-ins registered per cfg.
func MustBuiltins(tb testing.TB, cfg handler.BuiltinConfig) *handler.Registry {
	tb.Helper()
	r, err := handler.NewBuiltins(cfg)
	if err != nil {
		tb.Fatalf("NewBuiltins: %v", err)
	}
	return r
}
