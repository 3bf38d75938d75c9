package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/p2p"
	"github.com/needle-mesh/needle/shard"
	"github.com/needle-mesh/needle/wal"
	"go.opentelemetry.io/otel/trace"
)

// command is one message into the loop's inbox: a request answered by a
// Reply once applied (do, reply), or a function run on the loop goroutine
// (query: reads, waiters, the drain).
type command struct {
	do    func(n *node.Node, req uint64)
	reply chan callReply
	// view: the reply carries the view of the first task the submission
	// created or found, when that task is terminal by then (SubmitWait):
	// a submission that waits for its task needs no trip through the loop
	// to park a waiter and another to read the task.
	view bool

	query func(n *node.Node)
}

// callReply is a call's reply, with the view its command asked for (nil
// when not asked, or when the task was not terminal at the reply).
type callReply struct {
	node.Reply
	view *shard.TaskView
	// routed: the loop answered where the request goes instead (to, with
	// its features; none known: Err), proposing nothing (submitHere).
	routed   bool
	to       string
	features uint64
}

// answerNow answers call req from the loop at once, not at a Ready.
func (p *Peer) answerNow(req uint64, r callReply) {
	if c, ok := p.calls[req]; ok {
		delete(p.calls, req)
		r.Req = req
		c.reply <- r
	}
}

// pendingCall is a call waiting in the loop for its reply.
type pendingCall struct {
	reply chan callReply
	view  bool
}

const (
	inboxBatch = 4096        // commands taken per loop iteration
	sweepEvery = time.Second // waiter cleanup, metrics, dials
	// sweepEarly is how early a sweep may run to share a wakeup with the
	// node's (an idle peer wakes once per heartbeat, not twice): half the
	// period, so that the first wakeup of the node's within it pulls the
	// sweeps into the node's phase for good (with a quarter, a sweep more
	// than a quarter of a second away from the heartbeats never met them).
	sweepEarly  = sweepEvery / 2
	resultBatch = 4096
	// maxHeld bounds the unsynced changes Persist holds for the next
	// synced batch; past it they are written without a sync.
	maxHeld = 4096
	// idleSyncMin is how many unsynced changes held make a loop woken by
	// its timer alone (no input) write and sync them (syncHeld): at least
	// a handful of partitions' commit indexes, as many Readies of a burst
	// or of replicas moving leave behind. Written with the next request
	// instead, they made its sync several times longer (the first request
	// to a fresh peer: 12 KB, 1-8 ms instead of 0.6). A steady trickle of
	// requests holds one or two, and pays no sync of its own for them.
	idleSyncMin = 32
)

// loop owns the Node and the WAL. Each iteration takes what arrived (client
// commands, handler outcomes, the clock), then hands every Ready to the
// WAL (one batch, one sync), the workers and the waiting clients. Between
// inputs it sleeps until the Node's next deadline (Node.NextDeadline) or
// its own next sweep, whichever comes first: an idle peer wakes for its
// heartbeats, not every timer slot, and sweeps in the same wakeups.
func (p *Peer) loop(ctx context.Context) error {
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	sweepAt := time.Now().Add(sweepEvery)
	var lost <-chan string // nil (never ready) without a disconnecter
	if d, ok := p.tr.(disconnecter); ok {
		lost = d.Disconnected()
	}
	if err := p.drainReady(); err != nil {
		return err
	}
	// What starting wrote unsynced (a fresh mesh commits the empty entry of
	// every partition it bootstraps: a commit index each) is synced now,
	// not with the first request.
	if err := p.syncHeld(1); err != nil {
		return err
	}
	for {
		idle := false
		p.feedJobs()
		wake.Reset(max(time.Until(earliest(p.node.NextDeadline(), sweepAt)), 0))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c := <-p.inbox:
			p.node.Tick(time.Now())
			p.handle(c)
			p.drainInbox()
		case o := <-p.results:
			p.node.Tick(time.Now())
			p.report(o)
			p.drainInbox()
		case f := <-p.tr.Inbound():
			p.node.Tick(time.Now())
			p.stepFrame(f)
			p.drainInbox()
		case f := <-p.tr.Gossip():
			p.node.Tick(time.Now())
			p.stepFrame(f)
		case o := <-p.notifier.out:
			p.node.Tick(time.Now())
			p.notifyDone(o)
			p.drainInbox()
		case id := <-lost:
			p.node.Tick(time.Now())
			p.node.Disconnected(id)
		case <-wake.C:
			p.node.Tick(time.Now())
			idle = true
		}
		if now := time.Now(); !now.Before(sweepAt.Add(-sweepEarly)) {
			sweepAt = now.Add(sweepEvery)
			p.waiters.sweep(p.node, p.tr.ID())
			// Short of disk or memory, the schedules it owns fire
			// nothing (admit.go); read once a sweep, and at the
			// submissions and Raft appends in between.
			p.node.SetNoNewWork(p.admit(now) != nil)
			p.metrics.observe(p.node)
			p.dialMembers(ctx)
		}
		p.checkDrained()
		if err := p.drainReady(); err != nil {
			return err
		}
		if idle {
			if err := p.syncHeld(idleSyncMin); err != nil {
				return err
			}
		}
		if err := p.node.Fatal(); err != nil {
			return err
		}
	}
}

