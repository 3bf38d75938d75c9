package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/wal"
)

// ErrNoSettle is returned by Drive when the node still has a Ready after
// Driver.MaxRounds of them.
var ErrNoSettle = errors.New("node: Ready does not settle")

// Duty is one step of the Ready contract (doc.go), in the order a Driver
// does them.
type Duty int

// The duties, in order.
const (
	DutySendEarly Duty = iota + 1 // rd.Early leave
	DutyStart                     // rd.Run start, rd.Abort stop, rd.Notify calls go out
	DutyPersist                   // rd.Persist is written, synced when rd.MustSync
	DutySend                      // rd.Messages and rd.Gossip leave
	DutyDeliver                   // rd.Replies and rd.Changes reach their waiters
	DutyAdvance                   // Node.Advance(rd)
)

var dutyNames = [...]string{"", "send-early", "start", "persist", "send", "deliver", "advance"}

func (d Duty) String() string {
	if d > 0 && int(d) < len(dutyNames) {
		return dutyNames[d]
	}
	return fmt.Sprintf("duty(%d)", int(d))
}

// DriverIO is the IO a Driver does for its Node: the runtime's WAL,
// transport and workers (peer/loop.go), the simulator's disk, network and
// handler jobs (simulate/handler.go), a test's memory (nodetest).
type DriverIO interface {
	// Now is the driver's clock. Before every Ready of a Drive but the
	// first, the node is ticked with it: persisting took time, and timers
	// and pacing must see it.
	Now() time.Time
	// Send hands envelopes to the transport, in order. Delivery is best
	// effort: Raft retransmits, the outbox re-sends.
	Send(envs []Envelope)
	// Gossip hands messages for every other peer to the transport (best
	// effort).
	Gossip(msgs []Message)
	// Persist appends b to the log, then syncs the log when sync is set.
	// An error stops the Drive: the node may not run on unwritten state.
	Persist(b *wal.Batch, sync bool) error
	// Start starts rd.Run, stops rd.Abort and makes rd.Notify's webhook
	// calls (each reported later with Node.NotifyDone).
	Start(rd *Ready)
	// Deliver answers rd.Replies and hands on rd.Changes (waiters,
	// metrics, checks). An error stops the Drive before Advance.
	//
	// Persist, Start and Deliver keep no slice of rd: the node reuses
	// their arrays after Advance (copies of their elements are theirs).
	Deliver(rd *Ready) error
}

// Driver hands a Node's Readies to its IO in the order of the Ready
// contract. The daemon's loop, the simulator and the test harnesses all
// drive their Nodes through it, so that a test, a simulated run and the
// daemon take one path.
type Driver struct {
	Node *Node
	IO   DriverIO
	// MaxRounds bounds the Readies of one Drive (0: no bound); past it
	// Drive returns ErrNoSettle.
	MaxRounds int
	// Trace, when set, is called before each duty of each Ready: tests
	// use it to see which path a caller takes.
	Trace func(d Duty, rd *Ready)
	// Readies counts the Readies handled.
	Readies uint64

	rd Ready // the Ready being handled (Drive)
}

// Drive handles the node's Readies until it has none left.
func (d *Driver) Drive() error {
	for i := 0; d.Node.HasReady(); i++ {
		if d.MaxRounds > 0 && i >= d.MaxRounds {
			return fmt.Errorf("%w after %d rounds", ErrNoSettle, i)
		}
		if i > 0 {
			d.Node.Tick(d.IO.Now())
		}
		// The Ready lives in the Driver, not in a new allocation per round
		// (352 bytes, as the IO's interface calls take its address); its
		// envelopes are the IO's to keep, so it is emptied, not reused.
		d.rd = d.Node.Ready()
		err := d.Handle(&d.rd)
		d.rd = Ready{}
		if err != nil {
			return err
		}
	}
	return nil
}

// Handle does the duties of one Ready taken from the node, in order,
// ending with Advance.
func (d *Driver) Handle(rd *Ready) error {
	d.Readies++
	if len(rd.Early) > 0 {
		d.trace(DutySendEarly, rd)
		d.IO.Send(rd.Early)
	}
	// Runs start before the persist, so a handler overlaps the sync.
	d.trace(DutyStart, rd)
	d.IO.Start(rd)
	if !emptyBatch(&rd.Persist) || rd.MustSync {
		d.trace(DutyPersist, rd)
		if err := d.IO.Persist(&rd.Persist, rd.MustSync); err != nil {
			return err
		}
	}
	if len(rd.Messages) > 0 || len(rd.Gossip) > 0 {
		d.trace(DutySend, rd)
		d.IO.Send(rd.Messages)
		d.IO.Gossip(rd.Gossip)
	}
	d.trace(DutyDeliver, rd)
	if err := d.IO.Deliver(rd); err != nil {
		return err
	}
	d.trace(DutyAdvance, rd)
	d.Node.Advance(*rd)
	return nil
}

func (d *Driver) trace(duty Duty, rd *Ready) {
	if d.Trace != nil {
		d.Trace(duty, rd)
	}
}

func emptyBatch(b *wal.Batch) bool {
	return len(b.Updates) == 0 && len(b.OutboxPut) == 0 && len(b.OutboxDel) == 0 && len(b.MetaPut) == 0
}
