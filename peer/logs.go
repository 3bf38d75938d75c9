package peer

import (
	"context"
	"fmt"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// runsOf lists a task's runs from its history: each lease is one run,
// attempt N being lease round N.
func runsOf(evs []shard.TaskEvent) []api.LogRun {
	var runs []api.LogRun
	for _, e := range evs {
		if e.Type == shard.EvLeased {
			runs = append(runs, api.LogRun{Attempt: int(e.Round), Peer: shard.HolderPeer(e.Holder), At: e.At})
		}
	}
	return runs
}

// logsAskTimeout bounds the wait for a runner's answer to a log read.
const logsAskTimeout = 5 * time.Second

// TaskLogs returns the log of a task's attempt (0: the latest run) from
// line from on, asking the peer that ran it (api.LogReader).
func (b backend) TaskLogs(ctx context.Context, id shard.TaskID, attempt, from int) (api.TaskLogs, error) {
	evs, err := b.TaskEvents(ctx, id)
	if err != nil {
		return api.TaskLogs{}, err
	}
	out := api.TaskLogs{Task: string(id), Runs: runsOf(evs), Lines: []api.LogLine{}}
	if out.Runs == nil {
		out.Runs = []api.LogRun{}
	}
	tv, err := b.Task(ctx, id, 0)
	if err != nil {
		return api.TaskLogs{}, err
	}
	out.Terminal = tv.State.Terminal()
	run, ok := pickRun(out.Runs, attempt)
	if !ok {
		if attempt != 0 {
			return api.TaskLogs{}, &api.FieldError{Field: "attempt", Message: fmt.Sprintf("task %s has no attempt %d (it ran %d times)", id, attempt, len(out.Runs))}
		}
		return out, nil // not run yet
	}
	out.Attempt, out.Peer = run.Attempt, run.Peer
	var page LogPage
	if run.Peer == b.p.ID() {
		page = b.p.logs.read(id, shard.Round(run.Attempt), from)
	} else {
		var state node.PeerState
		_ = b.p.read(ctx, func(n *node.Node) error { state, _ = n.PeerState(run.Peer); return nil })
		if state == node.PeerDead {
			out.Unavailable = "peer " + run.Peer + " that ran it is dead"
			return out, nil
		}
		// The lines are the runner's alone: a runner that does not answer
		// soon is answered for, not waited for.
		actx, cancel := context.WithTimeout(ctx, logsAskTimeout)
		a, err := forward[logsAns](actx, b.p, run.Peer, &logsReq{Task: id, Round: uint64(run.Attempt), From: from})
		cancel()
		if err != nil || a.Logs == nil {
			out.Unavailable = "peer " + run.Peer + " that ran it does not answer"
			return out, nil
		}
		page = *a.Logs
	}
	out.Lines, out.DroppedBytes = page.Lines, page.Dropped
	// An attempt whose runner has no log of it (it restarted, or ran an
	// older needle) is done once a later run or the task's end says so.
	out.Done = page.Done || (!page.Found && (out.Terminal || run.Attempt < out.Runs[len(out.Runs)-1].Attempt))
	return out, nil
}

func pickRun(runs []api.LogRun, attempt int) (api.LogRun, bool) {
	if len(runs) == 0 {
		return api.LogRun{}, false
	}
	if attempt == 0 {
		return runs[len(runs)-1], true
	}
	for _, r := range runs {
		if r.Attempt == attempt {
			return r, true
		}
	}
	return api.LogRun{}, false
}
