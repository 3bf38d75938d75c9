package peer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Features a peer gossips in its heartbeats: the committed events it can
// apply beyond those every needle could. An older peer would refuse an
// entry holding one of them (it does not decode) and so diverge from its
// replicas; a leader proposes one only when every replica has the feature.
const (
	FeatureRetry = 1 << iota // the retried event (shard.EvRetried)

	Features = FeatureRetry // what this build applies
)

// lacking returns a replica of p (voter or learner) that has not
// advertised feature f, or "".
func (n *Node) lacking(p *partition, f uint64) string {
	ids := append(slices.Clone(p.conf.GetVoters()), p.conf.GetLearners()...)
	for _, r := range ids {
		id, ok := n.mesh.peerOf(r)
		if !ok {
			return fmt.Sprint(r)
		}
		if id == n.cfg.ID {
			continue
		}
		if mb := n.mesh.members[id]; mb == nil || mb.features&f == 0 {
			return id
		}
	}
	return ""
}

// Retry proposes running FAILED and CANCELED tasks again: task, or every
// one of group g when task is "" (see shard.Retry). The reply comes once the
// retry is applied, at once when there is nothing to do (a repeated key)
// or it is refused.
func (n *Node) Retry(req uint64, g shard.GroupID, task shard.TaskID, by, key string) {
	p := n.parts[n.PartitionOf(g)]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: ErrUnavailable})
		return
	}
	if who := n.lacking(p, FeatureRetry); who != "" {
		n.reply(Reply{Req: req, Err: &conflictError{msg: fmt.Sprintf(
			"peer %s, a replica of this group's partition, runs a needle that cannot apply a retry: upgrade it first", who)}})
		return
	}
	evs, err := p.shard.Retry(n.now, g, task, by, key)
	if err != nil || len(evs) == 0 {
		n.reply(Reply{Req: req, Err: err})
		return
	}
	n.proposeRequest(p, req, reqCancel, evs)
}

func (b local) retry(ctx context.Context, g shard.GroupID, t shard.TaskID, by, key string) error {
	_, err := b.p.call(ctx, command{do: func(n *Node, req uint64) { n.Retry(req, g, t, by, key) }})
	return err
}

func (b backend) retry(ctx context.Context, g shard.GroupID, t shard.TaskID, by, key string) error {
	return retryUnavailable(ctx, func() error {
		to, err := b.p.route(ctx, g)
		if err != nil || to == "" {
			if err != nil {
				return mapErr(err)
			}
			return local(b).retry(ctx, g, t, by, key)
		}
		_, err = b.p.forward(ctx, to, rpcRequest{Op: "retry", Group: g, Task: t, By: by, Key: key})
		return err
	})
}

// RetryTask runs a FAILED or CANCELED task again (api.Retrier).
func (b backend) RetryTask(ctx context.Context, id shard.TaskID, by, key string) (shard.TaskView, error) {
	if err := b.retry(ctx, id.Group(), id, by, key); err != nil {
		return shard.TaskView{}, err
	}
	return b.Task(ctx, id, 0)
}

// RetryGroup runs every FAILED and CANCELED task of a group again.
func (b backend) RetryGroup(ctx context.Context, id shard.GroupID, by, key string) (shard.GroupView, error) {
	if err := b.retry(ctx, id, "", by, key); err != nil {
		return shard.GroupView{}, err
	}
	return b.Group(ctx, id, 0, true)
}

// conflictError is a refusal the API answers with 409 conflict; its text
// says why (e.g. the task's state).
type conflictError struct{ msg string }

func (e *conflictError) Error() string        { return e.msg }
func (e *conflictError) Is(target error) bool { return target == api.ErrConflict }

// conflictErr turns a core refusal into the API's conflict (409).
func conflictErr(err error) error {
	return &conflictError{msg: strings.TrimPrefix(err.Error(), shard.ErrNotRetryable.Error()+": ")}
}

var (
	_ api.Retrier = backend{}
	_ api.Lister  = backend{}
)
