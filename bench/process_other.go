//go:build !unix

package bench

import (
	"os"
	"syscall"
)

// newProcessGroup returns nil: process groups are a unix notion.
func newProcessGroup() *syscall.SysProcAttr { return nil }

// signalGroup kills p; without unix signals there is no graceful stop.
func signalGroup(p *os.Process, _ bool) { _ = p.Kill() }
