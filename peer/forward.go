package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Requests of the HTTP API reach the owner of their group's partition: a
// peer that does not serve it forwards the request over the mesh
// (transport.Call, on the long-lived /needle/rpc/1.0.0 streams of
// libp2p), and the owner runs it as a local request. A forwarded request
// is never forwarded again, so a stale view of who leads cannot loop.
//
// Each request is its own type (calls.go), which knows how the owner
// serves it and what it answers; routed is route-or-forward for all of
// them, serveCall the owner's side. On the wire a request is a JSON object
// opening with its version and op, then its fields; its answer a JSON
// object of its fields and the error (rpcError). That is the previous
// release's encoding, whose one request type held every op's fields.

// rpcVersion is the first field of every forwarded request.
const rpcVersion = 1

// rpcHeader opens every forwarded request.
type rpcHeader struct {
	V     int    `json:"v,omitempty"`     // rpcVersion; written by encodeCall, first
	Op    string `json:"op,omitempty"`    // written by encodeCall, second
	Trace string `json:"trace,omitempty"` // the caller's span (W3C traceparent), parent of the owner's spans
}

func (h *rpcHeader) head() *rpcHeader { return h }

// meshReq is a request of the mesh: a pointer to a struct embedding
// rpcHeader, named by its op.
type meshReq interface {
	head() *rpcHeader
	op() string
}

// meshCall is a request served on its owner (or the peer asked) with an
// answer of type A.
type meshCall[A any] interface {
	meshReq
	serve(ctx context.Context, p *Peer) (A, error)
}

// rpcAnswer is a pointer to an answer: a struct embedding rpcError.
type rpcAnswer[A any] interface {
	*A
	answerErr() *rpcError
}

func (e *rpcError) answerErr() *rpcError { return e }

// route returns the peer to forward a request for group g to, or "" to
// serve it here, with the features that peer advertised (node.Features).
func (p *Peer) route(ctx context.Context, g shard.GroupID) (string, uint64, error) {
	var owner string
	var features uint64
	err := p.read(ctx, func(n *node.Node) error {
		owner = n.Owner(g)
		if owner == "" {
			return n.Unavailable(g) // why: an election, the mesh forming, ...
		}
		features = n.MemberFeatures(owner)
		return nil
	})
	if err != nil || owner == p.tr.ID() {
		return "", 0, err
	}
	return owner, features, nil
}

// routed serves req, a request about group g, here when this peer owns g's
// partition and on its owner otherwise, retrying while that is
// unavailable (retryUnavailable); a partition that lost the majority of
// its voters is a 503 that says so (whyUnavailable).
func routed[A any, PA rpcAnswer[A]](ctx context.Context, p *Peer, g shard.GroupID, req meshCall[A]) (A, error) {
	return routedWith[A, PA](ctx, p, g, req, nil)
}

// routedWith is routed with a step before each try (nil: none) that may
// change req.
func routedWith[A any, PA rpcAnswer[A]](ctx context.Context, p *Peer, g shard.GroupID, req meshCall[A], before func()) (A, error) {
	var out A
	err := retryUnavailable(ctx, func() error {
		if before != nil {
			before()
		}
		to, features, err := p.route(ctx, g)
		switch {
		case err != nil:
			return err
		case to == "":
			out, err = req.serve(ctx, p)
			return mapErr(err)
		}
		if f, ok := req.(featured); ok {
			if bit, what := f.feature(); features&bit != bit {
				// An older owner does not know the op: say what it takes.
				return mapErr(errors.Join(node.ErrUnavailable, &node.UpgradeError{Partition: p.node.PartitionOf(g), Peer: to, What: what}))
			}
		}
		out, err = forwardSpan[A, PA](ctx, p, to, wireForm(req, features))
		return p.forwardUnavailable(g, to, err)
	})
	return out, p.whyUnavailable(g, err)
}

// featured is a request that only an owner advertising a feature serves
// (every bit of bit; 0: this one needs none).
type featured interface {
	feature() (bit uint64, what string)
}

// concurrencyFeature is the feature a group spec needs of its owner: one
// with a concurrency is refused by an older owner's binary decoding, and
// its JSON form would lose the bound.
func concurrencyFeature(g *shard.GroupSpec) (uint64, string) {
	if g != nil && g.Concurrency > 0 {
		return node.FeatureGroupConcurrency, "a group's concurrency"
	}
	return 0, ""
}

// spanned is a request whose forward is a span of its trace (a submission).
type spanned interface{ forwardSpan() }

func forwardSpan[A any, PA rpcAnswer[A]](ctx context.Context, p *Peer, to string, req meshReq) (A, error) {
	if _, ok := req.(spanned); !ok {
		return forward[A, PA](ctx, p, to, req)
	}
	ctx, span := p.tracer.Start(ctx, "needle.forward", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("needle.peer", to)))
	a, err := forward[A, PA](ctx, p, to, req)
	endSpan(span, err)
	return a, err
}

