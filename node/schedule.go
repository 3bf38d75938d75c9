package node

import (
	"errors"
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
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(shard.GroupID(spec.ID)))})
		return
	}
	if n.refuseToWorkers(req, p, spec) ||
		spec.Group.Concurrency > 0 && n.refuseLacking(req, p, FeatureGroupConcurrency, "a group's concurrency") {
		return
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

// FeatureScheduleUpdate (a Heartbeat feature): the peer applies
// shard.EvScheduleUpdated, an event type an older peer refuses.
const FeatureScheduleUpdate = FeatureWorkerDeath << 1

// FeatureGroupConcurrency (a Heartbeat feature): the peer applies groups
// with a concurrency (shard.GroupSpec.Concurrency), whose encoding an
// older peer refuses as of an unknown mode.
const FeatureGroupConcurrency = FeatureScheduleUpdate << 1

// refuseLacking answers req while a replica of p lacks feature f, and
// reports whether it did: ErrUnavailable, with an *UpgradeError naming the
// replica and what it cannot apply when the replica is known to lack it
// (not merely unheard of yet).
func (n *Node) refuseLacking(req uint64, p *partition, f uint64, what string) bool {
	who, notKnown := n.lacking(p, f)
	switch {
	case notKnown:
		n.reply(Reply{Req: req, Err: unsure(p.id, what)})
	case who != "":
		n.reply(Reply{Req: req, Err: errors.Join(ErrUnavailable, &UpgradeError{Partition: p.id, Peer: who, What: what})})
	default:
		return false
	}
	return true
}

const reqScheduleUpdate requestKind = 102 // a schedule's update: replied to once applied, with whether it took effect

// UpgradeError refuses a request whose event some replica of its
// partition cannot apply yet: it runs an older needle.
type UpgradeError struct {
	Partition int    // the partition whose replica it is
	Peer      string // the replica that lacks the feature
	What      string // what it cannot apply
}

func (e *UpgradeError) Error() string {
	return fmt.Sprintf("peer %s, a replica of this partition, runs a needle that cannot apply %s: upgrade it first", e.Peer, e.What)
}

// refuseToWorkers answers request req, and reports so, when schedule
// spec fires to workers and a replica of p cannot apply that (or whether
// one can is not known yet).
func (n *Node) refuseToWorkers(req uint64, p *partition, spec *shard.ScheduleSpec) bool {
	if !shard.ToWorkers(&spec.Group) {
		return false
	}
	who, notKnown := n.lacking(p, FeatureScheduleToWorkers)
	switch {
	case notKnown:
		n.reply(Reply{Req: req, Err: unsure(p.id, "a schedule that fires to workers")})
	case who != "":
		n.reply(Reply{Req: req, Err: &shard.FieldError{Task: -1, Field: "group.to", Message: fmt.Sprintf(
			"peer %s, a replica of this schedule's partition, runs a needle that cannot apply a schedule to workers: upgrade it first", who)}})
	default:
		return false
	}
	return true
}

// UpdateSchedule proposes new settings for schedule spec.ID (see
// shard.UpdateSchedule; base is the revision they were made from, 0 =
// any). The reply comes once the update applied, at once when nothing
// changes or it is refused: shard.ErrRevision when the schedule changed
// in between, *UpgradeError (with ErrUnavailable) while a replica of its
// partition cannot apply it.
func (n *Node) UpdateSchedule(req uint64, spec *shard.ScheduleSpec, base uint64, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(spec.ID))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(shard.GroupID(spec.ID)))})
		return
	}
	if n.refuseLacking(req, p, FeatureScheduleUpdate, "a schedule's update") || n.refuseToWorkers(req, p, spec) ||
		spec.Group.Concurrency > 0 && n.refuseLacking(req, p, FeatureGroupConcurrency, "a group's concurrency") {
		return
	}
	evs, err := p.shard.UpdateSchedule(n.now, spec, base, by)
	if err != nil || len(evs) == 0 {
		n.reply(Reply{Req: req, Err: err})
		return
	}
	n.proposeRequest(p, req, reqScheduleUpdate, evs)
}

// replyUpdated answers an update once its entry applied: it took effect
// when the schedule now has the settings it carried; otherwise another
// change came first (fenced at apply: shard.ErrRevision), or the schedule
// is gone.
func (n *Node) replyUpdated(p *partition, req *request, b *shard.Batch) {
	r := Reply{Req: req.id}
	if len(b.Events) == 0 || b.Events[0].Type != shard.EvScheduleUpdated || b.Events[0].Sched == nil {
		r.Err = shard.ErrNotFound
		n.reply(r)
		return
	}
	e := &b.Events[0]
	switch v, err := p.shard.Schedule(e.Sched.ID); {
	case err != nil:
		r.Err = err
	case shard.ScheduleRevision(&v.Spec) != shard.ScheduleRevision(e.Sched):
		r.Err = shard.ErrRevision
	}
	n.reply(r)
}

// DeleteSchedule proposes the deletion of a schedule.
func (n *Node) DeleteSchedule(req uint64, id shard.ScheduleID, by string) {
	p := n.parts[n.PartitionOf(shard.GroupID(id))]
	if p == nil || !p.serving {
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(shard.GroupID(id)))})
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
		n.reply(Reply{Req: req, Err: n.unavailable(n.PartitionOf(shard.GroupID(id)))})
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
