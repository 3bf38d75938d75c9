package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/shard"
)

// wireFuzzer is a host holding the mesh's swarm key without being a
// member: it sends the peers random wire messages, well-formed ones with
// random fields (Raft messages of every type with indexes and terms out of
// range, outcomes and grants for real tasks with random rounds, heartbeats
// with random membership), the same mutated, and random bytes; as one-way
// messages, calls and gossip.
type wireFuzzer struct {
	r       *rand.Rand
	st      *hostileState
	h       *p2p.Host
	targets []string // member ids
	raftIDs []uint64
	types   []node.MsgType // the message types to send; nil: all
}

func newWireFuzzer(ctx context.Context, cl *Cluster, keyFile string, types []string, r *rand.Rand, st *hostileState) (*wireFuzzer, error) {
	h, err := p2p.New(ctx, p2p.Config{SwarmKeyFile: keyFile, Listen: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		return nil, fmt.Errorf("hostile: keyed host: %w", err)
	}
	w := &wireFuzzer{r: r, st: st, h: h}
	for _, name := range types {
		t, ok := wireType(name)
		if !ok {
			h.Close()
			return nil, fmt.Errorf("hostile: unknown wire message type %q (want raft, heartbeat, outcome, ack, steal, grant)", name)
		}
		w.types = append(w.types, t)
	}
	for i := range cl.Len() {
		info, err := cl.Client(i).Peers(ctx)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("hostile: GET /v1/peers of peer %d: %w", i, err)
		}
		var addr string
		for _, pi := range info.Peers {
			if pi.ID != info.Self {
				continue
			}
			for _, a := range pi.Addrs {
				if strings.HasPrefix(a, "/ip4/127.0.0.1/tcp/") {
					addr = a
				}
			}
		}
		if addr == "" {
			h.Close()
			return nil, fmt.Errorf("hostile: peer %d has no loopback TCP address", i)
		}
		if !strings.Contains(addr, "/p2p/") {
			addr += "/p2p/" + info.Self
		}
		if err := h.Connect(ctx, addr); err != nil {
			h.Close()
			return nil, fmt.Errorf("hostile: keyed host cannot connect to peer %d: %w", i, err)
		}
		w.targets = append(w.targets, info.Self)
		w.raftIDs = append(w.raftIDs, node.RaftID(info.Self))
	}
	return w, nil
}

// wireType returns the message type named name (MsgType.String).
func wireType(name string) (node.MsgType, bool) {
	for t := node.MsgRaft; t <= node.MsgGrant; t++ {
		if t.String() == name {
			return t, true
		}
	}
	return 0, false
}

func (w *wireFuzzer) close() { w.h.Close() }

// run sends frames until ctx is done: one a millisecond at most, fewer
// while a call waits for its answer (about a hundred a second in all).
func (w *wireFuzzer) run(ctx context.Context) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.once(ctx)
	}
}

func (w *wireFuzzer) sent(kind string) {
	w.st.mu.Lock()
	w.st.rep.WireSent[kind]++
	w.st.mu.Unlock()
}

func (w *wireFuzzer) once(ctx context.Context) {
	to := w.targets[w.r.IntN(len(w.targets))]
	b := w.frame()
	switch k := w.r.IntN(20); {
	case k < 15:
		if w.h.Send(to, b) == nil {
			w.sent("message")
		}
	case k < 18:
		if w.h.Publish(b) == nil {
			w.sent("gossip")
		}
	default:
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		w.h.Call(cctx, to, b)
		cancel()
		w.sent("call")
	}
}

// frame returns an encoded message, mutated or not, or random bytes.
func (w *wireFuzzer) frame() []byte {
	switch k := w.r.IntN(10); {
	case k < 6:
		return w.encoded()
	case k < 9:
		b := w.encoded()
		for range 1 + w.r.IntN(4) {
			if len(b) == 0 {
				break
			}
			switch w.r.IntN(3) {
			case 0:
				b[w.r.IntN(len(b))] ^= byte(1 << w.r.IntN(8))
			case 1:
				b = b[:w.r.IntN(len(b))]
			default:
				i := w.r.IntN(len(b))
				b = append(b[:i], append(w.bytes(8), b[i:]...)...)
			}
		}
		return b
	default:
		return w.bytes(w.r.IntN(2048))
	}
}

func (w *wireFuzzer) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(w.r.Uint32())
	}
	return b
}