// drainInbox takes what else is waiting, bounded, so one iteration batches
// many commands into one WAL write.
func (p *Peer) drainInbox() {
	for range inboxBatch {
		select {
		case c := <-p.inbox:
			p.handle(c)
		case o := <-p.results:
			p.report(o)
		case f := <-p.tr.Inbound():
			p.stepFrame(f)
		case o := <-p.notifier.out:
			p.notifyDone(o)
		default:
			return
		}
	}
}

func (p *Peer) report(o shard.Outcome) {
	span := p.runEnded(runKey{o.Task, o.Round})
	err := p.node.Report(o)
	p.metrics.outcome(o, err)
	if span != nil {
		endOutcome(span, o, err)
	}
}

// runEnded forgets the run k whose handler returned, and returns its
// outcome span (nil when not traced). Only that run's context is
// canceled: a newer round of the task may be running here too (it
// superseded this one), and this one's end must not stop it.
func (p *Peer) runEnded(k runKey) trace.Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.cancels[k]; ok {
		a.abort()
		delete(p.cancels, k)
	}
	span := p.outcomes[k]
	delete(p.outcomes, k)
	return span
}

func (p *Peer) handle(c command) {
	p.taken++
	if c.do == nil {
		c.query(p.node)
		return
	}
	req := p.node.NextRequest()
	p.calls[req] = pendingCall{c.reply, c.view}
	c.do(p.node, req)
}

// drainReady hands the node's Readies to the shared driver (node.Driver)
// until the node has nothing left; loopIO does their IO in the contract's
// order: early Raft messages, the WAL (one batch, one sync), the other
// messages, handlers, replies and waiters, then Advance.
func (p *Peer) drainReady() error {
	return p.driver.Drive()
}

// loopIO is the loop's node.DriverIO: the WAL, the libp2p host, the
// handlers and workers, the waiting clients.
type loopIO struct{ p *Peer }

func (io loopIO) Now() time.Time { return time.Now() }

// Send hands messages to the transport. A full queue drops the message:
// Raft retransmits and the outbox re-sends.
func (io loopIO) Send(envs []node.Envelope) {
	for i := range envs {
		io.p.sendOne(envs[i].To, &envs[i].Msg)
	}
}

func (io loopIO) Gossip(msgs []node.Message) {
	for i := range msgs {
		b, err := node.AppendMessage(nil, &msgs[i])
		if err == nil {
			err = io.p.tr.Publish(b)
		}
		if err != nil {
			io.p.log.Debug("gossip", keyErr, err)
		}
	}
}

// Persist writes a batch that must be synced at once, with the unsynced
// batches held before it. A batch that needs no sync (a commit index,
// deleted outbox records) is held in memory and joined to the next one
// (wal.Batch.Join): a crash before then loses it, as it may lose any
// unsynced write, and the log pays one write and one sync per synced Ready
// instead of a write for each Ready and a sync before the write that
// follows an unsynced one (wal/badgerwal's rule against rotations).
func (io loopIO) Persist(b *wal.Batch, sync bool) error {
	p := io.p
	if !sync {
		p.held.Join(b)
		if p.held.Size() < maxHeld {
			return nil
		}
		return p.flushHeld()
	}
	if p.held.Size() > 0 {
		p.held.Join(b)
		b = &p.held
	}
	if b.Size() > 0 {
		err := p.append(b)
		p.held.Reset()
		if err != nil {
			return err
		}
	}
	return p.sync()
}

