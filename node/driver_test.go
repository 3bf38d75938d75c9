package node

import (
	"errors"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// TestReadySplitsEarlyMessages drives a 3-node mesh with every driver
// traced: each Ready's duties come in the contract's order; Early holds a
// leader's appends and heartbeats and vote requests, which leave before
// the persist, and Messages the responses, which leave after it.
func TestReadySplitsEarlyMessages(t *testing.T) {
	c := newCluster(t, 3, 4)
	last := map[string]Duty{}
	var earlyFirst, responses int
	c.trace = func(id string, d Duty, rd *Ready) {
		if l := last[id]; l != DutyAdvance && d <= l {
			t.Fatalf("%s: %v after %v", id, d, l)
		}
		switch d {
		case DutySendEarly:
			for _, e := range rd.Early {
				for _, rm := range e.Msg.Raft {
					if !earlyRaft(rm.Msg.Type) {
						t.Fatalf("%s: %v in Early", id, rm.Msg.Type)
					}
				}
			}
		case DutyPersist:
			if len(rd.Early) > 0 {
				earlyFirst++
			}
		case DutySend:
			for _, e := range rd.Messages {
				for _, rm := range e.Msg.Raft {
					if earlyRaft(rm.Msg.Type) {
						t.Fatalf("%s: %v in Messages", id, rm.Msg.Type)
					}
					responses++
				}
			}
		}
		last[id] = d
	}
	c.run(10 * time.Second)
	if r := c.submit(shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(3)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if earlyFirst == 0 || responses == 0 {
		t.Fatalf("%d Readies sent early before persisting, %d responses after; want both > 0", earlyFirst, responses)
	}
	for _, want := range []pb.MessageType{pb.MsgApp, pb.MsgHeartbeat, pb.MsgVote, pb.MsgPreVote, pb.MsgSnap} {
		if !earlyRaft(want) {
			t.Errorf("%v is not early", want)
		}
	}
}

// failingIO refuses every write and records what else it was asked.
type failingIO struct{ calls *[]string }

func (f failingIO) Now() time.Time       { return time.Time{} }
func (f failingIO) Send([]Envelope)      { *f.calls = append(*f.calls, "send") }
func (f failingIO) Gossip([]Message)     { *f.calls = append(*f.calls, "gossip") }
func (f failingIO) Start(*Ready)         { *f.calls = append(*f.calls, "start") }
func (f failingIO) Deliver(*Ready) error { *f.calls = append(*f.calls, "deliver"); return nil }
func (f failingIO) Persist(*wal.Batch, bool) error {
	*f.calls = append(*f.calls, "persist")
	return errDisk
}

var errDisk = errors.New("disk full")

// TestDriverStopsOnPersistError: a failed write stops the drive before
// anything that vouches for it leaves (replies, responses) or Advance.
func TestDriverStopsOnPersistError(t *testing.T) {
	h := newHarness(t, 1)
	h.n.cfg.LeaseDefer = 0 // the creation goes at once, not held for its run's outcome
	req := h.n.NextRequest()
	h.n.Submit(req, &shard.GroupSpec{ID: "g", Mode: shard.ModeParallel, Tasks: echoTasks(1)})
	var calls []string
	d := Driver{Node: h.n, IO: failingIO{&calls}}
	if err := d.Drive(); !errors.Is(err, errDisk) {
		t.Fatalf("Drive = %v; want the persist error", err)
	}
	// The run of the task the node leased itself starts first: a run
	// vouches for nothing (its outcome counts only through the log).
	if !slices.Equal(calls, []string{"start", "persist"}) {
		t.Fatalf("calls = %v; want the runs started, then only the persist", calls)
	}
}
