package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"empty", nil, math.NaN()},
		{"one", []float64{3}, 3},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
		{"duplicates", []float64{2, 2, 9}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := Median(in); !sameFloat(got, tt.want) {
				t.Errorf("Median(%v) = %v; want %v", tt.xs, got, tt.want)
			}
			if !slices.Equal(in, tt.xs) {
				t.Errorf("Median modified its input: %v", in)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted
	}
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, math.NaN()},
		{"p0 invalid", hundred, 0, math.NaN()},
		{"p101 invalid", hundred, 101, math.NaN()},
		{"one value", []float64{7}, 99, 7},
		{"p50 of 100", hundred, 50, 50},
		{"p99 of 100", hundred, 99, 99},
		{"p100 is max", hundred, 100, 100},
		{"p1 is min", hundred, 1, 1},
		{"p50 of 4 (nearest rank)", []float64{10, 20, 30, 40}, 50, 20},
		{"p99 of 4 is max", []float64{10, 20, 30, 40}, 99, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.xs, tt.p); !sameFloat(got, tt.want) {
				t.Errorf("Percentile(%v, %v) = %v; want %v", len(tt.xs), tt.p, got, tt.want)
			}
		})
	}
}

func TestMinMax(t *testing.T) {
	if lo, hi := MinMax([]float64{3, -1, 8}); lo != -1 || hi != 8 {
		t.Errorf("MinMax = %v, %v; want -1, 8", lo, hi)
	}
	if lo, hi := MinMax(nil); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("MinMax(nil) = %v, %v; want NaN, NaN", lo, hi)
	}
}

func TestLowerBoundOfSharedDurations(t *testing.T) {
	ds, err := loadDurations("")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ds), 300; got != want {
		t.Fatalf("embedded durations: %d; want %d", got, want)
	}
	if got, want := lowerBound(ds, 3*2), 2900*time.Millisecond; got != want {
		t.Errorf("lowerBound(w3, 6 slots) = %v; want %v (docs/design.md)", got, want)
	}
	if got, want := lowerBound([]int{10, 10, 500}, 6), 500*time.Millisecond; got != want {
		t.Errorf("lowerBound with a long task = %v; want %v", got, want)
	}
}

func TestParseDurationsErrors(t *testing.T) {
	for _, in := range []string{"", "# only a comment\n", "20\nabc\n", "20\n-5\n"} {
		if _, err := parseDurations([]byte(in)); err == nil {
			t.Errorf("parseDurations(%q) = nil error; want one", in)
		}
	}
}

func TestSummarizeAndTable(t *testing.T) {
	w := WorkloadReport{Name: W2, Reps: []RepResult{
		{Rep: 1, Metrics: []Metric{{"p50", "ms", 3}, {"p99", "ms", math.NaN()}}},
		{Rep: 2, Metrics: []Metric{{"p50", "ms", 1}, {"p99", "ms", 9}}},
		{Rep: 3, Metrics: []Metric{{"p50", "ms", 2}, {"p99", "ms", 7}}},
	}}
	w.summarize()
	want := []Summary{{"p50", "ms", 2, 1, 3, 3}, {"p99", "ms", 8, 7, 9, 2}}
	if !slices.Equal(w.Summary, want) {
		t.Errorf("Summary = %+v; want %+v", w.Summary, want)
	}
	var b strings.Builder
	if err := (Report{Workloads: []WorkloadReport{w}}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "[1 - 3]") || !strings.Contains(b.String(), "[7 - 9]") {
		t.Errorf("table lacks [min - max]:\n%s", b.String())
	}
	b.Reset()
	w.Summary = append(w.Summary, Summary{"none", "ms", math.NaN(), math.NaN(), math.NaN(), 0})
	if err := (Report{Workloads: []WorkloadReport{w}}).WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON with NaN = %v", err)
	}
	if !strings.Contains(b.String(), `"value": null`) || !strings.Contains(b.String(), `"median": null`) {
		t.Errorf("NaN not written as null:\n%s", b.String())
	}
}

func sameFloat(a, b float64) bool {
	return a == b || (math.IsNaN(a) && math.IsNaN(b))
}

// TestParseCounters reads the cost counters from a /metrics page: entries
// proposed, outcomes other than stale ones, process CPU.
func TestParseCounters(t *testing.T) {
	page := `# HELP needle_outcomes_total x
needle_outcomes_total{result="failed"} 2
needle_outcomes_total{result="stale"} 5
needle_outcomes_total{result="succeeded"} 8
needle_protocol_events_total{event="entries_proposed"} 4
needle_protocol_events_total{event="steals_asked"} 9
needle_protocol_events_total{event="peer_deaths"} 3
needle_protocol_events_total{event="abdications"} 7
process_cpu_seconds_total 1.5
`
	got := parseCounters([]byte(page))
	if got != (counters{entries: 4, tasks: 10, cpu: 1.5, deaths: 3, abdications: 7}) {
		t.Errorf("parseCounters = %+v; want entries 4, tasks 10, cpu 1.5, deaths 3, abdications 7", got)
	}
	ms := costMetrics(counters{entries: 1, tasks: 0, cpu: 0.5, deaths: 1, abdications: 7}, got)
	if len(ms) != 4 || ms[0].Value != 0.3 || ms[1].Value != 1e5 || ms[2].Value != 2 || ms[3].Value != 0 {
		t.Errorf("costMetrics = %+v; want 0.3 entries and 100000 us per task, 2 deaths, 0 abdications", ms)
	}
}
