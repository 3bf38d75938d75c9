package peer

// Log keys of the runtime: the same names the node logs with, so that one
// query finds a task's lines from both.
const (
	keyNode  = "node"
	keyTask  = "task"
	keyGroup = "group"
	keyRound = "round"
	keyPeer  = "peer"
	keyErr   = "err"
)
