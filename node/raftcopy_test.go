package node

import (
	"bytes"
	"log/slog"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestRaftCopiesProposals holds etcd raft to what encode relies on: a
// proposed entry's data is copied into the log, so the buffer it came
// from may be overwritten as soon as Propose returns. The entry a leader
// logs, sends and commits keeps the bytes proposed.
func TestRaftCopiesProposals(t *testing.T) {
	st := raft.NewMemoryStorage()
	if err := st.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		ConfState: &pb.ConfState{Voters: []uint64{1}}, Index: new(uint64(1)), Term: new(uint64(1))}}); err != nil {
		t.Fatal(err)
	}
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: st,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: raftLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	drain := func() (ents []*pb.Entry) {
		for rn.HasReady() {
			rd := rn.Ready()
			if err := st.Append(rd.Entries); err != nil {
				t.Fatal(err)
			}
			for _, e := range rd.Entries {
				if len(e.GetData()) > 0 {
					ents = append(ents, e)
				}
			}
			for _, m := range rd.Messages {
				if m.GetTo() == 1 {
					_ = rn.Step(m) // the leader's self-acks of appends
				}
			}
			rn.Advance(rd)
		}
		return ents
	}
	drain()
	want := []byte("entry one, as proposed")
	buf := bytes.Clone(want)
	if err := rn.Propose(buf); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 'x' // the next encode
	}
	ents := drain()
	if len(ents) != 1 || !bytes.Equal(ents[0].GetData(), want) {
		t.Fatalf("logged %q; want one entry %q: Raft keeps the proposal's buffer, and encode must hand it a copy", ents, want)
	}
	stored, err := st.Entries(ents[0].GetIndex(), ents[0].GetIndex()+1, 1<<20)
	if err != nil || len(stored) != 1 || !bytes.Equal(stored[0].GetData(), want) {
		t.Fatalf("stored %v, %v; want %q", stored, err, want)
	}
}
