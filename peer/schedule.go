package peer

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Schedules live in the partition of their id (like groups); each firing's
// group ("<schedule id>~<unix seconds>") routes with its schedule (see
// shard.RouteKey), so a firing is one entry of that partition's log.

// CreateSchedule implements api.ScheduleBackend.
func (b backend) CreateSchedule(ctx context.Context, spec *shard.ScheduleSpec, key, by string) (shard.ScheduleView, bool, error) {
	spec.ID = scheduleIDFor(key)
	a, err := routed[scheduleAns](ctx, b.p, shard.GroupID(spec.ID), &scheduleSetReq{Sched: spec, By: by})
	v, err := answered(a.Schedule, err)
	return v, a.Created, err
}

func (b backend) Schedule(ctx context.Context, id shard.ScheduleID) (shard.ScheduleView, error) {
	return b.scheduleOp(ctx, &scheduleGetReq{scheduleRef: scheduleRef{ID: shard.GroupID(id)}})
}

func (b backend) DeleteSchedule(ctx context.Context, id shard.ScheduleID, by string) (shard.ScheduleView, error) {
	return b.scheduleOp(ctx, &scheduleDeleteReq{scheduleRef: scheduleRef{ID: shard.GroupID(id), By: by}})
}

func (b backend) PauseSchedule(ctx context.Context, id shard.ScheduleID, pause bool, by string) (shard.ScheduleView, error) {
	ref := scheduleRef{ID: shard.GroupID(id), By: by}
	if pause {
		return b.scheduleOp(ctx, &schedulePauseReq{scheduleRef: ref})
	}
	return b.scheduleOp(ctx, &scheduleResumeReq{scheduleRef: ref})
}

// UpdateSchedule implements api.UpdateBackend.
func (b backend) UpdateSchedule(ctx context.Context, spec *shard.ScheduleSpec, base uint64, by string) (shard.ScheduleView, error) {
	return b.scheduleOp(ctx, &scheduleUpdateReq{scheduleRef: scheduleRef{ID: shard.GroupID(spec.ID), By: by}, Sched: spec, Base: base})
}

func (b backend) scheduleOp(ctx context.Context, req interface {
	meshCall[scheduleAns]
	ref() *scheduleRef
}) (shard.ScheduleView, error) {
	a, err := routed[scheduleAns](ctx, b.p, req.ref().ID, req)
	return answered(a.Schedule, err)
}

// Schedules lists the schedules of every live member, merged and sorted by
// id. A member that does not answer is left out.
func (b backend) Schedules(ctx context.Context) ([]shard.ScheduleView, error) {
	var members []string
	err := b.p.read(ctx, func(n *node.Node) error { members = liveOthers(n); return nil })
	if err != nil {
		return nil, err
	}
	out, err := local(b).schedules(ctx)
	if err != nil {
		return nil, err
	}
	askAll(ctx, b.p, members, &schedulesReq{}, func(a *schedulesAns) { out = append(out, a.Schedules...) })
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.ID < out[j].Spec.ID })
	out = slices.CompactFunc(out, func(a, b shard.ScheduleView) bool { return a.Spec.ID == b.Spec.ID })
	return out, nil
}

func (b local) createSchedule(ctx context.Context, spec *shard.ScheduleSpec, by string) (shard.ScheduleView, bool, error) {
	r, err := b.p.call(ctx, func(n *node.Node, req uint64) { n.SetSchedule(req, spec, by) })
	if err != nil {
		return shard.ScheduleView{}, false, err
	}
	created := r.Submit.Group == ""
	v, err := b.schedule(ctx, spec.ID)
	return v, created, err
}

func (b local) schedule(ctx context.Context, id shard.ScheduleID) (shard.ScheduleView, error) {
	var v shard.ScheduleView
	err := b.p.read(ctx, func(n *node.Node) (err error) { v, err = n.Schedule(id); return err })
	return v, err
}

func (b local) schedules(ctx context.Context) ([]shard.ScheduleView, error) {
	var out []shard.ScheduleView
	err := b.p.read(ctx, func(n *node.Node) error { out = n.Schedules(); return nil })
	return out, err
}

// The schedule requests of the mesh. A schedule routes like a group: its
// id is the wire's "group".

// scheduleRef names a schedule and who asks.
type scheduleRef struct {
	ID shard.GroupID `json:"group,omitempty"`
	By string        `json:"by,omitempty"`
}

func (r *scheduleRef) ref() *scheduleRef { return r }

type scheduleAns struct {
	rpcError
	Schedule *shard.ScheduleView `json:"schedule,omitempty"`
	Created  bool                `json:"created,omitempty"`
}

// scheduleSetReq creates a schedule (or finds the one of its key).
type scheduleSetReq struct {
	rpcHeader
	Sched *shard.ScheduleSpec `json:"sched,omitempty"`
	By    string              `json:"by,omitempty"`
}