// sync makes every write to the WAL durable, timed for the metrics.
func (p *Peer) sync() error {
	start := time.Now()
	if err := p.wal.Sync(); err != nil {
		return fmt.Errorf("peer: wal sync: %w", err)
	}
	p.metrics.sync(time.Since(start))
	return nil
}

// syncHeld writes and syncs the unsynced changes Persist holds when there
// are at least min of them (and any).
func (p *Peer) syncHeld(min int) error {
	if n := p.held.Size(); n == 0 || n < min {
		return nil
	}
	if err := p.flushHeld(); err != nil {
		return err
	}
	return p.sync()
}

// Start hands runs to the worker pool (external ones to the worker hub),
// stops aborted tasks and starts the webhook calls.
func (io loopIO) Start(rd *node.Ready) {
	p := io.p
	var ext []node.Run
	for _, r := range rd.Run {
		if r.External {
			ext = append(ext, r)
			continue
		}
		p.start(r)
	}
	if len(ext) > 0 {
		p.hub.deliver(p.node, ext)
	}
	p.abort(rd.Abort)
	if len(rd.Abort) > 0 {
		p.hub.abort(p.node, rd.Abort)
	}
	p.startNotify(rd.Notify)
}

// Deliver answers the waiting calls and wakes the waiters.
func (io loopIO) Deliver(rd *node.Ready) error {
	p := io.p
	for _, r := range rd.Replies {
		if c, ok := p.calls[r.Req]; ok {
			delete(p.calls, r.Req)
			cr := callReply{Reply: r}
			if c.view && r.Err == nil && len(r.Submit.Tasks) > 0 {
				cr.view = terminalView(p.node, r.Submit.Tasks[0])
			}
			c.reply <- cr
		}
	}
	p.waiters.wake(p.node, rd.Changes)
	p.metrics.ready(rd)
	return nil
}

