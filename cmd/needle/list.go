package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// ListCommand lists tasks (or groups) of the whole mesh, newest first.
type ListCommand struct {
	*Globals
	states                        stringList
	handler, mode, peer, label, q string
	schedule, cursor              string
	since, until                  time.Duration
	limit, deaths                 int
	groups, all, asJSON           bool
	now                           func() time.Time
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (c *ListCommand) flags() *flag.FlagSet {
	fs := c.flagSet("list")
	fs.Var(&c.states, "state", "only tasks (groups with --groups) in this state; repeatable, or comma-separated (failed, ready, ...)")
	c.taskFlags(fs)
	fs.StringVar(&c.mode, "mode", "", "only groups of this mode")
	fs.StringVar(&c.schedule, "schedule", "", "only groups fired by this schedule id")
	fs.IntVar(&c.limit, "limit", 50, "items per page (1..1000)")
	fs.StringVar(&c.cursor, "cursor", "", "resume after a previous page (its printed cursor)")
	fs.BoolVar(&c.all, "all", false, "follow the cursors to the end")
	fs.BoolVar(&c.groups, "groups", false, "list groups instead of tasks")
	fs.BoolVar(&c.asJSON, "json", false, "print the API responses as JSON")
	return fs
}

// taskFlags adds the filters of tasks (needle list, and needle retry's
// bulk form) to fs.
func (c *ListCommand) taskFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.handler, "handler", "", "only tasks of this handler")
	fs.StringVar(&c.peer, "peer", "", "only tasks that ran on this peer id")
	fs.StringVar(&c.label, "label", "", "only tasks requiring this key=value label")
	fs.IntVar(&c.deaths, "worker-deaths", 0, "only tasks at least N external workers died running since their last outcome")
	fs.StringVar(&c.q, "q", "", "a substring of a task name, task or group id, or group key")
	fs.DurationVar(&c.since, "since", 0, "only work created in the last D (e.g. 1h)")
	fs.DurationVar(&c.until, "until", 0, "only work created more than D ago")
}

// checkTaskFlags refuses the task filters' bad values.
func (c *ListCommand) checkTaskFlags() error {
	if c.since < 0 || c.until < 0 {
		return usagef("--since and --until want a positive duration")
	}
	if c.deaths < 0 {
		return usagef("--worker-deaths wants a positive count")
	}
	return nil
}

// Usage returns the help of list.
func (c *ListCommand) Usage() string {
	return usageOf("usage: needle list [--state failed] [--handler H] [--since 1h] [--groups] [--all] [--json]\n\n"+
		"Lists the tasks (or groups) of the whole mesh, newest first. A page that\n"+
		"is not the last ends with the cursor of the next (--cursor).", c.flags())
}

func (c *ListCommand) query() url.Values {
	q := url.Values{}
	for _, s := range c.states {
		q.Add("state", s) // the API matches any case, and echoes a bad one as sent
	}
	for k, v := range map[string]string{"handler": c.handler, "mode": c.mode, "peer": c.peer,
		"label": c.label, "schedule": c.schedule, "q": c.q, "cursor": c.cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	if c.since > 0 {
		q.Set("created_after", now().Add(-c.since).UTC().Format(time.RFC3339Nano))
	}
	if c.until > 0 {
		q.Set("created_before", now().Add(-c.until).UTC().Format(time.RFC3339Nano))
	}
	if c.deaths > 0 {
		q.Set("worker_deaths", strconv.Itoa(c.deaths))
	}
	q.Set("limit", strconv.Itoa(c.limit))
	return q
}

// Run lists.
func (c *ListCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("list takes no arguments (filters are flags)")
	}
	if err := c.checkTaskFlags(); err != nil {
		return err
	}
	q := c.query()
	for {
		cursor, err := c.page(ctx, q)
		if err != nil || cursor == "" {
			return err
		}
		if !c.all {
			fmt.Fprintf(c.Stderr, "more: needle list ... --cursor %s\n", cursor)
			return nil
		}
		q.Set("cursor", cursor)
	}
}

// page prints one page and returns the next page's cursor.
func (c *ListCommand) page(ctx context.Context, q url.Values) (string, error) {
	cl := c.client()
	var cursor string
	var missing []int
	if c.groups {
		l, err := cl.ListGroups(ctx, q)
		if err != nil {
			return "", err
		}
		cursor, missing = l.Cursor, l.MissingPartitions
		if err := c.printGroups(l); err != nil {
			return "", err
		}
	} else {
		l, err := cl.ListTasks(ctx, q)
		if err != nil {
			return "", err
		}
		cursor, missing = l.Cursor, l.MissingPartitions
		if err := c.printTasks(l); err != nil {
			return "", err
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(c.Stderr, "needle: %d partitions did not answer (their work is missing): %v\n", len(missing), missing)
	}
	return cursor, nil
}

func (c *ListCommand) printTasks(l *api.TaskList) error {
	if c.asJSON {
		return printJSON(c.Stdout, l)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tHANDLER\tATTEMPT\tCREATED\tPEER\tERROR")
	for _, t := range l.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.ID, t.State, t.Handler, t.Attempt, fmtTime(t.CreatedAt), orDash(t.Peer), errorCell(&t))
	}
	return tw.Flush()
}

func (c *ListCommand) printGroups(l *api.GroupList) error {
	if c.asJSON {
		return printJSON(c.Stdout, l)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODE\tSTATE\tTASKS\tCREATED\tCOUNTS")
	for _, g := range l.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", g.ID, g.Mode, g.State, g.Total, fmtTime(g.CreatedAt), countsText(g.Counts))
	}
	return tw.Flush()
}
