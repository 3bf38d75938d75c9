package peer

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/p2p"
)

// levels records the level of each log record with a given message.
type levels struct {
	mu  sync.Mutex
	msg string
	got []slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		l.mu.Lock()
		l.got = append(l.got, r.Level)
		l.mu.Unlock()
	}
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

// A restarted peer hears the others' Raft before their heartbeats and
// refuses it for a moment: every restart logged dozens of warnings
// (110 in a 120 s restart loop of 4 peers). Such a refusal is logged at
// debug level; a malformed message still warns. Both are counted.
func TestRefusalOfUnheardPeerIsNoWarning(t *testing.T) {
	h := &levels{msg: "message refused"}
	p, err := New(Config{InMemory: true, HTTPAddr: "127.0.0.1:0", Partitions: 16, Slots: 1,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	const stranger = "12D3KooWKEvQdgeoY9itgigGX6JeZzYCFjeH4jBhJy4Yc1Gxn3ND"
	raft, err := node.AppendMessage(nil, &node.Message{Type: node.MsgRaft, From: stranger, Raft: []node.RaftMsg{{Partition: 0,
		Msg: &pb.Message{Type: pb.MsgHeartbeat, To: node.RaftID(p.node.ID()), From: node.RaftID(stranger), Term: uint64(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	p.stepFrame(p2p.Frame{From: stranger, Data: raft})
	p.stepFrame(p2p.Frame{From: stranger, Data: []byte{0xff, 0xff, 0xff}})
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) != 2 || h.got[0] != slog.LevelDebug || h.got[1] != slog.LevelWarn {
		t.Fatalf("refusals logged at %v; want [DEBUG WARN] (Raft before a heartbeat, then a malformed message)", h.got)
	}
	var m dto.Metric
	if err := p.metrics.refused.Write(&m); err != nil || m.GetCounter().GetValue() != 2 {
		t.Fatalf("needle_messages_refused_total = %v (%v); want 2", m.GetCounter().GetValue(), err)
	}
}
