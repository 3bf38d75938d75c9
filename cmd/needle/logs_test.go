package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// logsBackend answers the log of a task that never ran, in the state its
// group id names.
type logsBackend struct{ *fakeBackend }

var unrunStates = map[shard.GroupID]shard.State{"gc": shard.Canceled, "gf": shard.Failed, "ga": shard.Ready}

func (b logsBackend) TaskLogs(_ context.Context, id shard.TaskID, _, _ int) (api.TaskLogs, error) {
	return api.TaskLogs{Task: string(id), Runs: []api.LogRun{}, Lines: []api.LogLine{}, Terminal: unrunStates[id.Group()].Terminal()}, nil
}

// needle logs of a task that ended without running says so (it said "has
// not run yet" of a task canceled before it ran), and -f ends at once (it
// followed such a task forever).
func TestLogsOfTaskThatNeverRan(t *testing.T) {
	b := logsBackend{&fakeBackend{TaskFn: func(id shard.TaskID, _ time.Duration) (shard.TaskView, error) {
		return taskIn(id, unrunStates[id.Group()]), nil
	}}}
	hs := httptest.NewServer(api.NewHandler(b, api.HandlerOptions{}))
	t.Cleanup(hs.Close)
	srv := hs.URL
	for _, follow := range []bool{false, true} {
		args := func(id string) []string {
			if follow {
				return []string{"logs", "-f", id}
			}
			return []string{"logs", id}
		}
		runCLI(t, srv, "", args("gc.0")...).check(t, 0, "", "gc.0 was canceled before it ran\n")
		runCLI(t, srv, "", args("gf.0")...).check(t, 0, "", "gf.0 is FAILED and never ran\n")
		if !follow {
			runCLI(t, srv, "", args("ga.0")...).check(t, 0, "", "ga.0 has not run yet\n")
		}
	}
}
