package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
)

// EventsCommand prints a task's history.
type EventsCommand struct {
	*Globals
	asJSON bool
}

func (c *EventsCommand) flags() *flag.FlagSet {
	fs := c.flagSet("events")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	return fs
}

// Usage returns the help of events.
func (c *EventsCommand) Usage() string {
	return usageOf("usage: needle events TASK-ID [--json]\n\n"+
		"Prints a task's history: seq, type, time, round, peer, error.", c.flags())
}

// Run prints the events.
func (c *EventsCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || !isTaskID(pos[0]) {
		return usagef("want exactly one task id (<group>.<n>)")
	}
	evs, err := c.client().Events(ctx, pos[0])
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, map[string]any{"events": evs})
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTYPE\tAT\tROUND\tPEER\tERROR")
	for _, e := range evs {
		errText := orDash(oneLine(e.Error))
		if e.By != "" {
			errText += " (by " + e.By + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", e.Seq, e.Type, fmtTime(e.At), e.Round, orDash(e.Peer), errText)
	}
	return tw.Flush()
}
