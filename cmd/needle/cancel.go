package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/needle-mesh/needle/peer/api"
)

// CancelCommand cancels a task (and its dependents) or a whole group; or,
// given filters instead of an id, every unfinished task that matches them.
type CancelCommand struct {
	*Globals
	asJSON bool
	bulk   bulk
}

func (c *CancelCommand) flags() *flag.FlagSet {
	fs := c.flagSet("cancel")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	c.bulk.addFlags(fs, cancelAction)
	return fs
}

// cancelAction is the bulk form's: cancel each task (a task that finished
// meanwhile stays as it is).
var cancelAction = &bulkAction{cmd: "cancel", verb: "canceled",
	states:   []string{"PENDING", "READY", "RUNNING", "WAITING"},
	defaults: []string{"PENDING", "READY", "RUNNING", "WAITING"},
	do: func(ctx context.Context, cl *api.Client, id string) (string, bool, error) {
		t, err := cl.CancelTask(ctx, id)
		if err != nil {
			return "", false, err
		}
		return fmt.Sprintf("%s %s", t.ID, t.State), false, nil
	}}

// Usage returns the help of cancel.
func (c *CancelCommand) Usage() string {
	return usageOf("usage: needle cancel ID [--json]\n"+
		"       needle cancel [--state ready,...] [--handler H] [--since D] [...] [--max N] [--dry-run]\n\n"+
		"Cancels a task (and the tasks that depend on it), or every non-terminal\n"+
		"task of a group. Given filters (those of needle list) instead of an id,\n"+
		"it cancels every unfinished task of the mesh that matches them, as after\n"+
		"a flood of tasks of a misspelt handler: needle cancel --handler ech0.\n"+
		"It lists them all first, and cancels none when more than --max match.", c.flags())
}

// Run cancels.
func (c *CancelCommand) Run(ctx context.Context, args []string) error {
	fs := c.flags()
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch bulk := filtered(fs, "json"); {
	case len(pos) == 0 && bulk:
		return c.bulk.run(ctx, c.Globals, cancelAction)
	case len(pos) != 1:
		return usagef("want exactly one task or group id, or filters (--handler, --since, ...) to cancel the unfinished tasks that match")
	case bulk:
		return usagef("an id or filters, not both")
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
