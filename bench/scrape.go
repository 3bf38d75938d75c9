package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// counters are the peers' cumulative costs, summed over the cluster
// (scraped from /metrics): what the log and the processes spent.
type counters struct {
	entries float64 // Raft entries proposed (needle_protocol_events_total{event="entries_proposed"})
	tasks   float64 // handler outcomes reported (needle_outcomes_total, stale ones aside)
	cpu     float64 // process CPU seconds (process_cpu_seconds_total)
	// deaths are the peers declared dead, abdications the partition
	// leaderships given up for want of a majority's answers
	// (needle_protocol_events_total): under a workload that kills no peer,
	// every one is a false failover.
	deaths, abdications float64
}

// metricsEvery is how often a peer refreshes its protocol counters
// (peer/loop.go's sweep): a scrape this long after the work saw it all.
const metricsEvery = 1200 * time.Millisecond

// scrape sums the counters over the live peers.
func (c *Cluster) scrape(ctx context.Context) (counters, error) {
	var sum counters
	c.mu.Lock()
	var live []*Client
	for _, p := range c.peers {
		if !p.dead {
			live = append(live, p.client)
		}
	}
	c.mu.Unlock()
	for _, cl := range live {
		got, err := cl.counters(ctx)
		if err != nil {
			return sum, err
		}
		sum.entries += got.entries
		sum.tasks += got.tasks
		sum.cpu += got.cpu
		sum.deaths += got.deaths
		sum.abdications += got.abdications
	}
	return sum, nil
}

// counters reads one peer's /metrics.
func (c *Client) counters(ctx context.Context) (counters, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return counters{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return counters{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return counters{}, fmt.Errorf("GET /metrics: status %d: %v", resp.StatusCode, err)
	}
	return parseCounters(b), nil
}

// parseCounters reads the counters from the Prometheus text format.
func parseCounters(b []byte) counters {
	var out counters
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		switch {
		case name == `needle_protocol_events_total{event="entries_proposed"}`:
			out.entries += v
		case strings.HasPrefix(name, "needle_outcomes_total{") && !strings.Contains(name, `"stale"`):
			out.tasks += v
		case name == "process_cpu_seconds_total":
			out.cpu += v
		case name == `needle_protocol_events_total{event="peer_deaths"}`:
			out.deaths += v
		case name == `needle_protocol_events_total{event="abdications"}`:
			out.abdications += v
		}
	}
	return out
}

// costMetrics returns the entries and CPU per task between two scrapes,
// and the peers declared dead and the leaderships abdicated meanwhile
// (false failovers, unless the workload killed a peer).
func costMetrics(before, after counters) []Metric {
	tasks := after.tasks - before.tasks
	if tasks <= 0 {
		return nil
	}
	return []Metric{
		{"entries/task", "entries", (after.entries - before.entries) / tasks},
		{"cpu/task", "us", (after.cpu - before.cpu) * 1e6 / tasks},
		{"peer deaths", "peers", after.deaths - before.deaths},
		{"abdications", "partitions", after.abdications - before.abdications},
	}
}
