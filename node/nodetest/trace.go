package nodetest

import (
	"fmt"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// Contract checks, through node.Driver's Trace, that drivers take the
// Ready contract's path: the duties of each Ready in order, ending with
// Advance; rd.Early holding only Raft messages that vouch for no local
// state, steal requests and grants, and rd.Messages none of them. Tests of the runtime and the
// simulator install it to prove they drive their Nodes through
// node.Driver. It is safe for concurrent use (a peer's loop runs on its
// own goroutine).
type Contract struct {
	mu   sync.Mutex
	last map[string]node.Duty // by driver: the last duty seen
	// Readies counts the Readies seen; EarlyFirst those whose early
	// messages left before their persist.
	readies, earlyFirst int
	errs                []string
}

// NewContract returns an empty Contract.
func NewContract() *Contract { return &Contract{last: map[string]node.Duty{}} }

// For returns the Trace of the driver named id.
func (c *Contract) For(id string) func(node.Duty, *node.Ready) {
	return func(d node.Duty, rd *node.Ready) { c.see(id, d, rd) }
}

func (c *Contract) see(id string, d node.Duty, rd *node.Ready) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.last[id]
	if last == node.DutyAdvance {
		last = 0
	}
	if d <= last {
		c.fail("%s: %v after %v in one Ready", id, d, last)
	}
	switch d {
	case node.DutySendEarly:
		for _, e := range rd.Early {
			switch e.Msg.Type {
			case node.MsgRaft, node.MsgStealReq:
			case node.MsgGrant:
				if !grantLeasesOutside(e.Msg.Grants, &rd.Persist) {
					c.fail("%s: a grant in Early whose lease is in the Ready's persist", id)
				}
			default:
				c.fail("%s: a %v message in Early", id, e.Msg.Type)
			}
			for _, rm := range e.Msg.Raft {
				if response(rm.Msg.Type) {
					c.fail("%s: %v in Early", id, rm.Msg.Type)
				}
			}
		}
	case node.DutyPersist:
		if len(rd.Early) > 0 {
			c.earlyFirst++
		}
	case node.DutySend:
		for _, e := range rd.Messages {
			for _, rm := range e.Msg.Raft {
				if !response(rm.Msg.Type) {
					c.fail("%s: %v waits for the persist", id, rm.Msg.Type)
				}
			}
		}
	case node.DutyAdvance:
		c.readies++
	}
	c.last[id] = d
}

// grantLeasesOutside reports whether none of grants' leases is among the
// committed entries persist writes: a grant sent early must vouch for no
// entry this Ready makes durable and that already counts (its lease
// committed before, held back, or proposed in an entry that commits only
// once written: a held lease rides along with the partition's next
// entry, ready.go flush).
func grantLeasesOutside(grants []node.Grant, persist *wal.Batch) bool {
	for _, u := range persist.Updates {
		commit := u.HardState.Commit
		for _, e := range u.Entries {
			if e.Type != pb.EntryNormal || len(e.Data) == 0 || e.Index > commit {
				continue
			}
			b, err := shard.DecodeBatch(e.Data)
			if err != nil {
				continue
			}
			for _, ev := range b.Events {
				for _, g := range grants {
					if ev.Type == shard.EvLeased && ev.Task == g.Task && ev.Round == g.Round {
						return false
					}
				}
			}
		}
	}
	return true
}

// response reports whether a Raft message acknowledges local state.
func response(t pb.MessageType) bool {
	return t == pb.MsgAppResp || t == pb.MsgVoteResp || t == pb.MsgPreVoteResp
}

func (c *Contract) fail(format string, args ...any) {
	if len(c.errs) < 10 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

// Counts returns the Readies seen and how many of them sent early
// messages before their persist.
func (c *Contract) Counts() (readies, earlyFirst int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readies, c.earlyFirst
}

// Err returns the first breaches of the contract seen, or nil.
func (c *Contract) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("nodetest: Ready contract broken: %v", c.errs)
}
