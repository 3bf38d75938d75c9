// Package peer is needled's runtime: the shell around the pure protocol
// (package node). It does the IO the Node asks for and nothing else.
//
// One goroutine, the loop (loop.go), owns the Node. Everything else talks
// to it through the loop's inbox: messages from other peers (a Transport,
// transport.go: the libp2p host of peer/p2p in the daemon, with streams for
// Raft, leases and forwarded calls and gossipsub for heartbeats; an
// in-memory network in tests), API requests (peer/api, through backend.go:
// routed in forward.go serves a request here or on the owner of its group,
// each request a type of calls.go; errors cross in the API's vocabulary,
// rpcerr.go), finished runs of
// local handlers (worker.go) and of external workers (workers.go), and
// the clock. The loop drains the Node's Ready in the order node's doc
// lists: early messages, the WAL write and sync, the other messages, the
// runs, webhooks (notifier.go) and replies.
//
// Nothing here decides anything the protocol depends on: leases, rounds,
// ownership and membership are the Node's. What the runtime owns is how
// tasks run (slots, timeouts, cancellation), the HTTP surface, metrics and
// traces, logs, and the data directory (identity key, WAL).
package peer
