package peer

import (
	"context"
	"crypto/sha256"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// Tracing (OpenTelemetry), the runtime's side only: the Node and the shards
// carry a group's trace as the string it is (shard.GroupSpec.Trace, Run.Trace,
// Grant.Trace) and import nothing of OpenTelemetry.
//
// A submission's trace is the W3C traceparent of its submit span, a child
// of the traceparent the client sent (api: the traceparent header). Every
// later span of the group's tasks, on whichever peer, is a child of it:
//
//	needle.submit (the peer the client called)
//	├── needle.forward (to the owner, when the peer is not it)
//	│   └── needle.commit (on the owner: proposed, committed, applied)
//	├── needle.commit (when the peer is the owner)
//	└── per attempt, on the peer that runs it:
//	    needle.lease (leased, waiting for a slot) → needle.run (the handler;
//	    its ctx, exec's TRACEPARENT, http's traceparent header) →
//	    needle.outcome (handed to the owner)
//
// With no TracerProvider a run starts no span and costs at most the parse
// of its traceparent (none for a shorter trace id); the client's own
// traceparent still reaches the handlers.

// tracerName names the instrumentation scope of needle's spans.
const tracerName = "github.com/needle-mesh/needle/peer"

// traceparentLen is the length of a version 00 traceparent; later versions
// may be longer.
const traceparentLen = 55

// traceContext is the W3C trace context propagator (traceparent,
// tracestate).
var traceContext = propagation.TraceContext{}

// newTracer returns the tracer of tp, or a no-op one when tp is nil.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// nonRecording is a span that records nothing: runs use it when no
// TracerProvider is set, so that a run pays for no attributes or spans.
var nonRecording = trace.SpanFromContext(context.Background())

// runSpan starts the span name of run r under ctx, when spans are recorded.
func (p *Peer) runSpan(ctx context.Context, name string, r *node.Run) (context.Context, trace.Span) {
	if !p.tracing {
		return ctx, nonRecording
	}
	return p.tracer.Start(ctx, name, taskAttrs(r))
}

// startSpan starts a span named name under ctx's span, or else under the
// group trace tr.
func (p *Peer) startSpan(ctx context.Context, tr, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return p.tracer.Start(p.withTrace(ctx, tr), name, opts...)
}

// withTrace returns ctx with the span context of a group's trace as its
// remote parent, unless ctx already has a span. A traceparent is taken as
// it is; when this peer records spans, another non-empty trace (a schedule
// firing's group id, an id a client chose) becomes a trace id derived from
// it, so that the spans of one group are still one trace.
func (p *Peer) withTrace(ctx context.Context, tr string) context.Context {
	if tr == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if len(tr) >= traceparentLen { // shorter is no traceparent: spare the parse
		c := traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tr})
		if trace.SpanContextFromContext(c).IsValid() {
			return c
		}
	}
	if !p.tracing {
		return ctx
	}
	sum := sha256.Sum256([]byte(tr))
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID(sum[:16]), SpanID: trace.SpanID(sum[16:24]), Remote: true,
	})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// isTraceparent reports whether tr is a valid W3C traceparent.
func isTraceparent(tr string) bool {
	c := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": tr})
	return trace.SpanContextFromContext(c).IsValid()
}

// traceparent returns the W3C traceparent of ctx's span, "" when it has
// none.
func traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// taskAttrs are the attributes naming a run.
func taskAttrs(r *node.Run) trace.SpanStartEventOption {
	return trace.WithAttributes(
		attribute.String("needle.task", string(r.Task)),
		attribute.String("needle.group", string(r.Task.Group())),
		attribute.String("needle.handler", r.Handler),
		attribute.Int64("needle.round", int64(r.Round)),
		attribute.Int("needle.attempt", r.Attempt+1),
	)
}

// endSpan ends span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endOutcome records how a run ended on its outcome span and ends it.
func endOutcome(span trace.Span, o shard.Outcome, err error) {
	result := "succeeded"
	switch {
	case err != nil:
		result = "stale"
	case o.TimedOut:
		result = "timed_out"
	case !o.OK:
		result = "failed"
	}
	span.SetAttributes(attribute.String("needle.result", result), attribute.Bool("needle.permanent", o.Permanent))
	if !o.OK {
		span.SetStatus(codes.Error, o.Error)
	}
	span.End()
}
