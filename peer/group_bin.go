package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/needle-mesh/needle/shard"
)

// A read of a group that lands on a peer that does not own it is
// forwarded (routed), and its answer came back as JSON: under W1 on three
// peers, the owner's encoding/json of a 1,000-task group's views and the
// reader's decode of them were 6-7% of the mesh's CPU, for views the
// reader turns at once into the API's own JSON. An owner that advertises
// node.FeatureGroupBin is asked with opGroupBin and answers with the
// group's JSON without its task list, a newline (JSON writes none outside
// a string's escapes), a byte saying whether a task list follows (a
// summary has none), and then the list in the form of
// shard.AppendTaskViews. An owner of an older release gets opGroup.

// opGroupBin is opGroup answered with the task views in binary.
const opGroupBin = "group_bin"

// groupBinReq is a groupReq asking for the binary answer.
type groupBinReq struct{ groupReq }

func (*groupBinReq) op() string { return opGroupBin }

// answerDecoder is a request whose answer has its own wire form (forward).
type answerDecoder[A any] interface {
	decodeAnswer(raw []byte, out *A) error
}

func (*groupBinReq) decodeAnswer(raw []byte, out *groupAns) error {
	return decodeGroupBin(raw, out)
}

// serveGroupBin is opGroupBin's callServer.
func serveGroupBin(ctx context.Context, p *Peer, b []byte) ([]byte, error) {
	var req groupReq
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("peer: forwarded %s: %w", opGroupBin, err)
	}
	a, err := req.serve(p.withTrace(ctx, req.Trace), p)
	a.set(err)
	return encodeGroupBin(&a)
}

// encodeGroupBin writes a group's answer as opGroupBin has it.
func encodeGroupBin(a *groupAns) ([]byte, error) {
	var tasks []shard.TaskView
	if a.Group != nil {
		g := *a.Group
		tasks, g.Tasks = g.Tasks, nil
		a = &groupAns{rpcError: a.rpcError, Group: &g}
		for _, t := range tasks {
			if t.Deaths.Total() > 0 {
				if a.Deaths == nil {
					a.Deaths = map[shard.TaskID]shard.Deaths{}
				}
				a.Deaths[t.ID] = t.Deaths
			}
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if tasks == nil {
		return append(b, 0), nil
	}
	return shard.AppendTaskViews(append(b, 1), tasks), nil
}

// decodeGroupBin reads an answer written by encodeGroupBin into out.
func decodeGroupBin(raw []byte, out *groupAns) error {
	head, rest, ok := bytes.Cut(raw, []byte{'\n'})
	if !ok || len(rest) == 0 {
		return errors.New("peer: group answer without its task list")
	}
	if err := json.Unmarshal(head, out); err != nil {
		return err
	}
	switch rest[0] {
	case 0:
		if len(rest) != 1 {
			return fmt.Errorf("peer: group answer: %d bytes after its end", len(rest)-1)
		}
		return nil
	case 1:
	default:
		return fmt.Errorf("peer: group answer: task list marker %d", rest[0])
	}
	if out.Group == nil {
		return errors.New("peer: group answer: a task list without a group")
	}
	tasks, n, err := shard.DecodeTaskViews(rest[1:])
	if err != nil {
		return fmt.Errorf("peer: group answer: %w", err)
	}
	if n != len(rest)-1 {
		return fmt.Errorf("peer: group answer: %d bytes after its task list", len(rest)-1-n)
	}
	for i := range tasks {
		tasks[i].Deaths = out.Deaths[tasks[i].ID]
	}
	out.Group.Tasks, out.Deaths = tasks, nil
	return nil
}
