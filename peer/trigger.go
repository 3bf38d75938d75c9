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

// TriggerSchedule implements api.TriggerBackend.
func (b backend) TriggerSchedule(ctx context.Context, id shard.ScheduleID, key, by string) (shard.ScheduleView, api.SubmitResult, error) {
	req := &triggerReq{scheduleRef: scheduleRef{ID: shard.GroupID(id), By: by}, Tag: triggerTag(key)}
	a, err := routed[triggerAns](ctx, b.p, req.ID, req)
	if err != nil {
		return shard.ScheduleView{}, api.SubmitResult{}, err
	}
	res, err := answered(a.Submit, err)
	v, err := answered(a.Schedule, err)
	return v, res, err
}

// triggerReq fires a schedule now; its tag names the request.
type triggerReq struct {
	rpcHeader
	scheduleRef
	Tag string `json:"tag,omitempty"` // TriggerTag
}

type triggerAns struct {
	rpcError
	Submit   *api.SubmitResult   `json:"submit,omitempty"`
	Schedule *shard.ScheduleView `json:"schedule,omitempty"`
}

func (*triggerReq) op() string { return opTrigger }
func (r *triggerReq) serve(ctx context.Context, p *Peer) (triggerAns, error) {
	id := shard.ScheduleID(r.ID)
	res, err := p.call(ctx, func(n *node.Node, rq uint64) { n.TriggerSchedule(rq, id, r.Tag, r.By) })
	if err != nil {
		return triggerAns{}, err
	}
	sub := api.SubmitResult{Group: res.Submit.Group, Tasks: res.Submit.Tasks, Created: res.Submit.Created}
	v, err := local{p}.schedule(ctx, id)
	return triggerAns{Submit: &sub, Schedule: &v}, err
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
