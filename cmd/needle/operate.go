package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// StatsCommand prints the mesh's task counts per handler and state.
type StatsCommand struct {
	*Globals
	asJSON bool
}

func (c *StatsCommand) flags() *flag.FlagSet {
	fs := c.flagSet("stats")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	return fs
}

// Usage returns the help of stats.
func (c *StatsCommand) Usage() string {
	return usageOf("usage: needle stats [--json]\n\n"+
		"Prints, per handler, the tasks of the whole mesh by state and how long\n"+
		"the oldest READY task has waited.", c.flags())
}

var statOrder = []string{"PENDING", "READY", "RUNNING", "WAITING", "SUCCEEDED", "FAILED", "CANCELED"}

// Run prints the counts.
func (c *StatsCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("stats takes no arguments")
	}
	st, err := c.client().Stats(ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, st)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "HANDLER\t")
	for _, s := range statOrder {
		fmt.Fprintf(tw, "%s\t", s)
	}
	fmt.Fprintln(tw, "OLDEST READY\t")
	for _, h := range st.Handlers {
		fmt.Fprintf(tw, "%s\t", h.Handler)
		for _, s := range statOrder {
			fmt.Fprintf(tw, "%d\t", h.Counts[s])
		}
		age := "-"
		if h.OldestReadyAge > 0 {
			age = (time.Duration(h.OldestReadyAge * float64(time.Second))).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t\n", age)
	}
	if len(st.MissingPartitions) > 0 {
		fmt.Fprintf(c.Stderr, "needle: %d partitions did not answer: %v\n", len(st.MissingPartitions), st.MissingPartitions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range st.Handlers {
		if h.Waiting != "" {
			// Its READY tasks pile up: say why under the table.
			fmt.Fprintf(c.Stdout, "%s: %d READY wait: %s\n", h.Handler, h.Counts["READY"], h.Waiting)
		}
	}
	return nil
}

// RetryCommand runs a FAILED or CANCELED task, or a group's, again; or,
// given filters instead of an id, every task that matches them.
type RetryCommand struct {
	*Globals
	key         string
	asJSON      bool
	filter      ListCommand // the bulk form's filters (needle list's)
	states      stringList
	max         int
	dryRun      bool
	concurrency int // retries in flight (0: bulkRetryConcurrency)
}

func (c *RetryCommand) flags() *flag.FlagSet {
	fs := c.flagSet("retry")
	fs.StringVar(&c.key, "key", "", "idempotency key: the same key again does nothing (with filters: KEY:<task id> for each)")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	fs.Var(&c.states, "state", "with filters: the states to retry, failed (default) and/or canceled")
	c.filter.taskFlags(fs)
	fs.IntVar(&c.max, "max", 1000, "with filters: retry nothing when more tasks than this match")
	fs.BoolVar(&c.dryRun, "dry-run", false, "with filters: print the tasks that match, retry none")
	return fs
}

// Usage returns the help of retry.
func (c *RetryCommand) Usage() string {
	return usageOf("usage: needle retry ID [--key K] [--json]\n"+
		"       needle retry [--state failed,canceled] [--handler H] [--since D] [...] [--max N] [--dry-run]\n\n"+
		"Runs a FAILED or CANCELED task again in place (its dependents that were\n"+
		"canceled because of it too), or every FAILED and CANCELED task of a group.\n"+
		"Given filters (those of needle list) instead of an id, it retries every\n"+
		"FAILED task of the mesh that matches them (--state canceled for CANCELED\n"+
		"ones), as after an outage: needle retry --handler send-email --since 2h.\n"+
		"It lists them all first, and retries none when more than --max match.", c.flags())
}

// Run retries.
func (c *RetryCommand) Run(ctx context.Context, args []string) error {
	fs := c.flags()
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	filtered := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "key" && f.Name != "json" {
			filtered = true
		}
	})
	switch {
	case len(pos) == 0 && filtered:
		return c.bulk(ctx)
	case len(pos) != 1:
		return usagef("want exactly one task or group id, or filters (--handler, --since, ...) to retry the FAILED tasks that match")
	case filtered:
		return usagef("an id or filters, not both")
	}
	cl := c.client()
	if isTaskID(pos[0]) {
		t, err := cl.RetryTask(ctx, pos[0], c.key)
		if err != nil {
			return err
		}
		if c.asJSON {
			return printJSON(c.Stdout, t)
		}
		_, err = fmt.Fprintf(c.Stdout, "%s %s attempt %d\n", t.ID, t.State, t.Attempt)
		return err
	}
	g, err := cl.RetryGroup(ctx, pos[0], c.key)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, g)
	}
	_, err = fmt.Fprintf(c.Stdout, "%s %s %s\n", g.ID, g.State, countsText(g.Counts))
	return err
}