func (p *Peer) abort(runs []node.RunRef) {
	if len(runs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range runs {
		if a, ok := p.cancels[runKey{r.Task, r.Round}]; ok {
			a.abort()
		}
	}
}

// flushHeld appends the held unsynced batches without a sync.
func (p *Peer) flushHeld() error {
	if p.held.Size() == 0 {
		return nil
	}
	err := p.append(&p.held)
	p.held.Reset()
	return err
}

// append writes a Ready's batch. A batch over the WAL's atomic write limit
// is written one partition update at a time: each update stays atomic and
// in order (entries before the hard state that commits them), and a crash
// between two of them is the same as an unsynced tail, which Raft repairs.
func (p *Peer) append(b *wal.Batch) error {
	err := p.wal.Append(b)
	if !errors.Is(err, wal.ErrBatchTooBig) {
		if err != nil {
			return fmt.Errorf("peer: wal append: %w", err)
		}
		return nil
	}
	for _, u := range b.Updates {
		if err := p.wal.Append(&wal.Batch{Updates: []wal.Update{u}}); err != nil {
			return fmt.Errorf("peer: wal append of partition %d (split batch): %w", u.Partition, err)
		}
	}
	rest := &wal.Batch{OutboxPut: b.OutboxPut, OutboxDel: b.OutboxDel, MetaPut: b.MetaPut}
	if err := p.wal.Append(rest); err != nil {
		return fmt.Errorf("peer: wal append (split batch): %w", err)
	}
	return nil
}

// stepFrame decodes a message from another peer and steps the node. A
// malformed or refused message is logged and dropped: the peer stays up.
func (p *Peer) stepFrame(f p2p.Frame) {
	m, err := node.DecodeMessage(f.Data)
	if err == nil && m.Type == node.MsgRaft {
		m.Raft = p.dropAppends(m.Raft)
	}
	if err == nil {
		err = p.node.Step(f.From, m)
	}
	if err == nil {
		p.noteForgotten()
		return
	}
	p.metrics.refused.Inc()
	if errors.Is(err, node.ErrUnheard) {
		// A peer whose heartbeat has not come yet: for a moment after a
		// start, every restart (its heartbeat was asked for).
		p.log.Debug("message refused", keyPeer, f.From, keyErr, err)
		return
	}
	if errors.Is(err, node.ErrLogBehind) {
		p.logBehind(f.From, err)
	}
	// A host holding the swarm key can send a thousand bad messages a
	// second: log a few, count the rest.
	if ok, dropped := p.refusals.allow(time.Now()); ok {
		attrs := []any{keyPeer, f.From, keyErr, err}
		if dropped > 0 {
			attrs = append(attrs, "suppressed", dropped)
		}
		p.log.Warn("message refused", attrs...)
	}
}

// forgottenHelp is what a forgotten peer should do, in its log line and in
// its readiness error.
const forgottenHelp = "this peer was removed from the mesh for good (needle forget), and its id never rejoins: " +
	"stop it, delete its data dir (identity.key included), and start it again with --join to serve as a new peer " +
	"(docs/operations.md, Removing a host for good)"

// noteForgotten logs, once a minute, that another peer said this one was
// forgotten (node.ForgottenBy): it serves nothing and never becomes ready.
func (p *Peer) noteForgotten() {
	by := p.node.ForgottenBy()
	if by == "" || time.Since(p.forgotLogged) < time.Minute {
		return
	}
	p.forgotLogged = time.Now()
	p.log.Error(forgottenHelp, keyPeer, by)
}

// logBehind logs, now and then, that this replica lost what it
// acknowledged (node.ErrLogBehind): not a bad message, and its partitions
// stay unavailable here until it is rebuilt.
func (p *Peer) logBehind(from string, err error) {
	if ok, _ := p.behind.allow(time.Now()); !ok {
		return
	}
	p.log.Error("this peer's log is behind what it acknowledged: its data dir was restored from an older copy, or lost "+
		"synced writes; recover it as a lost disk: on a live peer run needle forget --force "+p.tr.ID()+", stop this peer, "+
		"delete its data dir (identity.key included), and start it again with --join (docs/operations.md, A lost disk)",
		keyPeer, from, keyErr, err)
}

// dialMembers connects to members this host has no connection to, using
// the addresses they gossip: peers that joined through the same seed learn
// of each other this way. At most one dial per peer is in flight. A
// transport without connections (in memory) needs none.
func (p *Peer) dialMembers(ctx context.Context) {
	d, ok := p.tr.(dialer)
	if !ok {
		return
	}
	connected := map[string]bool{}
	for _, id := range d.Connected() {
		connected[id] = true
	}
	for _, m := range p.node.Members() {
		if m.ID == p.tr.ID() || connected[m.ID] || len(m.Addrs) == 0 || m.State == node.PeerDead {
			continue
		}
		if g, ok := d.(gated); ok && !g.Allowed(m.ID) {
			// Not in --members: the gater would refuse the dial, once a
			// second until the failure detector holds the peer dead.
			continue
		}
		if _, busy := p.dialing.LoadOrStore(m.ID, true); busy {
			continue
		}
		p.wg.Add(1)
		go func(id string, addrs []string) {
			defer p.wg.Done()
			defer p.dialing.Delete(id)
			for _, a := range addrs {
				dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := d.Connect(dctx, a)
				cancel()
				if err == nil {
					return
				}
			}
		}(m.ID, m.Addrs)
	}
}

func (p *Peer) sendOne(to string, m *node.Message) {
	r, reuse := p.tr.(reuser)
	var buf []byte
	if reuse {
		buf = r.Buffer()
	}
	b, err := node.AppendMessage(buf, m)
	if err != nil {
		p.log.Error("encode message", keyPeer, to, keyErr, err)
		return
	}
	if reuse {
		err = r.SendReusing(to, b)
	} else {
		err = p.tr.Send(to, b)
	}
	if err != nil {
		p.metrics.dropped.Inc()
	}
}

// checkDrained closes p.drained once a draining node is done.
func (p *Peer) checkDrained() {
	if !p.node.Draining() {
		return
	}
	select {
	case <-p.drained:
		return
	default:
	}
	if done, _ := p.node.Drained(); done {
		close(p.drained)
	}
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
