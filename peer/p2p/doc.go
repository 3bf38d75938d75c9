// Package p2p is needle's byte-moving layer: a libp2p host that carries
// opaque frames between peers, request/response calls multiplexed on the
// same streams, and gossipsub load gossip. It knows nothing of tasks, rings
// or Raft; peer/ gives it bytes and takes bytes from it.
//
// # What it owns
//
//   - The libp2p host: the identity key (Config.DataDir/identity.key, Ed25519,
//     mode 0600, created on first start so the peer id survives restarts),
//     listeners (TCP and QUIC), Noise (preferred) and TLS security, yamux,
//     the optional private-network key, mDNS discovery. No relay, no NAT
//     port mapping, no libp2p Prometheus metrics (Stats has this package's
//     counters).
//   - Membership plumbing only: Config.Join peers are dialed at start and
//     re-dialed with exponential backoff (250 ms to 30 s, jittered) whenever
//     they are not connected, and protected from the connection manager. A
//     join address without /p2p/<id> (/dns4/needle-0/tcp/4001, needle-0:4001)
//     is resolved and dialed first for a bare Noise handshake that reveals
//     the peer's id (join.go), then dialed as that id; the id is learned
//     again whenever the peer is not connected.
//     Liveness and membership decisions belong to peer/.
//   - One long-lived outbound stream per peer on ProtocolCancel
//     (/needle/rpc/1.1.0), or ProtocolID (/needle/rpc/1.0.0) to a peer of
//     an older release, opened lazily on the first Send or Call and
//     reopened after a failure. Never a stream per message. Both are
//     served; they differ only in the cancel frame.
//   - The gossipsub topic GossipTopic (needle/load/1).
//
// # Frame format
//
// Every frame on a stream is
//
//	uvarint length   of everything that follows; 1 <= length <= Config.MaxFrame
//	byte    version  1
//	byte    kind     0 message, 1 call, 2 reply, 3 error reply, 4 cancel
//	                 (1.1.0 only: the caller stopped waiting for call id)
//	uvarint id       correlation id: 0 for a message, the caller's id otherwise
//	bytes   payload  the rest
//
// AppendFrame encodes and ReadFrame decodes it. ReadFrame rejects a zero or
// too-large length before allocating, a wrong version, an unknown kind, a
// message with an id, and truncated input, and grows its buffer only as bytes
// arrive. The host answers a bad frame with one Warn log naming the peer and
// a reset of that stream (StreamProtocolViolation); the host and the peer's
// other streams stay up.
//
// Frames from A to B always travel on A's outbound stream to B, including
// B's replies to A's calls, which travel on B's outbound stream to A. So each
// stream carries data one way; its other half is unused.
//
// # Ordering and delivery
//
//  1. Frames sent to one peer are written in Send/Call order on one stream
//     and arrive in that order.
//  2. Delivery is at most once. Frames lost with a broken stream (or dropped
//     because it could not be opened) are not retried; Stats.FramesDropped
//     counts them. Upper layers (Raft, the outbox) retry. A reopened stream
//     keeps the queue, and the frames after the break arrive in order.
//  3. Send never blocks: a full per-peer queue (Config.QueueLen) returns
//     ErrQueueFull. Send and Call keep the data slice until it is written,
//     without copying it: do not modify it afterwards.
//  4. Inbound is bounded (Config.InboundLen). When it is full the stream
//     readers wait, which back-pressures the senders through yamux flow
//     control; a consumer must keep draining Inbound.
//  5. A Call ends with the reply, a *RemoteError from the remote handler,
//     the caller's ctx error, ErrDisconnected when the peer's last connection
//     closes, the write error when its frame is lost, or ErrClosed. When it
//     ends with its ctx, a cancel frame follows the call (best effort), and
//     the callee cancels its handler's ctx.
//  6. Gossip is best effort and advisory: gossipsub drops under load, and the
//     Gossip channel (Config.GossipLen) drops its oldest message when full
//     (Stats.GossipDropped). Never use it for state that must arrive.
//
// # Goroutines
//
// Every goroutine below is started by the Host, registered with its
// WaitGroup, stopped by the ctx Close cancels (and by the libp2p host
// closing, which resets all streams) and waited for by Close.
//
//   - one writer per peer ever sent to (runWriter): owns that peer's outbound
//     stream and a bufio.Writer; drains the queue and flushes when it is
//     momentarily empty, so a burst leaves in one write;
//   - one reader per inbound stream (handleStream), running in the goroutine
//     libp2p gave the stream handler;
//   - one goroutine per running call handler, at most Config.MaxCalls; when
//     all are busy a call is answered ErrBusy at once (the reader of the
//     calling stream never waits: the caller's messages follow on it);
//   - one join loop per Config.Join address; one gossip forwarder; one
//     gossip watcher (watchGossip: closes and dials again, in its own
//     goroutine, a connected peer gossipsub stopped talking to); short
//     mDNS dial goroutines.
//
// Gossipsub and libp2p run their own goroutines, stopped by Close.
//
// Lock order: Host.mu before Host.callMu; neither is held while blocking on a
// channel or the network.
//
// # Private networks (swarm keys)
//
// With Config.SwarmKeyFile set, the host joins a libp2p private network
// (pnet): every connection is encrypted with the pre-shared key before the
// security handshake, so hosts without the same key cannot connect. A
// mismatched key garbles the handshake; the dial fails by timing out, not
// with a clear "wrong key" error.
//
// libp2p's QUIC transport does not support private networks, so with a swarm
// key the host listens and dials over TCP only: QUIC listen addresses are
// dropped, with one log line saying so.
//
// To deploy one:
//
//	needle keygen > swarm.key        # once; GenerateSwarmKey
//	chmod 600 swarm.key              # copy it to every host, e.g. with scp
//	needled --swarm-key swarm.key --join /ip4/10.0.0.1/tcp/4001/p2p/12D3KooW...
//
// The file uses the standard go-libp2p format ("/key/swarm/psk/1.0.0/",
// "/base16/", 64 hex digits), so it also works with other libp2p tools.
// Without a swarm key or a members file (below) the mesh is open to any
// libp2p host that can reach it (logged once as a warning at start); the
// daemon keeps such a mesh on its host unless told otherwise
// (peer.Config.OpenMesh).
//
// # Members (an allowlist of peer ids)
//
// With Config.MembersFile set, only the peer ids the file lists may connect
// (see LoadMembers for the format, members.go for the why). A libp2p
// connection gater refuses a dial to any other id before it is made, and
// closes a connection from one right after the security handshake proved
// its id; a gossip topic validator drops messages whose signed author is
// not listed, whoever relayed them. This host's own id is always allowed.
// Host.ReloadMembers reads the file again: the peers it no longer lists are
// disconnected at once. Refusals are logged at most once a minute per peer
// and counted in Stats.
//
// A refused host's own dials succeed on its side (its handshake completes
// before the other side checks the id) and close at once; its join loop
// takes a connection that closes soon after it was made as a failed dial
// and backs off (joinStable), so it does not redial as fast as handshakes
// go. Any dial of this host that a peer it allows closes within
// closedAtOnce is logged (naming this host's id, which the peer's file may
// lack) and pauses its Connect and stream opens to that peer for
// dialPause: lists that differ between peers (one lists the other, not
// the other way) otherwise redialed twice a second.
package p2p
