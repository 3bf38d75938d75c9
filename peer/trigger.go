package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

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

const reqTrigger requestKind = 101 // a manual firing: replied to with its group once applied

// TriggerTag returns the tag of a trigger request: derived from the
// idempotency key when there is one, random otherwise.
func TriggerTag(key string) string {
	if key == "" {
		return "n" + randomHex(8)
	}
	sum := sha256.Sum256([]byte("trigger\x00" + key))
	return "k" + hex.EncodeToString(sum[:8])
}

// TriggerSchedule proposes a manual firing of schedule id for request req.
// The reply's Submit.Group is the firing's group; Created is false when a
// firing with this tag existed already.
func (n *Node) TriggerSchedule(req uint64, id shard.ScheduleID, tag, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(id))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: ErrUnavailable})
		return
	}
	evs, g, err := p.shard.TriggerSchedule(n.now, id, tag, by)
	switch {
	case err != nil:
		n.reply(Reply{Req: req, Err: err})
	case len(evs) == 0:
		ids, _ := p.shard.GroupTasks(g)
		n.reply(Reply{Req: req, Submit: SubmitResult{Group: g, Tasks: ids}})
	default:
		n.proposeRequest(p, req, reqTrigger, evs)
	}
}

// replyTriggered answers a trigger once its entry applied: with the group
// it created, or, when the trigger was fenced at apply, with the firing of
// the same tag that won, or not found when the schedule is gone.
func (n *Node) replyTriggered(p *partition, req *request, b *shard.Batch) {
	r := Reply{Req: req.id}
	if len(b.Events) == 0 || b.Events[0].Type != shard.EvScheduleTriggered {
		r.Err = shard.ErrNotFound
		n.reply(r)
		return
	}
	g := b.Events[0].Group
	sid, _, tag, _ := shard.ParseTriggeredGroupID(g)
	if p.shard.HasGroup(g) {
		r.Submit = SubmitResult{Group: g, Created: true}
		ids, _ := p.shard.GroupTasks(g)
		r.Submit.Tasks = ids
		n.reply(r)
		return
	}
	_, won, err := p.shard.TriggerSchedule(n.now, sid, tag, "")
	r.Err, r.Submit.Group = err, won
	n.reply(r)
}

// TriggerSchedule implements api.TriggerBackend.
func (b backend) TriggerSchedule(ctx context.Context, id shard.ScheduleID, key, by string) (shard.ScheduleView, api.SubmitResult, error) {
	req := rpcRequest{Op: "schedule_trigger", Group: shard.GroupID(id), By: by, Tag: TriggerTag(key)}
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
	r, err := b.p.callDo(ctx, func(n *Node, rq uint64) { n.TriggerSchedule(rq, id, req.Tag, req.By) })
	if err != nil {
		return shard.ScheduleView{}, api.SubmitResult{}, err
	}
	res := api.SubmitResult{Group: r.Submit.Group, Tasks: r.Submit.Tasks, Created: r.Submit.Created}
	var v shard.ScheduleView
	err = b.p.read(ctx, func(n *Node) (err error) { v, err = n.Schedule(id); return err })
	return v, res, err
}

// serveTriggerCall answers a forwarded trigger.
func (p *Peer) serveTriggerCall(ctx context.Context, req rpcRequest, resp *rpcResponse) error {
	v, res, err := local{p}.trigger(ctx, req)
	resp.Schedule, resp.Submit = &v, &res
	return err
}

var _ api.TriggerBackend = backend{}
