package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/handler"
	"github.com/needle-mesh/needle/shard"
)

// job is a lease handed to a worker, with the attempt's context (canceled
// on abort or when the peer stops; the worker adds the timeout when the
// handler starts, so time queued behind other leases does not count).
type job struct {
	run   node.Run
	ctx   context.Context // with the task's trace (withTrace)
	lease trace.Span      // from the lease to the handler's start
}

// runKey names one run of a task.
type runKey struct {
	task  shard.TaskID
	round shard.Round
}

// start queues a committed lease for a worker. The Node bounds the leases
// it holds by its slots and their lease-ahead, which is the queue's size;
// should it hand out more, the rest waits in the loop's overflow (feedJobs)
// rather than block the loop: a loop blocked on a full queue reads no
// outcome, and the workers, blocked on the outcomes it does not read, take
// no job (a restarted peer under load stopped that way for good).
func (p *Peer) start(r node.Run) {
	a := newRunAbort(p.runCtx)
	p.mu.Lock()
	p.cancels[runKey{r.Task, r.Round}] = a
	p.mu.Unlock()
	ctx := p.withTrace(a, r.Trace)
	_, lease := p.runSpan(ctx, "needle.lease", &r)
	j := job{run: r, ctx: ctx, lease: lease}
	if len(p.overflow) == 0 {
		select {
		case p.jobs <- j:
			return
		default:
		}
		st, c := p.node.Stats(), p.node.Counters()
		p.log.Warn("more runs than the job queue holds; the rest wait in the loop", "queue", cap(p.jobs),
			"busy", st.Busy, "running", st.Running, "superseded", st.Superseded, "proposed", st.Proposed,
			"stolen", c.StealsGranted, "steal_asks", c.StealsAsked)
	}
	p.overflow = append(p.overflow, j)
}

// feedJobs moves the runs that overflowed the job queue into it, as far
// as it has room. The loop calls it every iteration: a worker that takes
// a job reports an outcome, which wakes the loop.
func (p *Peer) feedJobs() {
	n := 0
	for _, j := range p.overflow {
		select {
		case p.jobs <- j:
			n++
			continue
		default:
		}
		break
	}
	if n > 0 {
		clear(p.overflow[:n])
		p.overflow = p.overflow[n:]
		if len(p.overflow) == 0 {
			p.overflow = nil
		}
	}
}

// worker runs jobs until ctx ends. Each outcome goes back to the loop.
func (p *Peer) worker(ctx context.Context) {
	defer p.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-p.jobs:
			j.lease.End()
			o := p.run(j)
			aborted := j.ctx.Err() != nil
			p.logOutcome(j.run, o, aborted)
			p.metrics.user.outcome(j.run.Handler, o, aborted)
			if _, span := p.runSpan(j.ctx, "needle.outcome", &j.run); span.IsRecording() {
				p.mu.Lock()
				p.outcomes[runKey{o.Task, o.Round}] = span // ended by report
				p.mu.Unlock()
			}
			select {
			case p.results <- o:
			case <-ctx.Done():
				return
			}
		}
	}
}

// run executes j inside its run span: the handler's ctx carries it.
func (p *Peer) run(j job) shard.Outcome {
	ctx, span := p.runSpan(j.ctx, "needle.run", &j.run)
	span.SetAttributes(attribute.String("needle.peer", p.ID()))
	j.ctx = ctx
	o := p.execute(j)
	if !o.OK {
		span.SetStatus(codes.Error, o.Error)
	}
	span.End()
	return o
}

// execute runs one attempt and turns what the handler did into an outcome.
func (p *Peer) execute(j job) shard.Outcome {
	r := j.run
	o := shard.Outcome{Task: r.Task, Round: r.Round}
	h, ok := p.handlers.Lookup(r.Handler)
	if !ok {
		o.Error = fmt.Sprintf("no handler %q on peer %s", r.Handler, p.ID())
		o.Permanent = true
		return o
	}
	start := time.Now()
	ctx, cancel := withRunDeadline(j.ctx, start.Add(r.Timeout))
	defer cancel()
	j.ctx = ctx
	lw := p.logs.writer(r.Task, r.Round)
	defer p.logs.finish(lw, p.cfg.Retention)
	call := handler.Call{Task: r.Task, Round: r.Round, Attempt: r.Attempt + 1, Payload: r.Payload, Inputs: r.Inputs, Shard: r.Shard, Shards: r.Shards, Trace: traceparent(j.ctx),
		Log: newRunLogger(lw)}.WithLogWriter(lw)
	res, err := safeCall(j.ctx, h, call)
	o.Took = time.Since(start)
	p.metrics.runTime(r.Handler, o.Took)
	if err == nil && j.ctx.Err() == nil {
		res = asJSON(res)
		if limit := p.cfg.MaxResult; limit > 0 && len(res) > limit {
			// Refused whole, never truncated: a cut result is not JSON, and a
			// dependent would get a wrong input.
			o.Error = fmt.Sprintf("handler %q: result of %d bytes is over the limit of %d", r.Handler, len(res), limit)
			o.Permanent = true
			return o
		}
		o.OK = true
		o.Result = res
		return o
	}
	if err == nil {
		err = j.ctx.Err()
	}
	o.Error = err.Error()
	o.Permanent = handler.IsPermanent(err)
	if errors.Is(j.ctx.Err(), context.DeadlineExceeded) {
		o.TimedOut = true
		o.Error = fmt.Sprintf("timed out after %v: %v", r.Timeout, err)
	}
	return o
}

// safeCall runs a handler, turning a panic into a permanent failure whose
// value and stack go to the attempt's task log.
func safeCall(ctx context.Context, h handler.Func, c handler.Call) (res []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(c.LogWriter(), "panic: %v\n\n%s", v, debug.Stack())
			err = handler.Permanent(fmt.Errorf("handler panicked: %v", v))
		}
	}()
	return h(ctx, c)
}

// asJSON returns a handler's result as JSON: nil is null, and bytes that are
// not JSON become a JSON string.
func asJSON(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
