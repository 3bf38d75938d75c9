package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// GetCommand prints a task or a group.
type GetCommand struct {
	*Globals
	asJSON bool
}

func (c *GetCommand) flags() *flag.FlagSet {
	fs := c.flagSet("get")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	return fs
}

// Usage returns the help of get.
func (c *GetCommand) Usage() string {
	return usageOf("usage: needle get ID [--json]\n\n"+
		"Prints a task (ID \"<group>.<n>\") or a group.", c.flags())
}

// Run prints the task or group.
func (c *GetCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one task or group id")
	}
	cl := c.client()
	if isTaskID(pos[0]) {
		t, err := cl.GetTask(ctx, pos[0], 0)
		if err != nil {
			return err
		}
		if c.asJSON {
			return printJSON(c.Stdout, t)
		}
		return printTask(c.Stdout, t)
	}
	g, err := cl.GetGroup(ctx, pos[0], 0)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, g)
	}
	return printGroup(c.Stdout, g)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printTask prints a task as "field  value" lines.
func printTask(w io.Writer, t *api.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	errText := "-"
	if t.Error != nil {
		errText = *t.Error
	}
	result := "-"
	if len(t.Result) > 0 && string(t.Result) != "null" { // null: no result yet
		result = string(t.Result)
	}
	rows := [][2]string{
		{"id", t.ID}, {"group", t.Group}, {"name", orDash(t.Name)}, {"handler", t.Handler},
		{"state", t.State}, {"priority", fmt.Sprint(t.Priority)}, {"attempt", fmt.Sprint(t.Attempt)},
		{"round", fmt.Sprint(t.Round)}, {"peer", orDash(t.Peer)}, {"deps", orDash(strings.Join(t.Deps, ","))},
		{"created", fmtTime(t.CreatedAt)}, {"started", fmtTime(t.StartedAt)}, {"finished", fmtTime(t.FinishedAt)},
	}
	if t.NotBefore != nil {
		rows = append(rows, [2]string{"not before", fmtTime(t.NotBefore)})
	}
	if t.Stage != nil {
		rows = append(rows, [2]string{"stage", fmt.Sprint(*t.Stage)})
	}
	if t.Item != nil {
		rows = append(rows, [2]string{"item", fmt.Sprint(*t.Item)})
	}
	if len(t.Require) > 0 {
		rows = append(rows, [2]string{"requires", strings.Join(t.Require, ",")})
	}
	if t.Pin != "" {
		rows = append(rows, [2]string{"pinned to", t.Pin})
	}
	if t.Retries > 0 {
		rows = append(rows, [2]string{"retries", fmt.Sprint(t.Retries)})
	}
	if d := t.WorkerDeaths; d != nil {
		rows = append(rows, [2]string{"worker deaths", fmt.Sprintf("%d alone, %d beside other tasks", d.Alone, d.Shared)})
	}
	if t.Waiting != "" {
		// Why a READY task runs nowhere: the first thing to read when one
		// stays READY.
		rows = append(rows, [2]string{"waiting", t.Waiting})
	}
	rows = append(rows, [2]string{"result", result}, [2]string{"error", errText})
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// countsText prints the nonzero counts in state order.
func countsText(counts map[string]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", s, counts[s]))
	}
	return orDash(strings.Join(parts, " "))
}

// printGroup prints a group's summary (a streaming pipeline's progress
// per stage, its webhook's delivery) and a table of its tasks.
func printGroup(w io.Writer, g *api.Group) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\nmode\t%s\nstate\t%s\n", g.ID, g.Mode, g.State)
	if g.Key != "" {
		fmt.Fprintf(tw, "key\t%s\n", g.Key)
	}
	fmt.Fprintf(tw, "tasks\t%d\ncounts\t%s\ncreated\t%s\nfinished\t%s\n",
		g.Total, countsText(g.Counts), fmtTime(g.CreatedAt), fmtTime(g.FinishedAt))
	if g.Concurrency > 0 {
		fmt.Fprintf(tw, "concurrency\t%d at a time\n", g.Concurrency)
	}
	if len(g.Stages) > 0 {
		fmt.Fprintf(tw, "items\t%d\n", g.Items)
		if len(g.Skipped) > 0 {
			fmt.Fprintf(tw, "skipped\t%d (FAILED at a stage; their later stages CANCELED)\n", len(g.Skipped))
		}
	}
	if n := g.Notify; n != nil {
		fmt.Fprintf(tw, "webhook\t%s\n", notifyText(n))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(g.Stages) > 0 {
		// A pipeline's progress is per stage: how many items left each.
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STAGE\tCONCURRENCY\tDONE")
		for _, st := range g.Stages {
			conc := "unbounded"
			if st.Concurrency > 0 {
				conc = fmt.Sprint(st.Concurrency)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\n", st.Name, conc, st.Done, g.Items)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(g.Tasks) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSTATE\tATTEMPT\tPEER\tERROR")
	for _, t := range g.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", orDash(t.Name), t.ID, t.State, t.Attempt, orDash(t.Peer), errorCell(&t))
	}
	return tw.Flush()
}

// notifyText is a webhook's delivery state on one line.
func notifyText(n *api.NotifyStatus) string {
	s := n.URL + ": " + n.State
	switch {
	case n.Attempts == 1:
		s += " (1 attempt)"
	case n.Attempts > 1:
		s += fmt.Sprintf(" (%d attempts)", n.Attempts)
	}
	if n.LastError != "" {
		s += ", last error: " + oneLine(n.LastError)
	}
	if n.Next != nil {
		s += ", next at " + fmtTime(n.Next)
	}
	return s
}

// errorCell is a task's cell in a table's ERROR column: its error, or
// why it waits when it is READY and no live peer may run it.
func errorCell(t *api.Task) string {
	switch {
	case t.Error != nil:
		return oneLine(*t.Error)
	case t.Waiting != "":
		return "waiting: " + t.Waiting
	}
	return "-"
}

// oneLine keeps a table cell on one line, of at most maxCell characters
// (an error may be a whole traceback: needle get prints it all).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}

// maxCell bounds a table cell, in characters.
const maxCell = 120
