package simulate

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// requestTimeout is how long the client waits for a reply before it sends
// the request again (to the group's current route).
const requestTimeout = 2 * time.Second

type opKind uint8

const (
	opSubmit opKind = iota + 1
	opCancel
	opSchedSet
	opSchedPause
	opSchedResume
	opSchedDelete
	opRetry
	opSchedUpdate
)

// op is one client operation, retried until it gets an answer. A submit's
// retries carry the same group id, so they are idempotent by construction.
type op struct {
	kind   opKind
	spec   *shard.GroupSpec // submit
	group  shard.GroupID
	task   shard.TaskID  // cancel, retry: "" for the whole group
	key    string        // retry: its idempotency key (the op's sends are one retry)
	repeat bool          // a deliberate repeat of an acknowledged keyed submit
	first  time.Duration // first send
	try    int           // sends so far; a reply or timeout of an older try is stale
	done   bool
	plan   *arrival  // what to do after the acknowledgement (submit)
	sched  *schedRec // schedule commands
	// A broadcast is expanded once, by the first node its request reaches
	// (the runtime's backend does it once per HTTP request): every copy and
	// retry carries that expansion, or that node's refusal.
	expanded  bool
	expandErr error
}

// request is one send of an op (client -> node).
type request struct {
	op  *op
	try int
}

// response is a node's answer (node -> client).
type response struct {
	req   *request
	node  int
	sent  time.Duration // when the node sent it
	reply node.Reply
}

// client submits the workload's groups, repeats keyed ones, cancels and
// retries some (opRetry: a request to run FAILED and CANCELED tasks again),
// and sends every request again until it is answered.
type client struct {
	s        *sim
	arrivals []arrival
	scheds   []*schedPlan
	next     int // next arrival to submit (sequential workloads)
	inflight int // ops not done, plus planned ones not yet issued
	retries  int
	rejected int
	// abandoned counts ops given up on a partition no replica survived.
	abandoned int
}

func newClient(s *sim, w *workload) *client {
	return &client{s: s, arrivals: w.arrivals, scheds: w.scheds}
}

// start schedules the arrivals (or the first one, for a sequential
// workload).
func (c *client) start(sequential bool) {
	c.inflight += len(c.arrivals)
	for _, p := range c.scheds {
		c.inflight++ // until its deletion is issued
		c.s.at(p.at, func() { c.schedOp(c.s.chk.schedule(p), opSchedSet) })
	}
	if sequential {
		c.submitNext()
		return
	}
	for i := range c.arrivals {
		a := &c.arrivals[i]
		c.s.at(a.at, func() { c.submit(a) })
	}
}

func (c *client) submitNext() {
	if c.next < len(c.arrivals) {
		a := &c.arrivals[c.next]
		c.next++
		c.s.after(time.Millisecond, func() { c.submit(a) })
	}
}

// groupDone is called by the checker when every task of g is terminal.
func (c *client) groupDone(*groupRec) {
	if c.s.wl.sequential {
		c.submitNext()
	}
}

func (c *client) submit(a *arrival) {
	o := &op{kind: opSubmit, spec: a.spec, group: a.spec.ID, first: c.s.now, plan: a}
	if !unexpanded(a.spec) {
		c.s.chk.register(a.spec) // a broadcast registers once expanded (simNode.expand)
	}
	c.send(o)
}

// idle reports whether every operation, planned ones included, is done.
func (c *client) idle() bool { return c.inflight == 0 }

// send sends o to the node its group routes to, and arms its timeout.
// An op on a partition the recovery found no replica of is abandoned.
func (c *client) send(o *op) {
	if c.s.chk.totalLost(o.group) {
		c.abandon(o)
		return
	}
	o.try++
	try := o.try
	c.s.net.send(c.s.net.client(), c.s.route(o.group), message{req: &request{op: o, try: try}})
	c.s.after(requestTimeout, func() {
		if !o.done && o.try == try {
			c.retries++
			c.send(o)
		}
	})
}

// receive takes a node's reply. Every successful submit reply, duplicates
// included, goes to the checker (idempotency).
func (c *client) receive(_ int, r *response) {
	o := r.req.op
	if o.kind == opSubmit && r.reply.Err == nil {
		c.s.chk.submitted(o, r)
	}
	if o.done || r.req.try != o.try {
		return
	}
	if err := r.reply.Err; err != nil {
		if errors.Is(err, node.ErrUnavailable) || errors.Is(err, node.ErrStopped) {
			o.try++ // the pending timeout is stale now
			c.retries++
			c.s.after(50*time.Millisecond+time.Duration(c.s.rng.Int64N(int64(100*time.Millisecond))), func() {
				if !o.done {
					c.send(o)
				}
			})
			return
		}
		c.rejected++
	}
	o.done = true
	c.inflight--
	if o.kind == opSubmit && !o.repeat && r.reply.Err == nil {
		c.afterAck(o)
	}
	if o.sched != nil {
		c.schedAck(o, r.reply.Err)
	}
}

