//go:build !unix

package handler

import "os/exec"

// setProcessGroup leaves cmd as is: without process groups, cancellation
// kills only the command itself (exec.CommandContext's default).
func setProcessGroup(cmd *exec.Cmd) {}
