package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"slices"
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
	fs.BoolVar(&c.all, "all", false, "follow the cursors to the end; print every page as one list")
	fs.BoolVar(&c.groups, "groups", false, "list groups instead of tasks")
	fs.BoolVar(&c.asJSON, "json", false, "print the API's answer as JSON (with --all, one document of every page's items)")
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
	if c.since > 0 && c.until >= c.since {
		// An empty window matched nothing, silently: a list printed no
		// row, a retry or cancel "0 tasks match".
		return usagef("--until %s is not shorter than --since %s: nothing was created in the last %s and more than %s ago "+
			"(--since 2h --until 1h: created between 2 and 1 hours ago)", c.until, c.since, c.since, c.until)
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
		"is not the last ends with the cursor of the next (--cursor). With --all,\n"+
		"every page is read first and printed as one table, or with --json as one\n"+
		"document of every item (the shape of one page's answer, without a cursor).", c.flags())
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
	// Every page goes into one answer: one table under one header, or
	// one JSON document of every item, with --all (it printed a header, or
	// a document, per page).
	out := &listOut{tasks: api.TaskList{Tasks: []api.Task{}}, groups: api.GroupList{Groups: []api.Group{}},
		missing: map[int]bool{}, tw: tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)}
	q := c.query()
	var cursor string
	for {
		if cursor, err = c.page(ctx, q, out); err != nil || cursor == "" || !c.all {
			break
		}
		q.Set("cursor", cursor)
	}
	if err == nil || !c.asJSON {
		// The rows read before an error are printed, not a part of a
		// JSON document.
		if perr := c.print(out, cursor); err == nil {
			err = perr
		}
	}
	if n := len(out.missing); n > 0 {
		fmt.Fprintf(c.Stderr, "needle: %d partitions did not answer (their work is missing): %v\n", n, slices.Sorted(maps.Keys(out.missing)))
	}
	if err == nil && cursor != "" {
		fmt.Fprintf(c.Stderr, "more: needle list ... --cursor %s\n", cursor)
	}
	return err
}

// listOut gathers the pages of a list.
type listOut struct {
	tasks   api.TaskList
	groups  api.GroupList
	missing map[int]bool // partitions that did not answer, of any page
	tw      *tabwriter.Writer
	header  bool // the table's header is written to tw
}

// page reads one page into out and returns the next page's cursor.
func (c *ListCommand) page(ctx context.Context, q url.Values, out *listOut) (string, error) {
	cl := c.client()
	var cursor string
	var missing []int
	if c.groups {
		l, err := cl.ListGroups(ctx, q)
		if err != nil {
			return "", err
		}
		cursor, missing = l.Cursor, l.MissingPartitions
		out.groups.Groups = append(out.groups.Groups, l.Groups...)
		if !c.asJSON {
			if !out.header {
				out.header = true
				fmt.Fprintln(out.tw, "ID\tMODE\tSTATE\tTASKS\tCREATED\tCOUNTS")
			}
			for _, g := range l.Groups {
				fmt.Fprintf(out.tw, "%s\t%s\t%s\t%d\t%s\t%s\n", g.ID, g.Mode, g.State, g.Total, fmtTime(g.CreatedAt), countsText(g.Counts))
			}
		}
	} else {
		l, err := cl.ListTasks(ctx, q)
		if err != nil {
			return "", err
		}
		cursor, missing = l.Cursor, l.MissingPartitions
		out.tasks.Tasks = append(out.tasks.Tasks, l.Tasks...)
		if !c.asJSON {
			if !out.header {
				out.header = true
				fmt.Fprintln(out.tw, "ID\tSTATE\tHANDLER\tATTEMPT\tCREATED\tPEER\tERROR")
			}
			for _, t := range l.Tasks {
				fmt.Fprintf(out.tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.ID, t.State, t.Handler, t.Attempt, fmtTime(t.CreatedAt), orDash(t.Peer), errorCell(&t))
			}
		}
	}
	for _, p := range missing {
		out.missing[p] = true
	}
	return cursor, nil
}

// print writes the list: the table, or one JSON document of every item
// read, with the partitions missing from any page and cursor, the next
// page's ("" after the last page, and always with --all).
func (c *ListCommand) print(out *listOut, cursor string) error {
	if !c.asJSON {
		return out.tw.Flush()
	}
	missing := slices.Sorted(maps.Keys(out.missing))
	if c.groups {
		out.groups.Cursor, out.groups.MissingPartitions = cursor, missing
		return printJSON(c.Stdout, out.groups)
	}
	out.tasks.Cursor, out.tasks.MissingPartitions = cursor, missing
	return printJSON(c.Stdout, out.tasks)
}
