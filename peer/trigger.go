package peer

import (
	"context"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Manual schedule firings (POST /v1/schedules/{id}/trigger). The edge
// names each request with a tag: the hash of the client's idempotency key,
// or a nonce drawn once per HTTP request. The tag travels with the request
// through forwards and retries (retryUnavailable), so a retry after a lost
// reply or a leadership change finds the firing it made instead of firing
// again (shard/trigger.go). A client that retries the HTTP request itself
// should send a key.

// a manual firing: replied to with its group once applied

// TriggerSchedule implements api.TriggerBackend.
func (b backend) TriggerSchedule(ctx context.Context, id shard.ScheduleID, key, by string) (shard.ScheduleView, api.SubmitResult, error) {
	req := rpcRequest{Op: "schedule_trigger", Group: shard.GroupID(id), By: by, Tag: triggerTag(key)}
	var v shard.ScheduleView
	var res api.SubmitResult
	err := retryUnavailable(ctx, func() error {
		to, err := b.p.route(ctx, req.Group)
		if err != nil {
			return mapErr(err)
		}
		if to == "" {
			v, res, err = local(b).trigger(ctx, req)
			return err
		}
		resp, err := b.p.forward(ctx, to, req)
		if err == nil {
			v, res = *resp.Schedule, *resp.Submit
		}
		return err
	})
	return v, res, err
}

func (b local) trigger(ctx context.Context, req rpcRequest) (shard.ScheduleView, api.SubmitResult, error) {
	id := shard.ScheduleID(req.Group)
	r, err := b.p.callDo(ctx, func(n *node.Node, rq uint64) { n.TriggerSchedule(rq, id, req.Tag, req.By) })
	if err != nil {
		return shard.ScheduleView{}, api.SubmitResult{}, err
	}
	res := api.SubmitResult{Group: r.Submit.Group, Tasks: r.Submit.Tasks, Created: r.Submit.Created}
	var v shard.ScheduleView
	err = b.p.read(ctx, func(n *node.Node) (err error) { v, err = n.Schedule(id); return err })
	return v, res, err
}

// serveTriggerCall answers a forwarded trigger.
func (p *Peer) serveTriggerCall(ctx context.Context, req rpcRequest, resp *rpcResponse) error {
	v, res, err := local{p}.trigger(ctx, req)
	resp.Schedule, resp.Submit = &v, &res
	return err
}

var _ api.TriggerBackend = backend{}

// triggerTag returns the tag of a trigger request: derived from the
// idempotency key when there is one, random otherwise.
func triggerTag(key string) string {
	if key == "" {
		return "n" + randomHex(8)
	}
	return shard.KeyedTriggerTag(key)
}
