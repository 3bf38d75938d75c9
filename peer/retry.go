package peer

import (
	"context"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

func (b local) retry(ctx context.Context, g shard.GroupID, t shard.TaskID, by, key string) error {
	_, err := b.p.call(ctx, func(n *node.Node, req uint64) { n.Retry(req, g, t, by, key) })
	return mapErr(err)
}

func (b backend) retry(ctx context.Context, g shard.GroupID, t shard.TaskID, by, key string) error {
	_, err := routed[rpcError](ctx, b.p, g, &retryReq{Group: g, Task: t, By: by, Key: key})
	return err
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

var (
	_ api.Retrier = backend{}
	_ api.Lister  = backend{}
)
