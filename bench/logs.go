package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// WG measures how soon a line a task prints reaches a follower, as
// `needle logs -f` shows it: WGTasks `exec` tasks, one after another,
// submitted to peer 0, each printing its clock (ns) to stderr 300 ms after
// it starts; the last peer is asked for the log with
// GET /v1/tasks/{id}/logs?follow=true (Server-Sent Events, what the CLI
// reads), so the line usually crosses the mesh from the peer that ran the
// task. Latency = receipt - the printed clock (one machine, one clock).
const WG = "wg"

// DefaultWGTasks is the number of WG tasks.
const DefaultWGTasks = 20

// wgExec is the --exec-allow entry WG's peers get, and the script its
// tasks run.
const (
	wgExec   = "stamp=/bin/sh"
	wgScript = "sleep 0.3; date +%s%N >&2; sleep 0.2"
)

func (r *runner) wg(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	var ck checks
	var lat []float64
	follower := cl.Client(cl.Len() - 1)
	for i := range DefaultWGTasks {
		var id string
		err := retry503(ctx, func() error {
			var err error
			id, err = cl.Client(0).SubmitTask(ctx, TaskSpec{Handler: "exec",
				Payload: json.RawMessage(`{"command":"stamp","args":["-c",` + strconv.Quote(wgScript) + `]}`)})
			return err
		})
		if err != nil {
			return RepResult{}, fmt.Errorf("bench: wg submit %d: %w", i, err)
		}
		ms, ended, err := followFirstLine(ctx, follower, id)
		switch {
		case err != nil:
			ck.addf("task %s: %v", id, err)
		case !ended:
			ck.addf("task %s: the follow did not end with the task", id)
		}
		if err == nil {
			lat = append(lat, ms)
		}
	}
	res := RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"lines", "lines", float64(len(lat))},
	}}
	if len(lat) > 0 {
		res.Metrics = append(res.Metrics, Metric{"line p50", "ms", Percentile(lat, 50)},
			Metric{"line p99", "ms", Percentile(lat, 99)}, Metric{"line max", "ms", Percentile(lat, 100)})
	}
	return res, nil
}

// followFirstLine follows a task's log until the end event and returns how
// long after its printing the first line (a clock in ns) arrived.
func followFirstLine(ctx context.Context, c *Client, id string) (ms float64, ended bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/tasks/"+url.PathEscape(id)+"/logs?follow=true", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("follow: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	event, got := "", false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "line" && !got:
			at := time.Now()
			var ln struct{ Text string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ln); err != nil {
				return 0, false, fmt.Errorf("line event %q: %w", line, err)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(ln.Text), 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("line %q is not a clock", ln.Text)
			}
			ms, got = millis(at.Sub(time.Unix(0, ns))), true
		case event == "end":
			return ms, true, nil
		}
	}
	if !got {
		return 0, false, fmt.Errorf("no line before the stream ended (%v)", sc.Err())
	}
	return ms, false, nil
}