// bulkRetryConcurrency is how many retries the bulk form has in flight.
const bulkRetryConcurrency = 8

// bulk retries every task the filters match: it lists them all first
// (more than --max, or a partition that did not answer: none is retried),
// then retries each, a few at a time. A task that is no longer FAILED or
// CANCELED when its turn comes (409: retried by someone else meanwhile)
// is skipped; any other error is reported, and the command exits 1 after
// the rest.
func (c *RetryCommand) bulk(ctx context.Context) error {
	if err := c.filter.checkTaskFlags(); err != nil {
		return err
	}
	if c.max < 1 {
		return usagef("--max wants a positive count")
	}
	c.filter.states = nil
	for _, s := range c.states {
		for _, st := range strings.Split(s, ",") {
			switch st = strings.ToUpper(strings.TrimSpace(st)); st {
			case "FAILED", "CANCELED":
				c.filter.states = append(c.filter.states, st)
			default:
				return usagef("--state %q: only FAILED and CANCELED tasks can be retried", st)
			}
		}
	}
	if len(c.filter.states) == 0 {
		c.filter.states = stringList{"FAILED"}
	}
	c.filter.limit = 1000
	cl := c.client()
	q := c.filter.query()
	var ids []string
	for {
		l, err := cl.ListTasks(ctx, q)
		if err != nil {
			return err
		}
		if len(l.MissingPartitions) > 0 {
			return &exitError{code: 1, err: fmt.Errorf("%d partitions did not answer (their tasks would be missed): %v; nothing retried, try again", len(l.MissingPartitions), l.MissingPartitions)}
		}
		for _, t := range l.Tasks {
			ids = append(ids, t.ID)
		}
		if len(ids) > c.max {
			return &exitError{code: 1, err: fmt.Errorf("more than %d tasks match (--max); nothing retried: narrow the filters or raise --max", c.max)}
		}
		if l.Cursor == "" {
			break
		}
		q.Set("cursor", l.Cursor)
	}
	if c.dryRun || len(ids) == 0 {
		for _, id := range ids {
			fmt.Fprintln(c.Stdout, id)
		}
		fmt.Fprintf(c.Stderr, "%d tasks match; none retried\n", len(ids))
		return nil
	}
	type outcome struct {
		line string
		err  error
	}
	out := make([]outcome, len(ids))
	sem := make(chan struct{}, cmp.Or(c.concurrency, bulkRetryConcurrency))
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			key := ""
			if c.key != "" {
				key = c.key + ":" + id
			}
			t, err := cl.RetryTask(ctx, id, key)
			if err != nil {
				out[i].err = err
				return
			}
			out[i].line = fmt.Sprintf("%s %s attempt %d", t.ID, t.State, t.Attempt)
		})
	}
	wg.Wait()
	var retried, skipped, failed int
	var firstErr error
	for i, o := range out {
		var ae *api.Error
		switch {
		case o.err == nil:
			retried++
			fmt.Fprintln(c.Stdout, o.line)
		case errors.As(o.err, &ae) && ae.Status == http.StatusConflict:
			skipped++
			fmt.Fprintf(c.Stderr, "needle: retry: %s skipped: %s\n", ids[i], ae.Message)
		default:
			failed++
			firstErr = cmp.Or(firstErr, o.err)
			fmt.Fprintf(c.Stderr, "needle: retry: %s: %v\n", ids[i], o.err)
		}
	}
	fmt.Fprintf(c.Stderr, "retried %d of %d matching tasks (%d no longer retryable, %d errors)\n", retried, len(ids), skipped, failed)
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of the retries failed, the first: %w", failed, firstErr)}
	}
	return nil
}

// AuditCommand prints the operator actions of the mesh.
type AuditCommand struct {
	*Globals
	limit  int
	asJSON bool
}

func (c *AuditCommand) flags() *flag.FlagSet {
	fs := c.flagSet("audit")
	fs.IntVar(&c.limit, "limit", 200, "entries to print (1..10000)")
	fs.BoolVar(&c.asJSON, "json", false, "print the entries as JSON")
	return fs
}

// Usage returns the help of audit.
func (c *AuditCommand) Usage() string {
	return usageOf("usage: needle audit [--limit N] [--json]\n\n"+
		"Prints who canceled or retried tasks and groups and who changed schedules,\n"+
		"newest first, for the whole mesh.", c.flags())
}

// Run prints the trail.
func (c *AuditCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || c.limit < 1 || c.limit > 10_000 {
		return usagef("audit takes no arguments and --limit in 1..10000")
	}
	entries, err := c.client().Audit(ctx, c.limit)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, map[string]any{"entries": entries})
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tACTION\tSUBJECT\tBY")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.At.Format(time.RFC3339Nano), e.Action, e.Subject, orDash(e.By))
	}
	return tw.Flush()
}
