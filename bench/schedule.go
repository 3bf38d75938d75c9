package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// WS measures schedule firing accuracy: an `every: 1s` schedule on the
// cluster for WSSeconds; each firing's lag is its group's creation time
// minus its tick. Every tick must fire exactly once.
const WS = "ws"

// DefaultWSSeconds is how long WS lets its schedule run.
const DefaultWSSeconds = 20

type schedule struct {
	ID      string `json:"id"`
	Firings []struct {
		At    time.Time `json:"at"`
		Group string    `json:"group"`
		State string    `json:"state"`
	} `json:"firings"`
}

type groupSummary struct {
	CreatedAt Time `json:"created_at"`
}

func (r *runner) ws(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	body := map[string]any{"name": fmt.Sprintf("bench-%d", rep), "every": "1s", "overlap": "allow",
		"group": map[string]any{"mode": "parallel", "tasks": []map[string]any{{"handler": "echo", "payload": rep}}}}
	var s schedule
	if err := retry503(ctx, func() error {
		return cl.Client(0).do(ctx, http.MethodPost, "/v1/schedules", 0, body, &s)
	}); err != nil {
		return RepResult{}, fmt.Errorf("bench: ws create schedule: %w", err)
	}
	select { // the workload is time itself: let the schedule fire
	case <-time.After(time.Duration(DefaultWSSeconds) * time.Second):
	case <-ctx.Done():
		return RepResult{}, ctx.Err()
	}
	c := cl.Client(1 % cl.Len()) // read through another peer
	if err := retry503(ctx, func() error {
		return c.do(ctx, http.MethodGet, "/v1/schedules/"+s.ID, 0, nil, &s)
	}); err != nil {
		return RepResult{}, fmt.Errorf("bench: ws read schedule: %w", err)
	}
	_ = c.do(ctx, http.MethodDelete, "/v1/schedules/"+s.ID, 0, nil, nil)
	return r.wsResult(ctx, c, rep, &s), nil
}

func (r *runner) wsResult(ctx context.Context, c *Client, rep int, s *schedule) RepResult {
	var ck checks
	var lags []float64
	var ticks []time.Time
	for _, f := range s.Firings {
		ticks = append(ticks, f.At)
		if f.Group == "" {
			ck.addf("tick %v fired no group (state %s)", f.At, f.State)
			continue
		}
		var g groupSummary
		if err := c.do(ctx, http.MethodGet, "/v1/groups/"+f.Group+"?tasks=false", 0, nil, &g); err != nil {
			ck.addf("firing group %s: %v", f.Group, err)
			continue
		}
		lags = append(lags, float64(g.CreatedAt.Sub(f.At))/float64(time.Millisecond))
	}
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i].Sub(ticks[i-1]); d != time.Second {
			ck.addf("ticks %v and %v are %v apart; want 1s (a tick fired twice or was missed)", ticks[i-1], ticks[i], d)
		}
	}
	if len(ticks) < DefaultWSSeconds-3 {
		ck.addf("%d firings in %d s", len(ticks), DefaultWSSeconds)
	}
	slices.Sort(lags)
	res := RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"firings", "ticks", float64(len(ticks))},
	}}
	if len(lags) > 0 {
		res.Metrics = append(res.Metrics, Metric{"lag p50", "ms", Percentile(lags, 50)},
			Metric{"lag p99", "ms", Percentile(lags, 99)}, Metric{"lag max", "ms", lags[len(lags)-1]})
	}
	return res
}

// retry503 retries f while the mesh answers unavailable (leadership settling
// after start), up to about 10 s.
func retry503(ctx context.Context, f func() error) error {
	var err error
	for range 50 {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}