// encoded returns a well-formed message with random contents.
func (w *wireFuzzer) encoded() []byte {
	m := &node.Message{Type: []node.MsgType{node.MsgRaft, node.MsgHeartbeat, node.MsgOutcome, node.MsgAck, node.MsgStealReq,
		node.MsgGrant, node.MsgReplicaAsk, node.MsgReplicaGone}[w.r.IntN(8)], From: w.id()}
	if len(w.types) > 0 {
		m.Type = w.types[w.r.IntN(len(w.types))]
	}
	switch m.Type {
	case node.MsgRaft:
		for range 1 + w.r.IntN(4) {
			m.Raft = append(m.Raft, node.RaftMsg{Partition: w.u32(), Msg: w.raftMsg()})
		}
	case node.MsgHeartbeat:
		m.Heartbeat = &node.Heartbeat{
			Boot: w.str(), Partitions: w.smallInt(), Load: w.load(),
			Members: w.ids(), Forgotten: w.ids(), Addrs: []string{w.str()},
			Draining: w.r.IntN(2) == 0, Labels: []string{"zone=" + w.str()},
			Stranded: w.smallInt(), StrandedFor: w.ids(), Features: w.r.Uint64(),
		}
	case node.MsgOutcome:
		for range 1 + w.r.IntN(4) {
			m.Outcomes = append(m.Outcomes, node.OutcomeMsg{
				Task: w.task(), Round: shard.Round(w.u64()), Holder: w.id(), OK: w.r.IntN(2) == 0,
				Result: []byte(`{"forged":true}`), Error: w.str(), Permanent: w.r.IntN(2) == 0, TimedOut: w.r.IntN(4) == 0,
			})
		}
	case node.MsgAck:
		for range 1 + w.r.IntN(4) {
			m.Acks = append(m.Acks, node.AckMsg{Task: w.task(), Round: shard.Round(w.u64())})
		}
	case node.MsgStealReq:
		m.Want, m.Load = w.smallInt(), w.load()
	case node.MsgGrant:
		m.Load, m.Refused, m.Holder = w.load(), w.r.IntN(4) == 0, w.id()
		for range w.r.IntN(4) {
			m.Grants = append(m.Grants, node.Grant{
				Task: w.task(), Round: shard.Round(w.u64()), Expiry: time.Now().Add(time.Duration(w.r.Int64N(int64(time.Hour)))),
				Handler: []string{"echo", "sleep", "exec", "http", "fail", w.str()}[w.r.IntN(6)],
				Payload: []byte(`{"ms":1}`), Timeout: time.Duration(w.r.Int64N(int64(time.Minute))),
				Inputs: map[string]json.RawMessage{"x": json.RawMessage(`1`)},
			})
		}
	case node.MsgReplicaAsk:
		for range 1 + w.r.IntN(8) {
			m.Asks = append(m.Asks, w.u32())
		}
	case node.MsgReplicaGone:
		for range 1 + w.r.IntN(8) {
			m.Gone = append(m.Gone, node.GoneMsg{Partition: w.u32(), Index: w.u64()})
		}
	}
	b, err := node.AppendMessage(nil, m)
	if err != nil { // a value the encoder refuses: send the bytes instead
		return w.bytes(64)
	}
	return b
}

func (w *wireFuzzer) raftMsg() *raftpb.Message {
	ty := raftpb.MessageType(w.r.IntN(23))
	m := &raftpb.Message{
		Type: ty, To: w.raftID(), From: w.raftID(),
		Term: w.u64(), LogTerm: w.u64(), Index: w.u64(), Commit: w.u64(),
		Reject: w.r.IntN(4) == 0, RejectHint: w.u64(),
	}
	for range w.r.IntN(3) {
		m.Entries = append(m.Entries, raftpb.Entry{Term: w.u64(), Index: w.u64(),
			Type: raftpb.EntryType(w.r.IntN(3)), Data: w.bytes(w.r.IntN(64))})
	}
	if ty == raftpb.MsgSnap && w.r.IntN(2) == 0 {
		m.Snapshot = &raftpb.Snapshot{Data: w.bytes(w.r.IntN(256)), Metadata: raftpb.SnapshotMetadata{
			Index: w.u64(), Term: w.u64(), ConfState: raftpb.ConfState{Voters: []uint64{w.raftID(), w.raftID()}}}}
	}
	return m
}

// u64 is a number from where bugs live: small, near the edges, huge.
func (w *wireFuzzer) u64() uint64 {
	switch w.r.IntN(5) {
	case 0:
		return uint64(w.r.IntN(4))
	case 1:
		return uint64(w.r.IntN(1000))
	case 2:
		return 1 << 40
	case 3:
		return ^uint64(0) - uint64(w.r.IntN(2))
	default:
		return w.r.Uint64()
	}
}

func (w *wireFuzzer) u32() uint32 {
	if w.r.IntN(2) == 0 {
		return uint32(w.r.IntN(64))
	}
	return w.r.Uint32()
}

func (w *wireFuzzer) smallInt() int {
	return []int{0, 1, 7, 64, 256, -1, 1 << 30}[w.r.IntN(7)]
}

func (w *wireFuzzer) load() node.Load {
	return node.Load{Ready: w.smallInt(), Running: w.smallInt(), Slots: w.smallInt()}
}

func (w *wireFuzzer) raftID() uint64 {
	if w.r.IntN(4) == 0 {
		return w.u64()
	}
	return w.raftIDs[w.r.IntN(len(w.raftIDs))]
}

// id is a member's id (claiming to be another peer), this host's, or junk.
func (w *wireFuzzer) id() string {
	switch w.r.IntN(3) {
	case 0:
		return w.targets[w.r.IntN(len(w.targets))]
	case 1:
		return w.h.ID()
	default:
		return w.str()
	}
}

func (w *wireFuzzer) ids() []string {
	out := make([]string, w.r.IntN(4))
	for i := range out {
		out[i] = w.id()
	}
	return out
}

// task is an acknowledged task id (so fencing is what refuses a forged
// outcome), or junk.
func (w *wireFuzzer) task() shard.TaskID {
	if id := w.st.someTask(w.r); id != "" && w.r.IntN(4) != 0 {
		return shard.TaskID(id)
	}
	return shard.TaskID(w.str())
}

func (w *wireFuzzer) str() string {
	return []string{"", "x", "..", "g.1", "g.-1", "\x00", strings.Repeat("y", 300)}[w.r.IntN(7)]
}
