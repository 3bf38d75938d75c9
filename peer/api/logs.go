package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/needle-mesh/needle/shard"
)

// LogLine is one line of a task's log.
type LogLine struct {
	Seq  int       `json:"seq"` // 1-based within the attempt, counting lines cut from the head
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// LogRun is one run (attempt) of a task: who ran it and when it started.
type LogRun struct {
	Attempt int       `json:"attempt"` // the run's lease round
	Peer    string    `json:"peer"`
	At      time.Time `json:"at"`
}

// TaskLogs is the body of GET /v1/tasks/{id}/logs.
type TaskLogs struct {
	Task    string    `json:"task"`
	Attempt int       `json:"attempt"` // 0: the task has not run yet
	Peer    string    `json:"peer,omitempty"`
	Runs    []LogRun  `json:"runs"`
	Lines   []LogLine `json:"lines"`
	// DroppedBytes counts what was cut from the head of the attempt's log
	// to keep its tail within the peer's --max-log.
	DroppedBytes int  `json:"dropped_bytes"`
	Done         bool `json:"done"`     // the attempt ended: its log is complete
	Terminal     bool `json:"terminal"` // the task is terminal
	// Unavailable says why the lines are missing (the runner is not
	// reachable); "" when they are here.
	Unavailable string `json:"unavailable,omitempty"`
}

// LogReader is what a Backend implements to serve task logs.
type LogReader interface {
	// TaskLogs returns the lines of attempt (0: the latest) of task id
	// from line seq from on.
	TaskLogs(ctx context.Context, id shard.TaskID, attempt, from int) (TaskLogs, error)
}

func (s *server) logRoutes(l LogReader) []route {
	return []route{{"GET", "/v1/tasks/{id}/logs", ScopeRead, func(w http.ResponseWriter, r *http.Request) { s.taskLogs(w, r, l) }}}
}

// logPoll is how often a follow asks for new lines.
const logPoll = 100 * time.Millisecond

func (s *server) taskLogs(w http.ResponseWriter, r *http.Request, l LogReader) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	attempt, follow, err := logParams(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var check func() error // nil: nothing to re-check (no wait, or no tokens)
	if follow {
		release, ok := s.holdWait(w, r, "follow")
		if !ok {
			return
		}
		defer release()
		// A token revoked (or left without read) while the follow holds
		// ends it: with its 401 or 403 before the stream starts, by
		// closing the stream after (its status is sent).
		var stop func()
		ctx, check, stop = s.watchToken(r, ScopeRead)
		defer stop()
	}
	page, err := l.TaskLogs(ctx, id, attempt, 1)
	if revoked(w, check) {
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !follow {
		writeJSON(w, http.StatusOK, page)
		return
	}
	s.followLogs(ctx, w, l, id, attempt, page)
}

func logParams(r *http.Request) (attempt int, follow bool, err error) {
	q := r.URL.Query()
	for k := range q {
		if k != "attempt" && k != "follow" {
			return 0, false, fieldErr(k, "unknown parameter (want attempt, follow)")
		}
	}
	if v := q.Get("attempt"); v != "" {
		if attempt, err = strconv.Atoi(v); err != nil || attempt < 1 {
			return 0, false, fieldErr("attempt", "%q: want a positive integer", v)
		}
	}
	if v := q.Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			return 0, false, fieldErr("follow", "%q: want true or false", v)
		}
	}
	return attempt, follow, nil
}

// followLogs streams the log as Server-Sent Events: an "attempt" event
// when a run starts (its TaskLogs without lines), a "line" event per
// line, and "end" once the attempt is done and the task terminal (or, with
// no attempt asked, once the latest run is done and the task terminal, or
// at once for a terminal task that never ran). The stream ends without
// "end" when ctx does: the client went, or its token was revoked.
func (s *server) followLogs(ctx context.Context, w http.ResponseWriter, l LogReader, id shard.TaskID, attempt int, page TaskLogs) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	cur, next := 0, 1
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	for {
		if page.Attempt != cur {
			cur, next = page.Attempt, 1
			sse(w, "attempt", attemptHead{TaskLogs: page})
		}
		for _, ln := range page.Lines {
			if ln.Seq >= next {
				sse(w, "line", ln)
				next = ln.Seq + 1
			}
		}
		// A terminal task that never ran has no run to wait for (a task
		// canceled before it ran was followed forever).
		if page.Terminal && (page.Done || page.Attempt == 0) {
			sse(w, "end", map[string]bool{"terminal": true})
			flush(fl)
			return
		}
		flush(fl)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p, err := l.TaskLogs(ctx, id, attempt, next)
		if err == nil {
			if p.Attempt != cur {
				p, err = l.TaskLogs(ctx, id, attempt, 1)
			}
			if err == nil {
				page = p
			}
		}
	}
}

// attemptHead is the data of a follow's "attempt" event: the run's
// TaskLogs without lines (the field is left out, not null; the lines come
// as "line" events).
type attemptHead struct {
	TaskLogs
	Lines []LogLine `json:"lines,omitempty"` // always nil: hides TaskLogs.Lines
}

func flush(fl http.Flusher) {
	if fl != nil {
		fl.Flush()
	}
}

func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}
