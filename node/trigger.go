package node

import (
	"github.com/needle-mesh/needle/shard"
)

const reqTrigger requestKind = 101 // a manual firing: replied to with its group once applied

// TriggerSchedule proposes a manual firing of schedule id for request req.
// The reply's Submit.Group is the firing's group; Created is false when a
// firing with this tag existed already.
func (n *Node) TriggerSchedule(req uint64, id shard.ScheduleID, tag, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(id))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(shard.GroupID(id)))})
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