// abandon gives o up: its partition is a total loss (lostunsafe.go),
// nobody answers it again. Its group is no longer waited for, and a
// schedule's plan ends.
func (c *client) abandon(o *op) {
	o.done = true
	c.inflight--
	c.abandoned++
	switch {
	case o.kind == opSubmit && !o.repeat:
		if g := c.s.chk.groups[o.group]; g != nil {
			c.s.chk.dropTotal(g) // (calls groupDone, once)
		} else if c.s.wl.sequential {
			c.submitNext()
		}
	case o.sched != nil && o.kind != opSchedDelete:
		c.inflight-- // the plan's own count (schedAck)
	}
}

// schedOp issues a schedule command, routed (like a group) to the node
// serving the schedule's partition.
func (c *client) schedOp(r *schedRec, k opKind) {
	c.s.chk.schedSent(r, k)
	c.issue(&op{kind: k, group: shard.GroupID(r.id), sched: r, first: c.s.now})
}

// schedAck takes the next step of a schedule's plan: pause, resume,
// delete.
func (c *client) schedAck(o *op, err error) {
	r, p := o.sched, o.sched.plan
	if err != nil && !(errors.Is(err, shard.ErrNotFound) && o.try > 1) {
		if o.kind == opSchedSet || !errors.Is(err, shard.ErrNotFound) {
			c.s.fail(invSched, fmt.Sprintf("%v of schedule %s refused: %v", o.kind, r.id, err))
			return
		}
	}
	c.s.chk.schedAcked(r, o.kind, nil)
	after := func(d time.Duration, k opKind) {
		c.s.after(max(d, time.Millisecond), func() {
			if k == opSchedDelete {
				c.inflight-- // the plan's own count: the delete op holds one now
			}
			c.schedOp(r, k)
		})
	}
	switch {
	case o.kind == opSchedSet && p.updateAfter > 0 && c.s.now+p.updateAfter < p.deleteAt:
		after(p.updateAfter, opSchedUpdate)
	case (o.kind == opSchedSet || o.kind == opSchedUpdate) && p.pauseAfter > 0 && c.s.now+p.pauseAfter < p.deleteAt:
		after(p.pauseAfter, opSchedPause)
	case o.kind == opSchedPause && p.resumeAfter > 0 && c.s.now+p.resumeAfter < p.deleteAt:
		after(p.resumeAfter, opSchedResume)
	case o.kind != opSchedDelete:
		after(p.deleteAt-c.s.now, opSchedDelete)
	}
}

// afterAck plans the repeat, the cancel and the retry the workload asked
// for.
func (c *client) afterAck(o *op) {
	a := o.plan
	if a.repeat > 0 {
		c.inflight++
		c.s.after(a.repeat, func() {
			c.inflight--
			spec := cloneSpec(a.spec)
			c.issue(&op{kind: opSubmit, spec: spec, group: spec.ID, repeat: true, first: c.s.now})
		})
	}
	if a.cancel > 0 {
		c.inflight++
		c.s.after(a.cancel, func() {
			c.inflight--
			c.issue(&op{kind: opCancel, group: a.spec.ID, task: taskAt(a.spec.ID, a.cancelTask), first: c.s.now})
		})
	}
	for i, l := range a.later {
		c.inflight++
		c.s.after(l.after, func() {
			c.inflight--
			o := &op{kind: l.kind, group: a.spec.ID, task: taskAt(a.spec.ID, l.task), first: c.s.now}
			if l.kind == opRetry {
				o.key = fmt.Sprintf("retry-%s-%d", a.spec.ID, i)
			}
			c.issue(o)
		})
	}
}

// taskAt returns the id of task i of group g, "" (the whole group) for
// i < 0.
func taskAt(g shard.GroupID, i int) shard.TaskID {
	if i < 0 {
		return ""
	}
	return shard.TaskIDOf(g, i)
}

func (c *client) issue(o *op) {
	c.inflight++
	c.send(o)
}

// cloneSpec copies a spec so that no two submissions share memory.
func cloneSpec(s *shard.GroupSpec) *shard.GroupSpec {
	c := *s
	c.Tasks = slices.Clone(s.Tasks)
	return &c
}
