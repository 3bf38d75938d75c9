package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// Requests of the HTTP API reach the owner of their group's partition: a
// peer that does not serve it forwards the request over the mesh
// (p2p.Host.Call on the long-lived /needle/rpc/1.0.0 streams), and the owner
// runs it as a local request. A forwarded request is never forwarded again,
// so a stale view of who leads cannot loop.

// rpcVersion is the first field of every forwarded request.
const rpcVersion = 1

type rpcRequest struct {
	V       int                 `json:"v"`
	Op      string              `json:"op"`
	Spec    *shard.GroupSpec    `json:"spec,omitempty"`
	Task    shard.TaskID        `json:"task,omitempty"`
	Group   shard.GroupID       `json:"group,omitempty"`
	Wait    time.Duration       `json:"wait,omitempty"`
	NoTasks bool                `json:"no_tasks,omitempty"` // group: a summary without the task list
	By      string              `json:"by,omitempty"`
	Sched   *shard.ScheduleSpec `json:"sched,omitempty"`
	Tag     string              `json:"tag,omitempty"`    // schedule_trigger: names the request (TriggerTag)
	Filter  *shard.Filter       `json:"filter,omitempty"` // list
	Groups  bool                `json:"groups,omitempty"` // list: groups, not tasks
	Key     string              `json:"key,omitempty"`    // retry: idempotency key
	Round   uint64              `json:"round,omitempty"`  // logs: the run
	From    int                 `json:"from,omitempty"`   // logs: the first line wanted
	Trace   string              `json:"trace,omitempty"`  // the caller's span (W3C traceparent), parent of the owner's spans
}

type rpcResponse struct {
	rpcError
	Submit *api.SubmitResult `json:"submit,omitempty"`
	Task   *shard.TaskView   `json:"task,omitempty"`
	Group  *shard.GroupView  `json:"group,omitempty"`
	Events []shard.TaskEvent `json:"events,omitempty"`

	Schedule  *shard.ScheduleView  `json:"schedule,omitempty"`
	Schedules []shard.ScheduleView `json:"schedules,omitempty"`
	Audit     []shard.AuditEntry   `json:"audit,omitempty"`
	Created   bool                 `json:"created,omitempty"`
	List      *node.ListResult     `json:"list,omitempty"`
	Stats     *node.StatsResult    `json:"stats,omitempty"`
	Logs      *LogPage             `json:"logs,omitempty"`
	Workers   []api.WorkerInfo     `json:"workers,omitempty"`
}

// route returns the peer to forward a request for group g to, or "" to
// serve it here.
func (p *Peer) route(ctx context.Context, g shard.GroupID) (string, error) {
	var owner string
	err := p.read(ctx, func(n *node.Node) error {
		owner = n.Owner(g)
		if owner == "" {
			return node.ErrUnavailable
		}
		return nil
	})
	if err != nil || owner == p.host.ID() {
		return "", err
	}
	return owner, nil
}

// forward runs req on peer to and decodes its answer.
func (p *Peer) forward(ctx context.Context, to string, req rpcRequest) (rpcResponse, error) {
	req.V = rpcVersion
	b, err := json.Marshal(req)
	if err != nil {
		return rpcResponse{}, err
	}
	out, err := p.host.Call(ctx, to, b)
	if err != nil {
		if ctx.Err() != nil {
			return rpcResponse{}, ctx.Err()
		}
		return rpcResponse{}, fmt.Errorf("%w: forward to %s: %v", api.ErrUnavailable, to, err)
	}
	var resp rpcResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return rpcResponse{}, fmt.Errorf("peer: forward to %s: bad answer: %w", to, err)
	}
	return resp, resp.rpcError.err()
}

// serveCall answers a request forwarded by another peer, locally only.
func (p *Peer) serveCall(ctx context.Context, from string, b []byte) ([]byte, error) {
	var req rpcRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("peer: forwarded request from %s: %w", from, err)
	}
	if req.V != rpcVersion {
		return nil, fmt.Errorf("peer: forwarded request from %s: version %d, want %d", from, req.V, rpcVersion)
	}
	l := local{p}
	ctx = p.withTrace(ctx, req.Trace)
	var resp rpcResponse
	var err error
	switch req.Op {
	case "submit":
		if req.Spec == nil {
			return nil, errors.New("peer: forwarded submit without a spec")
		}
		var r api.SubmitResult
		r, err = l.Submit(ctx, req.Spec)
		resp.Submit = &r
	case "task":
		var v shard.TaskView
		v, err = l.Task(ctx, req.Task, req.Wait)
		resp.Task = &v
	case "group":
		var v shard.GroupView
		v, err = l.Group(ctx, req.Group, req.Wait, !req.NoTasks)
		resp.Group = &v
	case "events":
		resp.Events, err = l.TaskEvents(ctx, req.Task)
	case "cancel":
		err = l.cancel(ctx, req.Group, req.Task, req.By)
	case "logs":
		page := p.logs.read(req.Task, shard.Round(req.Round), req.From)
		resp.Logs = &page
	case "retry":
		err = l.retry(ctx, req.Group, req.Task, req.By, req.Key)
	case "list":
		if req.Filter == nil {
			return nil, errors.New("peer: forwarded list without a filter")
		}
		err = p.read(ctx, func(n *node.Node) error { r := n.List(req.Filter, req.Groups); resp.List = &r; return nil })
	case "stats":
		err = p.read(ctx, func(n *node.Node) error { r := n.HandlerStats(); resp.Stats = &r; return nil })
	case "audit":
		err = p.read(ctx, func(n *node.Node) error { resp.Audit = n.Audit(); return nil })
	case "workers":
		resp.Workers = p.hub.list(time.Now())
	case "schedule_set", "schedule", "schedule_delete", "schedule_pause", "schedule_resume", "schedules":
		err = p.serveScheduleCall(ctx, req, &resp)
	case "schedule_trigger":
		err = p.serveTriggerCall(ctx, req, &resp)
	default:
		return nil, fmt.Errorf("peer: forwarded request from %s: unknown op %q", from, req.Op)
	}
	resp.rpcError.set(err)
	return json.Marshal(resp)
}
