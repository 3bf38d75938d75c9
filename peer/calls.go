package peer

import (
	"context"
	"errors"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// The requests of the mesh, one type each, with their answers. The JSON
// names are the wire's (forward.go); a field an op does not use is absent.

// callServers serves each op of the mesh.
var callServers = map[string]callServer{
	opSubmit:         serveAs[submitReq, submitAns],
	opSubmitSpec:     serveSubmitSpec,
	opTask:           serveAs[taskReq, taskAns],
	opGroup:          serveAs[groupReq, groupAns],
	opGroupBin:       serveGroupBin,
	opEvents:         serveAs[eventsReq, eventsAns],
	opCancel:         serveAs[cancelReq, rpcError],
	opRetry:          serveAs[retryReq, retryAns],
	opLogs:           serveAs[logsReq, logsAns],
	opList:           serveAs[listReq, listAns],
	opStats:          serveAs[statsReq, statsAns],
	opAudit:          serveAs[auditReq, auditAns],
	opWorkers:        serveAs[workersReq, workersAns],
	opScheduleSet:    serveAs[scheduleSetReq, scheduleAns],
	opSchedule:       serveAs[scheduleGetReq, scheduleAns],
	opScheduleDelete: serveAs[scheduleDeleteReq, scheduleAns],
	opSchedulePause:  serveAs[schedulePauseReq, scheduleAns],
	opScheduleResume: serveAs[scheduleResumeReq, scheduleAns],
	opSchedules:      serveAs[schedulesReq, schedulesAns],
	opTrigger:        serveAs[triggerReq, triggerAns],
	opScheduleUpdate: serveAs[scheduleUpdateReq, scheduleAns],
	opLease:          serveAs[leaseReq, leaseAns],
	opLeaseReport:    serveAs[leaseReportReq, leaseReportAns],
	opWorkerHeld:     serveAs[workerHeldReq, workerHeldAns],
	opPeerAudit:      serveAs[peerAuditReq, rpcError],
}

// The ops, as the wire names them.
const (
	opSubmit         = "submit"
	opTask           = "task"
	opGroup          = "group"
	opEvents         = "events"
	opCancel         = "cancel"
	opRetry          = "retry"
	opLogs           = "logs"
	opList           = "list"
	opStats          = "stats"
	opAudit          = "audit"
	opWorkers        = "workers"
	opScheduleSet    = "schedule_set"
	opSchedule       = "schedule"
	opScheduleDelete = "schedule_delete"
	opSchedulePause  = "schedule_pause"
	opScheduleResume = "schedule_resume"
	opSchedules      = "schedules"
	opTrigger        = "schedule_trigger"
	opScheduleUpdate = "schedule_update" // sent only to an owner with node.FeatureScheduleUpdate
	opLease          = "lease"           // a worker's call on a lease another peer holds
	opLeaseReport    = "lease_report"    // a batch of outcomes of leases another peer holds
	opWorkerHeld     = "worker_held"     // the leases a dead worker held with a peer (workers_lone.go)
)

// submitReq creates a group (spec.ID set by the edge).
type submitReq struct {
	rpcHeader
	Spec *shard.GroupSpec `json:"spec,omitempty"`
	// Wait, when set, asks the owner to answer once the first task is
	// terminal (or Wait passed), with it in submitAns.Task: a submit and
	// wait (POST /v1/tasks?wait=) forwarded once instead of twice. A peer
	// of a release without it ignores it and answers at once.
	Wait time.Duration `json:"wait,omitempty"`
	// Req names the request of a keyed submission that waits, the same in
	// the forward asked again without a wait after a revocation cut it:
	// the owner answers Created when this request created the group
	// (creators). A peer of a release without it ignores it, and a
	// request asked again is answered as a repeat of its key.
	Req string `json:"req,omitempty"`
}

func (r *submitReq) feature() (uint64, string) { return concurrencyFeature(r.Spec) }

type submitAns struct {
	rpcError
	Submit *api.SubmitResult `json:"submit,omitempty"`
	// Task is the first task after the wait; absent when none was asked
	// or its read failed (the submission stands: the caller reads again).
	Task *shard.TaskView `json:"task,omitempty"`
}

func (*submitReq) op() string   { return opSubmit }
func (*submitReq) forwardSpan() {}
func (r *submitReq) serve(ctx context.Context, p *Peer) (submitAns, error) {
	if r.Spec == nil {
		return submitAns{}, errors.New("peer: forwarded submit without a spec")
	}
	s, v, err := local{p}.SubmitWait(ctx, r.Spec, r.Wait, r.Req)
	return submitAns{Submit: &s, Task: v}, err
}

// taskReq reads a task, waiting up to Wait for it to end.
type taskReq struct {
	rpcHeader
	Task shard.TaskID  `json:"task,omitempty"`
	Wait time.Duration `json:"wait,omitempty"`
}

type taskAns struct {
	rpcError
	Task *shard.TaskView `json:"task,omitempty"`
}

func (*taskReq) op() string { return opTask }
func (r *taskReq) serve(ctx context.Context, p *Peer) (taskAns, error) {
	v, err := local{p}.Task(ctx, r.Task, r.Wait)
	return taskAns{Task: &v}, err
}

// groupReq reads a group, waiting up to Wait for it to end.
type groupReq struct {
	rpcHeader
	Group   shard.GroupID `json:"group,omitempty"`
	Wait    time.Duration `json:"wait,omitempty"`
	NoTasks bool          `json:"no_tasks,omitempty"` // a summary without the task list
}

type groupAns struct {
	rpcError
	Group *shard.GroupView `json:"group,omitempty"`
	// Deaths carries, in opGroupBin's answer, the tasks' Deaths, which
	// its binary task views do not (a peer that predates them ignores it).
	Deaths map[shard.TaskID]shard.Deaths `json:"deaths,omitempty"`
}

func (*groupReq) op() string { return opGroup }
func (r *groupReq) serve(ctx context.Context, p *Peer) (groupAns, error) {
	v, err := local{p}.Group(ctx, r.Group, r.Wait, !r.NoTasks)
	return groupAns{Group: &v}, err
}

// eventsReq reads a task's history.
type eventsReq struct {
	rpcHeader
	Task shard.TaskID `json:"task,omitempty"`
}

type eventsAns struct {
	rpcError
	Events []shard.TaskEvent `json:"events,omitempty"`
}

func (*eventsReq) op() string { return opEvents }
func (r *eventsReq) serve(ctx context.Context, p *Peer) (eventsAns, error) {
	evs, err := local{p}.TaskEvents(ctx, r.Task)
	return eventsAns{Events: evs}, err
}

// cancelReq cancels a task, or a group when Task is empty.
type cancelReq struct {
	rpcHeader
	Group shard.GroupID `json:"group,omitempty"`
	Task  shard.TaskID  `json:"task,omitempty"`
	By    string        `json:"by,omitempty"`
}

func (*cancelReq) op() string { return opCancel }
func (r *cancelReq) serve(ctx context.Context, p *Peer) (rpcError, error) {
	return rpcError{}, local{p}.cancel(ctx, r.Group, r.Task, r.By)
}

// retryReq runs a failed or canceled task (or a group's) again.
type retryReq struct {
	rpcHeader
	Group shard.GroupID `json:"group,omitempty"`
	Task  shard.TaskID  `json:"task,omitempty"`
	By    string        `json:"by,omitempty"`
	Key   string        `json:"key,omitempty"` // idempotency key
}

// retryAns says whether the retry was a repeat of its key (a peer of an
// older release answers without it: not a repeat).
type retryAns struct {
	rpcError
	Repeat bool `json:"repeat,omitempty"`
}

func (*retryReq) op() string { return opRetry }
func (r *retryReq) serve(ctx context.Context, p *Peer) (retryAns, error) {
	repeat, err := local{p}.retry(ctx, r.Group, r.Task, r.By, r.Key)
	return retryAns{Repeat: repeat}, err
}

// logsReq reads the log of a run of this peer.
type logsReq struct {
	rpcHeader
	Task  shard.TaskID `json:"task,omitempty"`
	Round uint64       `json:"round,omitempty"` // the run
	From  int          `json:"from,omitempty"`  // the first line wanted
}

type logsAns struct {
	rpcError
	Logs *LogPage `json:"logs,omitempty"`
}

func (*logsReq) op() string { return opLogs }
func (r *logsReq) serve(_ context.Context, p *Peer) (logsAns, error) {
	page := p.logs.read(r.Task, shard.Round(r.Round), r.From)
	return logsAns{Logs: &page}, nil
}

// listReq lists the tasks (or groups) of the partitions this peer serves.
type listReq struct {
	rpcHeader
	Filter *shard.Filter `json:"filter,omitempty"`
	Groups bool          `json:"groups,omitempty"` // groups, not tasks
}

type listAns struct {
	rpcError
	List *node.ListResult `json:"list,omitempty"`
}

func (*listReq) op() string { return opList }
func (r *listReq) serve(ctx context.Context, p *Peer) (a listAns, err error) {
	if r.Filter == nil {
		return a, errors.New("peer: forwarded list without a filter")
	}
	err = p.read(ctx, func(n *node.Node) error { l := n.List(r.Filter, r.Groups); a.List = &l; return nil })
	return a, err
}

// statsReq counts the handlers' tasks of the partitions this peer serves.
type statsReq struct{ rpcHeader }

type statsAns struct {
	rpcError
	Stats *node.StatsResult `json:"stats,omitempty"`
}

func (*statsReq) op() string { return opStats }
func (r *statsReq) serve(ctx context.Context, p *Peer) (a statsAns, err error) {
	err = p.read(ctx, func(n *node.Node) error { s := n.HandlerStats(); a.Stats = &s; return nil })
	return a, err
}

// auditReq reads the audit trail of the partitions this peer serves.
type auditReq struct{ rpcHeader }

type auditAns struct {
	rpcError
	Audit []shard.AuditEntry `json:"audit,omitempty"`
}

func (*auditReq) op() string { return opAudit }
func (r *auditReq) serve(ctx context.Context, p *Peer) (a auditAns, err error) {
	err = p.read(ctx, func(n *node.Node) error { a.Audit = n.Audit(); return nil })
	return a, err
}

// workersReq lists this peer's external workers.
type workersReq struct{ rpcHeader }

type workersAns struct {
	rpcError
	Workers []api.WorkerInfo `json:"workers,omitempty"`
}

func (*workersReq) op() string { return opWorkers }
func (r *workersReq) serve(_ context.Context, p *Peer) (workersAns, error) {
	return workersAns{Workers: p.hub.list(time.Now())}, nil
}
