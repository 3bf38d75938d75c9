package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// Metric is one measured number of one repetition.
type Metric struct {
	Name  string  `json:"name"`  // e.g. "tasks/s", "p99"
	Unit  string  `json:"unit"`  // e.g. "tasks/s", "ms", "s", "x", "tasks"
	Value float64 `json:"value"` // NaN (JSON null) when not measurable
}

// MarshalJSON writes NaN as null, which JSON has no number for.
func (m Metric) MarshalJSON() ([]byte, error) {
	type plain Metric
	if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		return json.Marshal(struct {
			plain
			Value *float64 `json:"value"`
		}{plain: plain(m)})
	}
	return json.Marshal(plain(m))
}

// RepResult is one repetition of one workload.
type RepResult struct {
	Rep     int      `json:"rep"` // 1-based
	Metrics []Metric `json:"metrics"`
	// Problems lists failed checks (wrong results, lost tasks), at most
	// maxProblems of them; ProblemCount counts all.
	Problems     []string `json:"problems,omitempty"`
	ProblemCount int      `json:"problem_count,omitempty"`
}

// Summary is one metric over every repetition.
type Summary struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"` // repetitions that measured it
}

// WorkloadReport is every repetition of one workload.
type WorkloadReport struct {
	Name    string      `json:"name"`
	Skipped string      `json:"skipped,omitempty"` // why it did not run
	Error   string      `json:"error,omitempty"`   // why it stopped early
	Reps    []RepResult `json:"reps"`
	Summary []Summary   `json:"summary"`
}

// Report is the outcome of Run.
type Report struct {
	Peers     int              `json:"peers"`
	Slots     int              `json:"slots"`
	Steal     bool             `json:"steal"`
	Reps      int              `json:"reps"`
	PeerProcs int              `json:"peer_procs,omitempty"` // each peer's GOMAXPROCS; 0: the runtime's default
	Workloads []WorkloadReport `json:"workloads"`
}

// summarize fills w.Summary from w.Reps, metrics in first-seen order.
func (w *WorkloadReport) summarize() {
	var order []Summary
	vals := map[string][]float64{}
	for _, r := range w.Reps {
		for _, m := range r.Metrics {
			if _, ok := vals[m.Name]; !ok {
				order = append(order, Summary{Name: m.Name, Unit: m.Unit})
				vals[m.Name] = nil
			}
			if !math.IsNaN(m.Value) {
				vals[m.Name] = append(vals[m.Name], m.Value)
			}
		}
	}
	for i := range order {
		v := vals[order[i].Name]
		order[i].Median = Median(v)
		order[i].Min, order[i].Max = MinMax(v)
		order[i].N = len(v)
	}
	w.Summary = order
}

// MarshalJSON writes NaN as null.
func (s Summary) MarshalJSON() ([]byte, error) {
	num := func(f float64) *float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return &f
	}
	return json.Marshal(struct {
		Name   string   `json:"name"`
		Unit   string   `json:"unit"`
		Median *float64 `json:"median"`
		Min    *float64 `json:"min"`
		Max    *float64 `json:"max"`
		N      int      `json:"n"`
	}{s.Name, s.Unit, num(s.Median), num(s.Min), num(s.Max), s.N})
}

// WriteTable prints one row per workload metric: median and [min-max].
func (r Report) WriteTable(w io.Writer) error {
	procs := ""
	if r.PeerProcs > 0 {
		procs = fmt.Sprintf(", GOMAXPROCS %d each", r.PeerProcs)
	}
	fmt.Fprintf(w, "needle bench: %d peers x %d slots, steal=%v%s, %d reps\n",
		r.Peers, r.Slots, r.Steal, procs, r.Reps)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tmetric\tmedian\t[min - max]\tunit\treps\t")
	for _, wr := range r.Workloads {
		for _, s := range wr.Summary {
			fmt.Fprintf(tw, "%s\t%s\t%s\t[%s - %s]\t%s\t%d\t\n",
				wr.Name, s.Name, num(s.Median), num(s.Min), num(s.Max), s.Unit, s.N)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, wr := range r.Workloads {
		writeProblems(w, wr)
	}
	return nil
}

// writeProblems prints why a workload was skipped or stopped, and its
// failed checks.
func writeProblems(w io.Writer, wr WorkloadReport) {
	if wr.Skipped != "" {
		fmt.Fprintf(w, "%s: skipped: %s\n", wr.Name, wr.Skipped)
	}
	if wr.Error != "" {
		fmt.Fprintf(w, "%s: error: %s\n", wr.Name, wr.Error)
	}
	for _, r := range wr.Reps {
		if r.ProblemCount == 0 {
			continue
		}
		fmt.Fprintf(w, "%s rep %d: %d failed checks:\n", wr.Name, r.Rep, r.ProblemCount)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		if more := r.ProblemCount - len(r.Problems); more > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", more)
		}
	}
}

// num formats a table number with 4 significant digits, "-" for NaN.
func num(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	if math.Abs(f) >= 1000 || f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
