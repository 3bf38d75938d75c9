package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// runningLogs serves the log of a run that goes on: one line, never done.
type runningLogs struct{ *fakeBackend }

func (runningLogs) TaskLogs(_ context.Context, id shard.TaskID, attempt, from int) (TaskLogs, error) {
	p := TaskLogs{Task: string(id), Attempt: 1, Peer: "peerA", Runs: []LogRun{{Attempt: 1, Peer: "peerA", At: t0}}, Lines: []LogLine{}}
	if from <= 1 {
		p.Lines = append(p.Lines, LogLine{Seq: 1, At: t0, Text: "one"})
	}
	return p, nil
}

// A followed log whose token is removed from the set mid-stream is
// closed, and the client's FollowLogs says why (the 401 of reading the
// log again), not that the log ended; a stream cut otherwise is
// ErrLogCut.
func TestFollowLogsRevoked(t *testing.T) {
	list, err := ParseTokens("reader-token-0123456789 name=rd scope=read\nadmin-token-0123456789\n")
	if err != nil {
		t.Fatal(err)
	}
	tokens := NewTokenSet(list)
	srv := httptest.NewServer(NewHandler(runningLogs{&fakeBackend{}}, HandlerOptions{Tokens: tokens}))
	t.Cleanup(srv.Close)
	c := &Client{BaseURL: srv.URL, Token: "reader-token-0123456789"}
	started := make(chan struct{})
	var events []string
	ended := make(chan error, 1)
	go func() {
		ended <- c.FollowLogs(t.Context(), "g1.0", 0, func(event string, _ []byte) error {
			events = append(events, event)
			if event == "line" {
				close(started)
			}
			return nil
		})
	}()
	<-started // the stream is under way, its 200 sent
	tokens.SetTokens(list[1:])
	select {
	case err := <-ended:
		if e := ErrorOf(err); e == nil || e.Status != http.StatusUnauthorized || strings.Join(events, ",") != "attempt,line" {
			t.Fatalf("FollowLogs with a token revoked mid-stream = %v after events %v; want the 401 after attempt,line (no end)", err, events)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the revoked token's follow did not end in 30 s")
	}

	cut := http.NewServeMux()
	cut.HandleFunc("GET /v1/tasks/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") == "" {
			writeJSON(w, http.StatusOK, TaskLogs{Task: "g1.0", Lines: []LogLine{}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "line", LogLine{Seq: 1, Text: "one"}) // and gone, without an end
	})
	cs := httptest.NewServer(cut)
	t.Cleanup(cs.Close)
	err = (&Client{BaseURL: cs.URL}).FollowLogs(t.Context(), "g1.0", 0, func(string, []byte) error { return nil })
	if !errors.Is(err, ErrLogCut) {
		t.Fatalf("FollowLogs of a stream cut before its end = %v; want ErrLogCut", err)
	}
}
