package simulate

import (
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
)

// job is one handler attempt running on a node: it finishes at a time the
// workload's payload decides, with the outcome drawn when it started.
type job struct {
	nd      *simNode
	gen     int // the node's incarnation that started it
	run     node.Run
	out     shard.Outcome
	dur     time.Duration // how long the handler runs once it has a slot
	started bool          // has a worker slot (false: queued behind others)
	done    bool          // reported (or aborted and reported)
}

// errViolation stops a drive once the checker found a broken invariant.
var errViolation = errors.New("simulate: invariant broken")

// drain hands the node's Readies to the shared driver (node.Driver, the
// one the runtime's loop uses) until the node has nothing left to do;
// simIO does their IO on the disk, the network, the handlers, the client
// and the checker.
func (nd *simNode) drain() {
	err := nd.drv.Drive()
	switch {
	case err == nil, errors.Is(err, errViolation):
	case errors.Is(err, node.ErrNoSettle):
		nd.s.fail(invLiveness, fmt.Sprintf("%s: %v", nd.id, err))
	default:
		nd.s.fail(invWAL, fmt.Sprintf("%s: %v", nd.id, err))
	}
}

// simIO is a node's node.DriverIO. The disk's writes take no virtual time,
// so a Ready's early messages leave at the same instant as the others, but
// first: their latency draws and deliveries come before the responses'.
type simIO struct{ nd *simNode }

func (io simIO) Now() time.Time { return io.nd.now() }

func (io simIO) Send(envs []node.Envelope) {
	nd := io.nd
	// The network copies each envelope into its delivery: the node
	// reuses the Ready's arrays once it is advanced.
	for i := range envs {
		nd.s.net.send(nd.idx, nd.s.peerIndex(envs[i].To), message{env: &envs[i]})
	}
}

func (io simIO) Gossip(msgs []node.Message) {
	for _, m := range msgs {
		io.nd.s.gossip(io.nd.idx, m)
	}
}

