package api

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// TaskLogs returns a task's log: attempt N, or the latest run with 0.
func (c *Client) TaskLogs(ctx context.Context, id string, attempt int) (*TaskLogs, error) {
	var out TaskLogs
	_, err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/logs"+logQuery(attempt, false), nil, &out)
	return &out, err
}

func logQuery(attempt int, follow bool) string {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	if follow {
		q.Set("follow", "true")
	}
	return query(q)
}

// ErrLogCut is FollowLogs' error for a stream that ended before its
// "end" event, the log being read again without fault: the peer stopped
// or went away mid-stream.
var ErrLogCut = errors.New("api: the log stream ended before its end event")

// FollowLogs streams a task's log (Server-Sent Events) and calls on for
// each event ("attempt", "line", "end") with its JSON data, until the
// stream ends, ctx ends, or on returns an error. A stream cut before its
// "end" event is an error, not the log's end: the one of reading the log
// again (401 when the token was revoked meanwhile, which closes the
// stream), else ErrLogCut.
func (c *Client) FollowLogs(ctx context.Context, id string, attempt int, on func(event string, data []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimRight(c.BaseURL, "/")+"/v1/tasks/"+url.PathEscape(id)+"/logs"+logQuery(attempt, true), nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var buf strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && buf.Len() < 4096 {
			buf.WriteString(sc.Text())
		}
		return responseError(resp.StatusCode, []byte(buf.String()))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	event, ended := "", false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ended = ended || event == "end"
			if err := on(event, []byte(line[len("data: "):])); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil || ended || ctx.Err() != nil {
		return err
	}
	if _, err := c.TaskLogs(ctx, id, attempt); err != nil {
		return err
	}
	return ErrLogCut
}