// forward runs req on peer to and decodes its answer.
func forward[A any, PA rpcAnswer[A]](ctx context.Context, p *Peer, to string, req meshReq) (A, error) {
	var out A
	b, err := encodeCall(req, traceparent(ctx))
	if err != nil {
		return out, err
	}
	raw, err := p.tr.Call(ctx, to, b)
	if err != nil {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		return out, fmt.Errorf("%w: forward to %s: %v", api.ErrUnavailable, to, err)
	}
	if d, ok := req.(answerDecoder[A]); ok {
		err = d.decodeAnswer(raw, &out)
	} else {
		err = json.Unmarshal(raw, PA(&out))
	}
	if err != nil {
		return out, fmt.Errorf("peer: forward to %s: bad answer: %w", to, err)
	}
	return out, PA(&out).answerErr().err()
}

// encodeCall writes req as the wire has it: the header (version, op, then
// trace) and req's fields. req is not changed: askAll sends one request to
// many peers at once.
func encodeCall(req meshReq, trace string) ([]byte, error) {
	if e, ok := req.(callEncoder); ok {
		return e.encodeCall(trace)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"v":%d,"op":%q`, rpcVersion, req.op())
	if trace != "" {
		fmt.Fprintf(&buf, `,"trace":%q`, trace)
	}
	n := buf.Len()
	// The fields follow in place: req's header is empty, so omitted, and
	// its opening brace becomes the comma after the header.
	if err := json.NewEncoder(&buf).Encode(req); err != nil {
		return nil, err
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	if len(b) == n+2 { // {}
		return append(b[:n], '}'), nil
	}
	b[n] = ','
	return b, nil
}

// callServer decodes one op's request and serves it locally.
type callServer func(ctx context.Context, p *Peer, b []byte) ([]byte, error)

// serveAs is the callServer of request type R answering A.
func serveAs[R, A any, PR interface {
	*R
	meshCall[A]
}, PA rpcAnswer[A]](ctx context.Context, p *Peer, b []byte) ([]byte, error) {
	req := PR(new(R))
	if err := json.Unmarshal(b, req); err != nil {
		return nil, fmt.Errorf("peer: forwarded %s: %w", req.op(), err)
	}
	return serveDecoded[A, PA](ctx, p, req)
}

// serveDecoded serves a decoded request and encodes its answer.
func serveDecoded[A any, PA rpcAnswer[A]](ctx context.Context, p *Peer, req meshCall[A]) ([]byte, error) {
	a, err := req.serve(p.withTrace(ctx, req.head().Trace), p)
	PA(&a).answerErr().set(err)
	return json.Marshal(&a)
}

// serveCall answers a request forwarded by another peer, locally only.
func (p *Peer) serveCall(ctx context.Context, from string, b []byte) ([]byte, error) {
	h, err := readHeader(b)
	if err != nil {
		return nil, fmt.Errorf("peer: forwarded request from %s: %w", from, err)
	}
	if h.V != rpcVersion {
		return nil, fmt.Errorf("peer: forwarded request from %s: version %d, want %d", from, h.V, rpcVersion)
	}
	serve, ok := callServers[h.Op]
	if !ok {
		return nil, fmt.Errorf("peer: forwarded request from %s: unknown op %q", from, h.Op)
	}
	op := h.Op
	switch op {
	case opSubmitSpec:
		op = opSubmit // one submission, whichever form its spec came in
	case opGroupBin:
		op = opGroup // one read, whichever form its answer takes
	}
	p.metrics.served.WithLabelValues(op).Inc()
	return serve(ctx, p, b)
}

// headerPrefix is how every peer's requests open (the header's first
// fields, in order), read without parsing a large body twice.
var headerPrefix = []byte(`{"v":1,"op":"`)

// readHeader returns a request's version and op.
func readHeader(b []byte) (rpcHeader, error) {
	if rest, ok := bytes.CutPrefix(b, headerPrefix); ok {
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return rpcHeader{V: rpcVersion, Op: string(rest[:i])}, nil
		}
	}
	var h rpcHeader
	err := json.Unmarshal(b, &h)
	return h, err
}

// errNoAnswer is the error of an answer that lacks what its request asks.
var errNoAnswer = errors.New("peer: forwarded request answered without its result")

// answered returns *v, the part of an answer a request asks for, unless
// err is set or the answer lacks it.
func answered[T any](v *T, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if v == nil {
		return zero, errNoAnswer
	}
	return *v, nil
}

// askAll sends req to every member at once and hands each answer to
// collect, one at a time; a member that does not answer (within the
// forward timeout) is left out.
func askAll[A any, PA rpcAnswer[A]](ctx context.Context, p *Peer, members []string, req meshReq, collect func(PA)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			cctx, cancel := contextWithTimeout(ctx)
			defer cancel()
			a, err := forward[A, PA](cctx, p, m, req)
			if err != nil {
				return
			}
			mu.Lock()
			collect(&a)
			mu.Unlock()
		})
	}
	wg.Wait()
}