// Persist appends the Ready's batch to the disk and syncs it when asked.
func (io simIO) Persist(b *wal.Batch, sync bool) error {
	nd := io.nd
	if len(b.Updates)+len(b.OutboxPut)+len(b.OutboxDel)+len(b.MetaPut) > 0 {
		if err := nd.log.Append(b); err != nil {
			return fmt.Errorf("the Node's batch was refused by the WAL: %w", err)
		}
		nd.s.hashPersist(nd.idx, b)
	}
	if sync && !nd.s.cfg.bugNoSync {
		if err := nd.log.Sync(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		nd.s.st.syncs++
	}
	return nil
}

// Start shows the checker the Ready's changes (before the runs they
// explain), then starts and aborts handler jobs and makes webhook calls.
func (io simIO) Start(rd *node.Ready) {
	nd := io.nd
	nd.s.chk.changes(nd, rd.Changes)
	for _, r := range rd.Run {
		nd.startJob(r)
	}
	for _, t := range rd.Abort {
		nd.abortJob(t)
	}
	for _, j := range rd.Notify {
		nd.deliver(j)
	}
}

// Deliver sends the replies back to the client.
func (io simIO) Deliver(rd *node.Ready) error {
	for _, r := range rd.Replies {
		io.nd.replyTo(r)
	}
	if io.nd.s.viol != nil {
		return errViolation
	}
	return nil
}

func (nd *simNode) replyTo(r node.Reply) {
	req, ok := nd.reqs[r.Req]
	if !ok {
		return
	}
	delete(nd.reqs, r.Req)
	nd.s.net.send(nd.idx, nd.s.net.client(), message{reply: &response{req: req, node: nd.idx, sent: nd.s.now, reply: r}})
}

// startJob starts a handler for a committed lease. The payload says how
// long it runs and how likely it fails; an attempt longer than the task's
// timeout ends as a timed-out failure at the timeout.
func (nd *simNode) startJob(r node.Run) {
	s := nd.s
	s.chk.run(nd, r)
	s.hashRun(nd.idx, r)
	s.st.runs++
	if r.External && nd.hub != nil {
		nd.hub.take(r) // a worker runs it (workers.go)
		return
	}
	b := decodeBehaviour(r.Payload)
	o := shard.Outcome{Task: r.Task, Round: r.Round, OK: true, Result: r.Payload}
	if s.rng.IntN(1000) < int(b.failPM) {
		o = shard.Outcome{Task: r.Task, Round: r.Round, Error: "simulated failure",
			Permanent: s.rng.IntN(1000) < int(b.permPM)}
	}
	d := b.dur
	if nd.slowFactor > 1 {
		d *= time.Duration(nd.slowFactor)
	}
	if r.Timeout > 0 && d > r.Timeout {
		d = r.Timeout
		o = shard.Outcome{Task: r.Task, Round: r.Round, Error: "timed out", TimedOut: true}
	}
	o.Took = d
	j := &job{nd: nd, gen: nd.gen, run: r, out: o, dur: d}
	nd.jobs[r.Task] = j
	nd.queue = append(nd.queue, j)
	nd.startQueued()
}

// startQueued gives queued jobs the node's free worker slots, in order, as
// the runtime's worker pool does: the Node may hold leases beyond its slots
// (lease-ahead), and those wait here.
func (nd *simNode) startQueued() {
	for nd.active < nd.s.cfg.Slots && len(nd.queue) > 0 {
		j := nd.queue[0]
		nd.queue = nd.queue[1:]
		if j.done {
			continue
		}
		j.started = true
		nd.active++
		nd.s.after(j.dur, func() { nd.complete(j) })
	}
}

// abortJob cancels a running handler of r's round (its task was canceled,
// or its lease expired): it returns at once with the context's error,
// which the owner will refuse. A job of another round is left running.
func (nd *simNode) abortJob(r node.RunRef) {
	if nd.hub != nil {
		nd.hub.abort(r)
	}
	j := nd.jobs[r.Task]
	if j == nil || j.done || j.run.Round != r.Round {
		return
	}
	j.out = shard.Outcome{Task: j.run.Task, Round: j.run.Round, Error: "context canceled"}
	nd.s.after(0, func() { nd.complete(j) })
}

// complete reports a handler's outcome to its node (held while paused,
// lost with a crash).
func (nd *simNode) complete(j *job) {
	nd.input(j.gen, func() {
		if j.done {
			return
		}
		j.done = true
		if j.started {
			nd.active--
		}
		if nd.jobs[j.run.Task] == j {
			delete(nd.jobs, j.run.Task)
		}
		defer nd.startQueued()
		err := nd.n.Report(j.out)
		nd.s.chk.reported(nd, j, err)
	})
}

// behaviour is what a task's payload tells the simulated handler.
type behaviour struct {
	dur    time.Duration // run time of each attempt
	failPM uint16        // per-mille chance an attempt fails
	permPM uint16        // per-mille chance a failure is permanent
}

// encode returns the payload of a task: 4 bytes of duration in µs, 2 of
// failure and 2 of permanence per mille, then the task's index, so that
// results are distinct.
func (b behaviour) encode(i int) []byte {
	us := uint32(b.dur / time.Microsecond)
	return fmt.Appendf([]byte{byte(us), byte(us >> 8), byte(us >> 16), byte(us >> 24),
		byte(b.failPM), byte(b.failPM >> 8), byte(b.permPM), byte(b.permPM >> 8)}, "%d", i)
}

func decodeBehaviour(p []byte) behaviour {
	if len(p) < 8 {
		return behaviour{dur: time.Millisecond}
	}
	us := uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24
	return behaviour{dur: time.Duration(us) * time.Microsecond,
		failPM: uint16(p[4]) | uint16(p[5])<<8, permPM: uint16(p[6]) | uint16(p[7])<<8}
}
