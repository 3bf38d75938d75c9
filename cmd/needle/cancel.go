package main

import (
	"context"
	"flag"
	"fmt"
)

// CancelCommand cancels a task (and its dependents) or a whole group.
type CancelCommand struct {
	*Globals
	asJSON bool
}

func (c *CancelCommand) flags() *flag.FlagSet {
	fs := c.flagSet("cancel")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	return fs
}

// Usage returns the help of cancel.
func (c *CancelCommand) Usage() string {
	return usageOf("usage: needle cancel ID [--json]\n\n"+
		"Cancels a task, or every non-terminal task of a group.", c.flags())
}

// Run cancels.
func (c *CancelCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one task or group id")
	}
	cl := c.client()
	if isTaskID(pos[0]) {
		t, err := cl.CancelTask(ctx, pos[0])
		if err != nil {
			return err
		}
		if c.asJSON {
			return printJSON(c.Stdout, t)
		}
		_, err = fmt.Fprintf(c.Stdout, "%s %s\n", t.ID, t.State)
		return err
	}
	g, err := cl.CancelGroup(ctx, pos[0])
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, g)
	}
	_, err = fmt.Fprintf(c.Stdout, "%s %s %s\n", g.ID, g.State, countsText(g.Counts))
	return err
}
