package node

import (
	"fmt"
	"sort"

	"github.com/needle-mesh/needle/shard"
)

const reqSchedule requestKind = 100 // a schedule command: replied to once applied

// SetSchedule proposes a new schedule on behalf of request req. The reply
// comes once it applied (Submit.Group empty), or at once for an invalid
// spec or a schedule that already exists (Submit.Group set to its id).
func (n *Node) SetSchedule(req uint64, spec *shard.ScheduleSpec, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(spec.ID))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: ErrUnavailable})
		return
	}
	if shard.ToWorkers(&spec.Group) {
		if who, unsure := n.lacking(p, FeatureScheduleToWorkers); unsure {
			n.reply(Reply{Req: req, Err: ErrUnavailable})
			return
		} else if who != "" {
			n.reply(Reply{Req: req, Err: &shard.FieldError{Task: -1, Field: "group.to", Message: fmt.Sprintf(
				"peer %s, a replica of this schedule's partition, runs a needle that cannot apply a schedule to workers: upgrade it first", who)}})
			return
		}
	}
	ev, exists, err := p.shard.SetSchedule(n.now, spec, by)
	switch {
	case err != nil:
		n.reply(Reply{Req: req, Err: err})
	case exists:
		n.reply(Reply{Req: req, Submit: SubmitResult{Group: shard.GroupID(spec.ID)}})
	default:
		n.proposeRequest(p, req, reqSchedule, []shard.Event{ev})
	}
}

// DeleteSchedule proposes the deletion of a schedule.
func (n *Node) DeleteSchedule(req uint64, id shard.ScheduleID, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(id))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: ErrUnavailable})
		return
	}
	ev, err := p.shard.DeleteSchedule(n.now, id, by)
	if err != nil {
		n.reply(Reply{Req: req, Err: err})
		return
	}
	n.proposeRequest(p, req, reqSchedule, []shard.Event{ev})
}

// PauseSchedule proposes pausing (pause) or resuming a schedule.
func (n *Node) PauseSchedule(req uint64, id shard.ScheduleID, pause bool, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(id))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: ErrUnavailable})
		return
	}
	evs, err := p.shard.PauseSchedule(n.now, id, pause, by)
	if err != nil || len(evs) == 0 {
		n.reply(Reply{Req: req, Err: err})
		return
	}
	n.proposeRequest(p, req, reqSchedule, evs)
}

// Schedule returns a schedule's view (from its owner's state).
func (n *Node) Schedule(id shard.ScheduleID) (shard.ScheduleView, error) {
	p, err := n.readable(shard.GroupID(id))
	if err != nil {
		return shard.ScheduleView{}, err
	}
	return p.shard.Schedule(id)
}

// Schedules returns the schedules of the partitions this node serves,
// sorted by id.
func (n *Node) Schedules() []shard.ScheduleView {
	var out []shard.ScheduleView
	for _, i := range n.held {
		p := n.parts[i]
		if p != nil && p.serving {
			out = append(out, p.shard.Schedules()...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.ID < out[j].Spec.ID })
	return out
}
