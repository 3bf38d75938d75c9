package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/shard"
)

// logsBackend serves one finished run's log of two lines.
type logsBackend struct{ *fakeBackend }

func (logsBackend) TaskLogs(_ context.Context, id shard.TaskID, attempt, from int) (TaskLogs, error) {
	p := TaskLogs{Task: string(id), Attempt: 1, Peer: "peerA", Runs: []LogRun{{Attempt: 1, Peer: "peerA", At: t0}},
		Lines: []LogLine{}, Done: true, Terminal: true}
	for _, ln := range []LogLine{{Seq: 1, At: t0, Text: "one"}, {Seq: 2, At: t0, Text: "two"}} {
		if ln.Seq >= from {
			p.Lines = append(p.Lines, ln)
		}
	}
	return p, nil
}

// The follow's "attempt" event is the log's object without lines, as
// docs/api.md says (it carried "lines":null); the plain answer keeps them.
func TestFollowLogsAttemptHasNoLines(t *testing.T) {
	srv := httptest.NewServer(NewHandler(logsBackend{&fakeBackend{}}, HandlerOptions{}))
	t.Cleanup(srv.Close)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	body := get("/v1/tasks/g1.0/logs?follow=true")
	_, rest, ok := strings.Cut(body, "event: attempt\ndata: ")
	data, _, _ := strings.Cut(rest, "\n")
	if !ok || strings.Contains(data, `"lines"`) || !strings.Contains(data, `"attempt":1`) {
		t.Errorf("attempt event data %q; want the run without a lines field\n%s", data, body)
	}
	if n := strings.Count(body, "event: line\n"); n != 2 || !strings.Contains(body, "event: end\n") {
		t.Errorf("follow sent %d line events (want 2) and an end:\n%s", n, body)
	}
	if plain := get("/v1/tasks/g1.0/logs"); !strings.Contains(plain, `"lines":[{"seq":1`) {
		t.Errorf("GET logs = %s; want its lines", plain)
	}
}
