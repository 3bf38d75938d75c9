package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"
)

// WP measures a streaming pipeline: WPItems items through WPStages stages
// of WPMillis ms sleep tasks, submitted as one group (so one peer owns it
// and the others work by stealing). Item i enters stage s as soon as it
// left stage s-1; each stage runs at most WPConcurrency items at once.
const WP = "wp"

// Defaults of the WP workload.
const (
	DefaultWPItems       = 10000
	DefaultWPStages      = 3
	DefaultWPMillis      = 1
	DefaultWPConcurrency = 256
)

type pipelineStage struct {
	Name        string `json:"name"`
	Handler     string `json:"handler"`
	Concurrency int    `json:"concurrency,omitempty"`
}

type pipelineBody struct {
	Mode   string            `json:"mode"`
	Stages []pipelineStage   `json:"stages"`
	Items  []json.RawMessage `json:"items"`
}

type pipelineGroup struct {
	Group
	CreatedAt  Time `json:"created_at"`
	FinishedAt Time `json:"finished_at"`
	Items      int  `json:"items"`
	Skipped    []struct {
		Item   int    `json:"item"`
		Stage  string `json:"stage"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

type pipelineTask struct {
	Task
	Stage *int `json:"stage"`
	Item  *int `json:"item"`
}

func (r *runner) wp(ctx context.Context, cl *Cluster, rep int) (RepResult, error) {
	items, stages, ms := r.cfg.WPItems, DefaultWPStages, DefaultWPMillis
	body := pipelineBody{Mode: "pipeline"}
	for s := range stages {
		body.Stages = append(body.Stages, pipelineStage{Name: fmt.Sprintf("s%d", s), Handler: "sleep", Concurrency: r.cfg.WPConcurrency})
	}
	body.Items = make([]json.RawMessage, items)
	for i := range body.Items {
		body.Items[i] = json.RawMessage(fmt.Sprintf(`{"ms":%d,"rep":%d,"i":%d}`, ms, rep, i))
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WaitTimeout)
	defer cancel()
	start := time.Now()
	var sub Submitted
	if err := retry503(ctx, func() error {
		return cl.Client(0).do(ctx, http.MethodPost, "/v1/groups", 0, body, &sub)
	}); err != nil {
		return RepResult{}, fmt.Errorf("bench: wp submit: %w", err)
	}
	// Wait without the task list (30,000 tasks per poll would be the bench
	// measuring itself), then read it once.
	var done time.Time
	for {
		var g Group
		err := cl.Client(0).do(ctx, http.MethodGet, "/v1/groups/"+sub.Group+"?tasks=false&wait="+longPoll.String(), longPoll, nil, &g)
		if err == nil && terminal(g.State) {
			done = time.Now()
			break
		}
		if ctx.Err() != nil {
			return RepResult{}, fmt.Errorf("bench: wp group %s not done: %w", sub.Group, ctx.Err())
		}
	}
	var g struct {
		pipelineGroup
		Tasks []pipelineTask `json:"tasks"`
	}
	if err := cl.Client(1%cl.Len()).do(ctx, http.MethodGet, "/v1/groups/"+sub.Group, 0, nil, &g); err != nil {
		return RepResult{}, fmt.Errorf("bench: wp read group: %w", err)
	}
	var ck checks
	firstOut := checkPipeline(&ck, g.State, g.Items, len(g.Skipped), g.Tasks, body.Items, stages)
	makespan := done.Sub(start).Seconds()
	lb := math.Max(float64(items*stages*ms)/float64(cl.Len()*r.cfg.Slots), float64(stages*ms)) / 1000
	return RepResult{Rep: rep, Problems: ck.list, ProblemCount: ck.count, Metrics: []Metric{
		{"makespan", "s", makespan},
		{"LB", "s", lb},
		{"makespan/LB", "x", makespan / lb},
		{"first_out", "s", firstOut.Sub(start).Seconds()},
		// The owner's view: from the group's creation to its last task.
		{"owner_makespan", "s", g.FinishedAt.Sub(g.CreatedAt.Time).Seconds()},
	}}, nil
}

// checkPipeline checks that every item went through every stage in order
// and came out of the last stage with its own payload (sleep returns its
// payload, and a stage's payload is the previous stage's result). It
// returns when the first item left the pipeline.
func checkPipeline(ck *checks, state string, nItems, skipped int, tasks []pipelineTask, items []json.RawMessage, stages int) time.Time {
	if state != "SUCCEEDED" || nItems != len(items) || skipped != 0 || len(tasks) != len(items)*stages {
		ck.addf("pipeline: state %s, %d items, %d skipped, %d tasks; want SUCCEEDED, %d items, 0 skipped, %d tasks",
			state, nItems, skipped, len(tasks), len(items), len(items)*stages)
		return time.Time{}
	}
	var firstOut time.Time
	for i, t := range tasks {
		item, stage := i/stages, i%stages
		switch {
		case t.Item == nil || t.Stage == nil || *t.Item != item || *t.Stage != stage:
			ck.addf("pipeline: task %s is not item %d of stage %d", t.ID, item, stage)
			continue
		case t.State != "SUCCEEDED":
			ck.addf("pipeline: task %s is %s", t.ID, t.State)
			continue
		}
		if stage > 0 && t.StartedAt.Before(tasks[i-1].FinishedAt.Time) {
			ck.addf("pipeline: item %d started stage %d before it left stage %d", item, stage, stage-1)
		}
		if stage == stages-1 {
			if !jsonEqual(t.Result, items[item]) {
				ck.addf("pipeline: item %d came out as %s, want %s", item, clip(t.Result), clip(items[item]))
			}
			if at := t.FinishedAt.Time; !at.IsZero() && (firstOut.IsZero() || at.Before(firstOut)) {
				firstOut = at
			}
		}
	}
	return firstOut
}
