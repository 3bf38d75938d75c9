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

// a schedule command: replied to once applied

// call runs a request-style command (reply once applied) in the loop.
func (p *Peer) callDo(ctx context.Context, f func(n *node.Node, req uint64)) (node.Reply, error) {
	return p.call(ctx, command{do: f})
}

// CreateSchedule implements api.ScheduleBackend.
func (b backend) CreateSchedule(ctx context.Context, spec *shard.ScheduleSpec, key, by string) (shard.ScheduleView, bool, error) {
	spec.ID = scheduleIDFor(key)
	var v shard.ScheduleView
	var created bool
	err := retryUnavailable(ctx, func() error {
		to, err := b.p.route(ctx, shard.GroupID(spec.ID))
		if err != nil {
			return mapErr(err)
		}
		if to == "" {
			v, created, err = local(b).createSchedule(ctx, spec, by)
			return err
		}
		resp, err := b.p.forward(ctx, to, rpcRequest{Op: "schedule_set", Sched: spec, By: by})
		if err == nil {
			v, created = *resp.Schedule, resp.Created
		}
		return err
	})
	return v, created, err
}

func (b backend) Schedule(ctx context.Context, id shard.ScheduleID) (shard.ScheduleView, error) {
	return b.scheduleOp(ctx, rpcRequest{Op: "schedule", Group: shard.GroupID(id)})
}

func (b backend) DeleteSchedule(ctx context.Context, id shard.ScheduleID, by string) (shard.ScheduleView, error) {
	return b.scheduleOp(ctx, rpcRequest{Op: "schedule_delete", Group: shard.GroupID(id), By: by})
}

func (b backend) PauseSchedule(ctx context.Context, id shard.ScheduleID, pause bool, by string) (shard.ScheduleView, error) {
	op := "schedule_resume"
	if pause {
		op = "schedule_pause"
	}
	return b.scheduleOp(ctx, rpcRequest{Op: op, Group: shard.GroupID(id), By: by})
}

func (b backend) scheduleOp(ctx context.Context, req rpcRequest) (shard.ScheduleView, error) {
	var v shard.ScheduleView
	err := retryUnavailable(ctx, func() error {
		to, err := b.p.route(ctx, req.Group)
		if err != nil {
			return mapErr(err)
		}
		if to == "" {
			v, err = local(b).scheduleOp(ctx, req)
			return err
		}
		resp, err := b.p.forward(ctx, to, req)
		if err == nil {
			v = *resp.Schedule
		}
		return err
	})
	return v, err
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
	b.p.askAll(ctx, members, rpcRequest{Op: "schedules"}, func(resp *rpcResponse) { out = append(out, resp.Schedules...) })
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.ID < out[j].Spec.ID })
	out = slices.CompactFunc(out, func(a, b shard.ScheduleView) bool { return a.Spec.ID == b.Spec.ID })
	return out, nil
}

func (b local) createSchedule(ctx context.Context, spec *shard.ScheduleSpec, by string) (shard.ScheduleView, bool, error) {
	r, err := b.p.callDo(ctx, func(n *node.Node, req uint64) { n.SetSchedule(req, spec, by) })
	if err != nil {
		return shard.ScheduleView{}, false, err
	}
	created := r.Submit.Group == ""
	var v shard.ScheduleView
	err = b.p.read(ctx, func(n *node.Node) (err error) { v, err = n.Schedule(spec.ID); return err })
	return v, created, err
}

func (b local) scheduleOp(ctx context.Context, req rpcRequest) (shard.ScheduleView, error) {
	id := shard.ScheduleID(req.Group)
	var v shard.ScheduleView
	get := func() error {
		return b.p.read(ctx, func(n *node.Node) (err error) { v, err = n.Schedule(id); return err })
	}
	switch req.Op {
	case "schedule":
		return v, get()
	case "schedule_delete":
		if err := get(); err != nil {
			return v, err
		}
		_, err := b.p.callDo(ctx, func(n *node.Node, r uint64) { n.DeleteSchedule(r, id, req.By) })
		return v, err
	case "schedule_pause", "schedule_resume":
		pause := req.Op == "schedule_pause"
		if _, err := b.p.callDo(ctx, func(n *node.Node, r uint64) { n.PauseSchedule(r, id, pause, req.By) }); err != nil {
			return v, err
		}
		return v, get()
	}
	return v, errors.New("peer: unknown schedule op " + req.Op)
}

func (b local) schedules(ctx context.Context) ([]shard.ScheduleView, error) {
	var out []shard.ScheduleView
	err := b.p.read(ctx, func(n *node.Node) error { out = n.Schedules(); return nil })
	return out, err
}

// serveScheduleCall answers a forwarded schedule request.
func (p *Peer) serveScheduleCall(ctx context.Context, req rpcRequest, resp *rpcResponse) error {
	l := local{p}
	switch req.Op {
	case "schedule_set":
		if req.Sched == nil {
			return errors.New("peer: forwarded schedule_set without a schedule")
		}
		v, created, err := l.createSchedule(ctx, req.Sched, req.By)
		resp.Schedule, resp.Created = &v, created
		return err
	case "schedules":
		var err error
		resp.Schedules, err = l.schedules(ctx)
		return err
	}
	v, err := l.scheduleOp(ctx, req)
	resp.Schedule = &v
	return err
}

var _ api.ScheduleBackend = backend{}

// scheduleIDFor returns the id of a new schedule: derived from the
// idempotency key when there is one, random otherwise.
func scheduleIDFor(key string) shard.ScheduleID {
	if key == "" {
		return shard.ScheduleID("s" + randomHex(12))
	}
	return shard.KeyedScheduleID(key)
}
