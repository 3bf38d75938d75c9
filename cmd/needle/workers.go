package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WorkersCommand prints the external workers of the mesh.
type WorkersCommand struct {
	*Globals
	asJSON bool
}

func (c *WorkersCommand) flags() *flag.FlagSet {
	fs := c.flagSet("workers")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	return fs
}

// Usage returns the help of workers.
func (c *WorkersCommand) Usage() string {
	return usageOf("usage: needle workers [--json]\n\n"+
		"Prints the live external workers of the whole mesh (processes polling\n"+
		"POST /v1/workers/poll): id, the peer it polls, handlers, labels, tasks\n"+
		"running, slots (the tasks it runs at once, as configured; - for a worker\n"+
		"of an older release, which does not say), whether a poll waits, last seen.", c.flags())
}

// Run prints the workers.
func (c *WorkersCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("workers takes no arguments")
	}
	wl, err := c.client().Workers(ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, wl)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPEER\tHANDLERS\tLABELS\tRUNNING\tSLOTS\tPOLLING\tLAST SEEN")
	for _, w := range wl.Workers {
		labels := strings.Join(w.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		polling := "no"
		if w.Polling {
			polling = "yes"
		}
		slots := "-"
		if w.Slots != nil {
			slots = strconv.Itoa(*w.Slots)
		}
		seen := time.Since(w.LastSeen).Round(time.Millisecond).String() + " ago"
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", w.ID, shortID(w.Peer), strings.Join(w.Handlers, ","), labels,
			w.Running, slots, polling, seen)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(wl.Workers) == 0 {
		fmt.Fprintln(c.Stderr, "no live worker")
	}
	if len(wl.Unreachable) > 0 {
		fmt.Fprintf(c.Stderr, "not answering (their workers are missing): %s\n", strings.Join(wl.Unreachable, ", "))
	}
	return nil
}

// shortID shortens a peer id for a table (its last 8 characters).
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-8:]
}
