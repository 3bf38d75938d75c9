package peer

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue returns the value of the series line named series (name and
// labels, as exposed) in a /metrics scrape, and whether it is there.
func metricValue(scraped, series string) (float64, bool) {
	for line := range strings.Lines(scraped) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestPartitionHealthMetrics: a lone ready peer exports its partition
// health, none unowned and none under-replicated, and its leader changes
// (one per partition it came to lead).
func TestPartitionHealthMetrics(t *testing.T) {
	_, c := startPeerWith(t, Config{}) // 16 partitions
	var got string
	// The gauges are refreshed once a second: the first refresh after
	// the peer led its 16 partitions counts 16 leader changes.
	waitFor(t, "needle_leader_changes_total 16", 10*time.Second, func() bool {
		got = scrape(t, c.BaseURL)
		v, ok := metricValue(got, "needle_leader_changes_total")
		return ok && v == 16
	})
	for _, want := range []string{
		`needle_partitions_unowned 0`,
		`needle_partitions_under_replicated 0`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("a ready lone peer's /metrics lacks %s", want)
		}
	}
}

// TestMetricsZeroSeries: the labelled counters' documented series exist
// at 0 before any event, so "absent" and "0" cannot be confused.
func TestMetricsZeroSeries(t *testing.T) {
	_, c := startPeerWith(t, Config{})
	got := scrape(t, c.BaseURL)
	for _, want := range []string{
		`needle_outcomes_total{result="succeeded"} 0`,
		`needle_outcomes_total{result="failed"} 0`,
		`needle_outcomes_total{result="timed_out"} 0`,
		`needle_outcomes_total{result="stale"} 0`,
		`needle_tasks_finished_total{state="SUCCEEDED"} 0`,
		`needle_tasks_finished_total{state="FAILED"} 0`,
		`needle_tasks_finished_total{state="CANCELED"} 0`,
		`needle_submissions_refused_total{reason="disk"} 0`,
		`needle_submissions_refused_total{reason="memory"} 0`,
		`needle_protocol_events_total{event="peer_deaths"} 0`,
		`needle_protocol_events_total{event="identity_conflicts"} 0`,
		`needle_protocol_events_total{event="unsafe_recoveries"} 0`,
		`needle_protocol_events_total{event="abdications"} 0`,
		`needle_protocol_events_total{event="lease_expiries"} 0`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("before any event, /metrics lacks %s", want)
		}
	}
}

// TestUnderReplicatedMetric: in a mesh of three with three replicas, a
// stopped peer is a voter of every partition, so once the survivors hold
// it dead each reports the partitions it leads under-replicated.
func TestUnderReplicatedMetric(t *testing.T) {
	peers := startMesh3(t)
	for _, mp := range peers {
		waitFor(t, "no partition under-replicated in a whole mesh", 30*time.Second, func() bool {
			v, ok := metricValue(scrape(t, mp.c.BaseURL), "needle_partitions_under_replicated")
			return ok && v == 0
		})
	}
	peers[2].stop()
	waitFor(t, "a survivor to report partitions under-replicated", 30*time.Second, func() bool {
		for _, mp := range peers[:2] {
			if v, ok := metricValue(scrape(t, mp.c.BaseURL), "needle_partitions_under_replicated"); ok && v > 0 {
				return true
			}
		}
		return false
	})
}
