package main

import (
	"context"
	"fmt"
)

// DrainCommand asks a peer to drain and leave.
type DrainCommand struct{ *Globals }

// Usage returns the help of drain.
func (c *DrainCommand) Usage() string {
	return usageOf("usage: needle drain\n\n"+
		"Asks the peer at --addr to drain, as SIGTERM does: it stops taking leases,\n"+
		"hands the leadership of its partitions to other replicas, lets its running\n"+
		"tasks finish (up to its --drain-timeout), then exits.", c.flagSet("drain"))
}

// Run asks for the drain.
func (c *DrainCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flagSet("drain"), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("drain takes no arguments")
	}
	if err := c.client().Drain(ctx); err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, "draining; the peer exits when its work is handed over")
	return nil
}
