package main

import (
	"context"
	"flag"
	"fmt"
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
	key    string
	asJSON bool
	bulk   bulk
}

func (c *RetryCommand) flags() *flag.FlagSet {
	fs := c.flagSet("retry")
	fs.StringVar(&c.key, "key", "", "idempotency key: the same key again does nothing (with filters: KEY:<task id> for each)")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	c.bulk.addFlags(fs, c.action())
	return fs
}

// action is the bulk form's: retry each task, keyed KEY:<task id>.
func (c *RetryCommand) action() *bulkAction {
	return &bulkAction{cmd: "retry", verb: "retried", states: []string{"FAILED", "CANCELED"}, defaults: []string{"FAILED"},
		do: func(ctx context.Context, cl *api.Client, id string) (string, bool, error) {
			key := ""
			if c.key != "" {
				key = c.key + ":" + id
			}
			t, err := cl.RetryTask(ctx, id, key)
			if err != nil {
				return "", false, err
			}
			return fmt.Sprintf("%s %s attempt %d", t.ID, t.State, t.Attempt), t.Repeat, nil
		},
		repeats: "already retried with this key"}
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
	switch bulk := filtered(fs, "key", "json"); {
	case len(pos) == 0 && bulk:
		return c.bulk.run(ctx, c.Globals, c.action())
	case len(pos) != 1:
		return usagef("want exactly one task or group id, or filters (--handler, --since, ...) to retry the FAILED tasks that match")
	case bulk:
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
		_, err = fmt.Fprintf(c.Stdout, "%s %s attempt %d%s\n", t.ID, t.State, t.Attempt, c.repeatNote(t.Repeat))
		return err
	}
	g, err := cl.RetryGroup(ctx, pos[0], c.key)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, g)
	}
	_, err = fmt.Fprintf(c.Stdout, "%s %s %s%s\n", g.ID, g.State, countsText(g.Counts), c.repeatNote(g.Repeat))
	return err
}

// repeatNote marks the line of a retry its key made a repeat.
func (c *RetryCommand) repeatNote(repeat bool) string {
	if !repeat {
		return ""
	}
	return fmt.Sprintf(" (already retried with key %q: nothing ran again)", c.key)
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
