package bench

import (
	"context"
	"fmt"
	"time"
)

// WI is the idle workload: nothing is submitted; each peer's CPU is read
// from its /metrics before and after IdleFor on the settled mesh.
const WI = "wi"

// DefaultIdleFor is how long WI measures.
const DefaultIdleFor = 30 * time.Second

// wi measures what an idle mesh costs: the CPU of each peer over IdleFor,
// as a percentage of one core (median and max over the peers), and of the
// whole mesh.
func (r *runner) wi(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	before, err := cl.peerCounters(ctx)
	if err != nil {
		return RepResult{}, fmt.Errorf("bench: wi: %w", err)
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return RepResult{}, ctx.Err()
	case <-time.After(r.cfg.IdleFor): // the measured period itself
	}
	after, err := cl.peerCounters(ctx)
	if err != nil {
		return RepResult{}, fmt.Errorf("bench: wi: %w", err)
	}
	secs := time.Since(start).Seconds()
	pct := make([]float64, len(before))
	total := 0.0
	for i := range before {
		pct[i] = (after[i].cpu - before[i].cpu) / secs * 100
		total += pct[i]
	}
	return RepResult{Rep: rep, Metrics: []Metric{
		{"cpu/peer p50", "% core", Percentile(pct, 50)},
		{"cpu/peer max", "% core", Percentile(pct, 100)},
		{"cpu mesh", "% core", total},
	}}, nil
}

// peerCounters reads every peer's counters, in peer order (all must be up).
func (c *Cluster) peerCounters(ctx context.Context) ([]counters, error) {
	out := make([]counters, c.Len())
	for i := range out {
		got, err := c.Client(i).counters(ctx)
		if err != nil {
			return nil, fmt.Errorf("peer %d: %w", i, err)
		}
		out[i] = got
	}
	return out, nil
}
