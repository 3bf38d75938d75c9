package plat

import "os/exec"

// Cmd runs a command.
var Cmd = exec.Command
