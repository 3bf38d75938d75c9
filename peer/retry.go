package peer

import (
	"context"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// retry retries, and reports whether key made it a repeat (nothing done).
func (b local) retry(ctx context.Context, g shard.GroupID, t shard.TaskID, by, key string) (bool, error) {
	r, err := b.p.call(ctx, func(n *node.Node, req uint64) { n.Retry(req, g, t, by, key) })
	return r.Repeat && err == nil, mapErr(err)
}

func (b backend) retry(ctx context.Context, g shard.GroupID, t shard.TaskID, by, key string) (bool, error) {
	a, err := routed[retryAns](ctx, b.p, g, &retryReq{Group: g, Task: t, By: by, Key: key})
	return a.Repeat && err == nil, err
}

// RetryTask runs a FAILED or CANCELED task again (api.Retrier).
func (b backend) RetryTask(ctx context.Context, id shard.TaskID, by, key string) (shard.TaskView, bool, error) {
	repeat, err := b.retry(ctx, id.Group(), id, by, key)
	if err != nil {
		return shard.TaskView{}, false, err
	}
	v, err := b.Task(ctx, id, 0)
	return v, repeat, err
}

// RetryGroup runs every FAILED and CANCELED task of a group again.
func (b backend) RetryGroup(ctx context.Context, id shard.GroupID, by, key string) (shard.GroupView, bool, error) {
	repeat, err := b.retry(ctx, id, "", by, key)
	if err != nil {
		return shard.GroupView{}, false, err
	}
	v, err := b.Group(ctx, id, 0, true)
	return v, repeat, err
}

var (
	_ api.Retrier = backend{}
	_ api.Lister  = backend{}
)
