package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/shard"
)

// A submission to a peer that does not own the group's partition is
// forwarded, and on a mesh it is most of them (two in three at three
// peers). Its spec went as JSON, and the owner's encoding/json decode of
// a group of 1,000 tasks (reflection over every TaskSpec field, after a
// scan that validates every byte) took 8% of a 3-peer mesh's CPU under
// W1. An owner that advertises node.FeatureSubmitSpec takes the spec in
// the form its Raft log already stores (shard.AppendGroupSpec, fuzzed
// with the log's decoder): opSubmitSpec is the submit request's JSON
// fields, a newline (JSON writes none outside a string's escapes), then
// the spec. An owner of an older release gets the JSON form.

// opSubmitSpec is opSubmit with the spec in binary after the JSON fields.
const opSubmitSpec = "submit_spec"

// callEncoder is a request with its own wire form (encodeCall).
type callEncoder interface {
	encodeCall(trace string) ([]byte, error)
}

// wireForm returns req as it goes to a peer that advertised features: a
// submission in binary to a peer that takes it, a group's read asking
// for its tasks in binary of a peer that answers so (group_bin.go).
func wireForm(req meshReq, features uint64) meshReq {
	switch r := req.(type) {
	case *submitReq:
		if features&node.FeatureSubmitSpec != 0 && r.Spec != nil && r.Spec.Mode.Known() {
			return &submitSpecReq{r}
		}
	case *groupReq:
		if features&node.FeatureGroupBin != 0 {
			return &groupBinReq{*r}
		}
	}
	return req
}

// submitSpecReq is a submitReq in its binary wire form.
type submitSpecReq struct{ r *submitReq }

// submitSpecHead is the JSON part of opSubmitSpec: submitReq's fields
// but the spec.
type submitSpecHead struct {
	rpcHeader
	Wait time.Duration `json:"wait,omitempty"`
	Req  string        `json:"req,omitempty"`
}

func (*submitSpecHead) op() string { return opSubmitSpec }

func (s *submitSpecReq) head() *rpcHeader { return s.r.head() }
func (*submitSpecReq) op() string         { return opSubmitSpec }
func (*submitSpecReq) forwardSpan()       {}
func (s *submitSpecReq) serve(ctx context.Context, p *Peer) (submitAns, error) {
	return s.r.serve(ctx, p)
}

func (s *submitSpecReq) encodeCall(trace string) ([]byte, error) {
	b, err := encodeCall(&submitSpecHead{Wait: s.r.Wait, Req: s.r.Req}, trace)
	if err != nil {
		return nil, err
	}
	return shard.AppendGroupSpec(append(b, '\n'), s.r.Spec), nil
}

// serveSubmitSpec is opSubmitSpec's callServer.
func serveSubmitSpec(ctx context.Context, p *Peer, b []byte) ([]byte, error) {
	req, err := decodeSubmitSpec(b)
	if err != nil {
		return nil, err
	}
	return serveDecoded[submitAns](ctx, p, req)
}

// decodeSubmitSpec decodes an opSubmitSpec request.
func decodeSubmitSpec(b []byte) (*submitReq, error) {
	fields, spec, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("peer: forwarded submit_spec without a spec")
	}
	var req submitReq
	if err := json.Unmarshal(fields, &req); err != nil {
		return nil, fmt.Errorf("peer: forwarded submit_spec: %w", err)
	}
	g, n, err := shard.DecodeGroupSpec(spec)
	if err == nil && n != len(spec) {
		err = fmt.Errorf("%d bytes after the spec", len(spec)-n)
	}
	if err != nil {
		return nil, fmt.Errorf("peer: forwarded submit_spec: %w", err)
	}
	req.Spec = &g
	return &req, nil
}