func (*scheduleSetReq) op() string { return opScheduleSet }
func (r *scheduleSetReq) feature() (uint64, string) {
	if r.Sched == nil {
		return 0, ""
	}
	return concurrencyFeature(&r.Sched.Group)
}
func (r *scheduleSetReq) serve(ctx context.Context, p *Peer) (scheduleAns, error) {
	if r.Sched == nil {
		return scheduleAns{}, errors.New("peer: forwarded schedule_set without a schedule")
	}
	v, created, err := local{p}.createSchedule(ctx, r.Sched, r.By)
	return scheduleAns{Schedule: &v, Created: created}, err
}

// scheduleGetReq reads a schedule.
type scheduleGetReq struct {
	rpcHeader
	scheduleRef
}

func (*scheduleGetReq) op() string { return opSchedule }
func (r *scheduleGetReq) serve(ctx context.Context, p *Peer) (scheduleAns, error) {
	v, err := local{p}.schedule(ctx, shard.ScheduleID(r.ID))
	return scheduleAns{Schedule: &v}, err
}

// scheduleDeleteReq deletes a schedule; the answer is the schedule before.
type scheduleDeleteReq struct {
	rpcHeader
	scheduleRef
}

func (*scheduleDeleteReq) op() string { return opScheduleDelete }
func (r *scheduleDeleteReq) serve(ctx context.Context, p *Peer) (scheduleAns, error) {
	id := shard.ScheduleID(r.ID)
	v, err := local{p}.schedule(ctx, id)
	if err == nil {
		_, err = p.call(ctx, func(n *node.Node, req uint64) { n.DeleteSchedule(req, id, r.By) })
	}
	return scheduleAns{Schedule: &v}, err
}

// schedulePauseReq pauses a schedule, scheduleResumeReq resumes it.
type (
	schedulePauseReq struct {
		rpcHeader
		scheduleRef
	}
	scheduleResumeReq struct {
		rpcHeader
		scheduleRef
	}
)

func (*schedulePauseReq) op() string  { return opSchedulePause }
func (*scheduleResumeReq) op() string { return opScheduleResume }
func (r *schedulePauseReq) serve(ctx context.Context, p *Peer) (scheduleAns, error) {
	return local{p}.pause(ctx, r.scheduleRef, true)
}
func (r *scheduleResumeReq) serve(ctx context.Context, p *Peer) (scheduleAns, error) {
	return local{p}.pause(ctx, r.scheduleRef, false)
}

func (b local) pause(ctx context.Context, r scheduleRef, pause bool) (scheduleAns, error) {
	id := shard.ScheduleID(r.ID)
	if _, err := b.p.call(ctx, func(n *node.Node, req uint64) { n.PauseSchedule(req, id, pause, r.By) }); err != nil {
		return scheduleAns{}, err
	}
	v, err := b.schedule(ctx, id)
	return scheduleAns{Schedule: &v}, err
}

// scheduleUpdateReq gives a schedule new settings (Sched), if it is still
// at revision Base (0 = any).
type scheduleUpdateReq struct {
	rpcHeader
	scheduleRef
	Sched *shard.ScheduleSpec `json:"sched,omitempty"`
	Base  uint64              `json:"base,omitempty"`
}

func (*scheduleUpdateReq) op() string { return opScheduleUpdate }
func (r *scheduleUpdateReq) feature() (uint64, string) {
	if r.Sched != nil && r.Sched.Group.Concurrency > 0 {
		return node.FeatureScheduleUpdate | node.FeatureGroupConcurrency, "a schedule's update with a group's concurrency"
	}
	return node.FeatureScheduleUpdate, "a schedule's update"
}
func (r *scheduleUpdateReq) serve(ctx context.Context, p *Peer) (scheduleAns, error) {
	if r.Sched == nil || r.Sched.ID != shard.ScheduleID(r.ID) {
		return scheduleAns{}, errors.New("peer: forwarded schedule_update without its schedule")
	}
	if _, err := p.call(ctx, func(n *node.Node, req uint64) { n.UpdateSchedule(req, r.Sched, r.Base, r.By) }); err != nil {
		return scheduleAns{}, err
	}
	v, err := local{p}.schedule(ctx, r.Sched.ID)
	return scheduleAns{Schedule: &v}, err
}

// schedulesReq lists the schedules of the partitions this peer serves.
type schedulesReq struct{ rpcHeader }

type schedulesAns struct {
	rpcError
	Schedules []shard.ScheduleView `json:"schedules,omitempty"`
}

func (*schedulesReq) op() string { return opSchedules }
func (r *schedulesReq) serve(ctx context.Context, p *Peer) (schedulesAns, error) {
	out, err := local{p}.schedules(ctx)
	return schedulesAns{Schedules: out}, err
}

var (
	_ api.ScheduleBackend = backend{}
	_ api.UpdateBackend   = backend{}
)

// scheduleIDFor returns the id of a new schedule: derived from the
// idempotency key when there is one, random otherwise.
func scheduleIDFor(key string) shard.ScheduleID {
	if key == "" {
		return shard.ScheduleID("s" + randomHex(12))
	}
	return shard.KeyedScheduleID(key)
}
